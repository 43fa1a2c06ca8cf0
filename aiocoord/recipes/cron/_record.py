"""A cron job's record: the last scheduled time handled, the running claim, the bounded history.

One persistent node per job holds one JSON object, versioned by ``format``::

    {"format": "aiocoord.cron/1",
     "schedule": "0 */6 * * *", "timezone": "Europe/Berlin",   # for people and tools
     "last": 1718000000.0,     # every scheduled time up to here is claimed or given up
     "token": 4295,            # the largest fencing token that wrote this record
     "claim": {"at": 1718000000.0, "token": 4295, "worker": "…", "version": "2.5.0",
               "started": 1718000000.2, "attempt": 1, "catch_up": false},   # or null
     "history": [{"at", "status", "attempt", "token", "worker", "version",
                  "started", "ended", "error", "count", "catch_up"}, …]}   # oldest first

`status` is ``"ok"``, ``"failed"``, ``"interrupted"`` or ``"missed"``; a
``"missed"`` entry stands for `count` scheduled times given up at once, the
latest at `at`.  Times are Unix times.  Records are read and written by the
one record codec (`aiocoord._records`); anything that is not a
record of a format this code knows raises `NodeDataError` and is never
overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..._records import (
    FLAG,
    TEXT,
    TIMESTAMP,
    Invalid,
    Record,
    check_format,
    dump,
    integer,
    list_of,
    load_record,
    one_of,
)
from ...errors import NodeDataError

__all__ = ("FORMAT", "Claim", "Entry", "JobRecord", "Status", "decode", "encode")

FORMAT_NAME = "aiocoord.cron"
FORMAT_VERSION = 1
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"
MAX_ERROR = 300
TOKEN = integer(0, 2**63 - 1)  # a zxid
COUNT = integer(1, 2**63 - 1)
ATTEMPT = integer(1, 1_000_000)

Status = Literal["ok", "failed", "interrupted", "missed"]
STATUSES: tuple[Status, ...] = ("ok", "failed", "interrupted", "missed")


@dataclass(frozen=True, slots=True)
class Claim:
    """The firing being run: its scheduled time and who claimed it under which token."""

    at: float
    token: int
    worker: str
    version: str
    started: float
    attempt: int = 1
    catch_up: bool = False


@dataclass(frozen=True, slots=True)
class Entry:
    """One line of a job's history, as stored (`FiringOutcome` is its public face)."""

    at: float
    status: Status
    attempt: int = 1
    token: int | None = None
    worker: str | None = None
    version: str | None = None
    started: float | None = None
    ended: float | None = None
    error: str | None = None
    count: int = 1
    catch_up: bool = False

    @classmethod
    def of_claim(
        cls, claim: Claim, status: Status, *, ended: float | None, error: str | None = None
    ) -> Entry:
        """The outcome of a claimed firing."""
        if error is not None:
            # Any text an exception carries, lone surrogates included, as a record can hold it.
            error = error.encode("utf-8", "backslashreplace").decode("utf-8")
            if len(error) > MAX_ERROR:
                error = error[: MAX_ERROR - 3] + "..."
        return cls(
            at=claim.at,
            status=status,
            attempt=claim.attempt,
            token=claim.token,
            worker=claim.worker,
            version=claim.version,
            started=claim.started,
            ended=ended,
            error=error,
            catch_up=claim.catch_up,
        )


@dataclass(frozen=True, slots=True)
class JobRecord:
    """The decoded content of a job's node."""

    last: float
    schedule: str = ""
    timezone: str = ""
    token: int = 0
    claim: Claim | None = None
    history: tuple[Entry, ...] = field(default_factory=tuple)

    def with_entries(self, entries: tuple[Entry, ...], keep: int) -> JobRecord:
        """The record with `entries` appended to its history, keeping the last `keep`."""
        history = (*self.history, *entries)
        return replace(self, history=history[-keep:] if keep else ())

    def with_last(self, last: float) -> JobRecord:
        """The record with every scheduled time up to `last` handled."""
        return replace(self, last=max(self.last, last))


def encode(record: JobRecord) -> bytes:
    """The node data for `record` (compact JSON, UTF-8)."""
    obj: dict[str, Any] = {
        "format": FORMAT,
        "schedule": record.schedule,
        "timezone": record.timezone,
        "last": record.last,
        "token": record.token,
        "claim": None if record.claim is None else _claim_json(record.claim),
        "history": [_entry_json(e) for e in record.history],
    }
    return dump(obj)


def _claim_json(claim: Claim) -> dict[str, Any]:
    return {
        "at": claim.at,
        "token": claim.token,
        "worker": claim.worker,
        "version": claim.version,
        "started": claim.started,
        "attempt": claim.attempt,
        "catch_up": claim.catch_up,
    }


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "at": entry.at,
        "status": entry.status,
        "attempt": entry.attempt,
        "token": entry.token,
        "worker": entry.worker,
        "version": entry.version,
        "started": entry.started,
        "ended": entry.ended,
        "error": entry.error,
        "count": entry.count,
        "catch_up": entry.catch_up,
    }


def _check_format(record: Record) -> None:
    check_format(record, "cron job", FORMAT_NAME, FORMAT_VERSION)


def _read_entry(value: object) -> Entry:
    """One history entry (a reader for `list_of`: its errors become the record's)."""
    if not isinstance(value, dict):
        raise Invalid("must be an object")
    item = Record("", value)
    return Entry(
        at=item.get("at", TIMESTAMP),
        status=item.get("status", one_of(*STATUSES)),  # type: ignore[arg-type]
        attempt=item.get("attempt", ATTEMPT, 1),
        token=item.maybe("token", TOKEN),
        worker=item.maybe("worker", TEXT),
        version=item.maybe("version", TEXT),
        started=item.maybe("started", TIMESTAMP),
        ended=item.maybe("ended", TIMESTAMP),
        error=item.maybe("error", TEXT),
        count=item.get("count", COUNT, 1),
        catch_up=item.get("catch_up", FLAG, False),
    )


def _entry_reader(value: object) -> Entry:
    try:
        return _read_entry(value)
    except NodeDataError as exc:  # a field of the entry: say which
        raise Invalid(exc.reason) from None


def decode(path: str, data: bytes) -> JobRecord:
    """The record in `data`; `NodeDataError` for anything that is not one."""
    record = load_record(path, data)
    _check_format(record)
    claim_rec = record.maybe_record("claim")
    claim = None
    if claim_rec is not None:
        claim = Claim(
            at=claim_rec.get("at", TIMESTAMP),
            token=claim_rec.get("token", TOKEN),
            worker=claim_rec.get("worker", TEXT),
            version=claim_rec.get("version", TEXT),
            started=claim_rec.get("started", TIMESTAMP),
            attempt=claim_rec.get("attempt", ATTEMPT, 1),
            catch_up=claim_rec.get("catch_up", FLAG, False),
        )
    return JobRecord(
        last=record.get("last", TIMESTAMP),
        schedule=record.get("schedule", TEXT, ""),
        timezone=record.get("timezone", TEXT, ""),
        token=record.get("token", TOKEN, 0),
        claim=claim,
        history=tuple(record.get("history", list_of(_entry_reader), [])),
    )
