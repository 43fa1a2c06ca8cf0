"""The CAS lock's record and its decisions: pure, no I/O, no clock of its own.

The lock node holds one small JSON object, versioned by its ``format`` field::

    {"format": "aiocoord.cas-lock/1",
     "state": "held",                    # or "free"
     "owner": "pod-3",                   # the holder's name (the last holder's once free)
     "holder": "5f0c…",                  # id of this one acquisition, while held
     "lease_expires": 1718000000.123,    # holder's wall clock + lease, while held
     "token": null,                      # fencing token; null in the acquiring write itself
     "last_run": {"window": 1717999200.0, "at": 1717999230.5, "owner": "pod-3", "token": 4295},
     "last_failure": null,               # same shape as last_run, plus "error"
     "recent": ["9c1e04d2", "5a7b…"]}    # contenders that took it, least recently served first

``recent`` (absent in records written before it existed, and read as empty)
orders the waiters when the lock comes free: see `_turns`.

The fencing token is the mzxid of the acquiring write, which is only known once
that write is done; the acquiring write therefore carries ``"token": null``
(meaning "the mzxid of this very write") and the holder's first renewal or its
release fills it in.  An empty node is read as a free lock with no history, so
a node created by hand (``create /locks/x``) is fine; anything else that is not
a record of a format this code knows raises `NodeDataError` and is never
overwritten.  Records are read and written by the one record codec
(`aiocoord._records`): every time in them is a Unix time `datetime`
can hold, so `status()` and `once_per()` can always convert what they read.
"""

from __future__ import annotations

import enum
import math
import os
import socket
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ..._checks import check_seconds
from ..._records import (
    TEXT,
    TIMESTAMP,
    Record,
    check_format,
    dump,
    integer,
    list_of,
    load_record,
    one_of,
    show,
)
from ...errors import ConfigError

__all__ = (
    "FORMAT",
    "Assessment",
    "LockRecord",
    "LockStatus",
    "RunInfo",
    "Verdict",
    "check_interval",
    "check_lease",
    "check_owner",
    "check_skew",
    "assess",
    "decode",
    "encode",
    "error_text",
    "status_of",
    "to_datetime",
    "window_start",
)

FORMAT_NAME = "aiocoord.cas-lock"
FORMAT_VERSION = 1
FORMAT = f"{FORMAT_NAME}/{FORMAT_VERSION}"
MAX_OWNER = 256
MAX_ERROR = 300
MAX_LEASE = 10 * 365 * 86400.0
TOKEN = integer(0, 2**63 - 1)  # a zxid
RECENT = list_of(TEXT)  # contender ids, least recently served first


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run of a once-per-interval job: its window start, when it ended, who ran it."""

    window: float
    at: float
    owner: str
    token: int | None
    error: str | None = None

    def _to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "window": self.window,
            "at": self.at,
            "owner": self.owner,
            "token": self.token,
        }
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class LockRecord:
    """The decoded content of the lock node."""

    held: bool = False
    owner: str | None = None
    holder: str | None = None
    lease_expires: float | None = None
    token: int | None = None
    last_run: RunInfo | None = None
    last_failure: RunInfo | None = None
    recent: tuple[str, ...] = ()  # contender ids, least recently served first (see `_turns`)

    def acquired(
        self, *, owner: str, holder: str, expires: float, recent: tuple[str, ...] | None = None
    ) -> LockRecord:
        """The record that takes the lock (from free or from an expired holder)."""
        return replace(
            self,
            held=True,
            owner=owner,
            holder=holder,
            lease_expires=expires,
            token=None,
            recent=self.recent if recent is None else recent,
        )

    def renewed(self, *, expires: float, token: int) -> LockRecord:
        """The record that extends our lease (and states the token if still null)."""
        return replace(self, lease_expires=expires, token=token)

    def released(
        self, *, token: int, run: RunInfo | None = None, failure: RunInfo | None = None
    ) -> LockRecord:
        """The record that frees the lock, keeping the last holder's name and token."""
        return replace(
            self,
            held=False,
            holder=None,
            lease_expires=None,
            token=token,
            last_run=run if run is not None else self.last_run,
            last_failure=failure if failure is not None else self.last_failure,
        )


def encode(record: LockRecord) -> bytes:
    """The node data for `record` (compact JSON, UTF-8)."""
    obj: dict[str, Any] = {
        "format": FORMAT,
        "state": "held" if record.held else "free",
        "owner": record.owner,
        "holder": record.holder,
        "lease_expires": record.lease_expires,
        "token": record.token,
        "last_run": record.last_run._to_json() if record.last_run else None,
        "last_failure": record.last_failure._to_json() if record.last_failure else None,
    }
    if record.recent:
        obj["recent"] = list(record.recent)
    return dump(obj)


def _run(record: Record | None) -> RunInfo | None:
    if record is None:
        return None
    return RunInfo(
        window=record.get("window", TIMESTAMP),
        at=record.get("at", TIMESTAMP),
        owner=record.get("owner", TEXT),
        token=record.maybe("token", TOKEN),
        error=record.maybe("error", TEXT),
    )


def _check_format(record: Record) -> None:
    check_format(record, "lock", FORMAT_NAME, FORMAT_VERSION)


def decode(path: str, data: bytes) -> LockRecord | None:
    """The record in `data`; None for an empty node; `NodeDataError` for anything else."""
    if not data:
        return None
    record = load_record(path, data)
    _check_format(record)
    lock = LockRecord(
        held=record.get("state", one_of("held", "free")) == "held",
        owner=record.maybe("owner", TEXT),
        holder=record.maybe("holder", TEXT),
        lease_expires=record.maybe("lease_expires", TIMESTAMP),
        token=record.maybe("token", TOKEN),
        last_run=_run(record.maybe_record("last_run")),
        last_failure=_run(record.maybe_record("last_failure")),
        recent=tuple(record.maybe("recent", RECENT) or ()),
    )
    if lock.held and (lock.holder is None or lock.lease_expires is None):
        raise record.error("a held record needs 'holder' and 'lease_expires'")
    return lock


# --- decisions -----------------------------------------------------------------------------


class Verdict(enum.Enum):
    """What a contender that just read the record should do."""

    FREE = "free"  # nobody holds it: take it with a CAS
    EXPIRED = "expired"  # the holder's lease (plus the skew allowance) ran out: take it over
    OURS = "ours"  # our own acquiring write landed although its reply was lost: adopt it
    HELD = "held"  # a live lease: wait for a change, or until `wait` seconds have passed
    DONE = "done"  # once_per: this window already has a successful run


@dataclass(frozen=True, slots=True)
class Assessment:
    verdict: Verdict
    wait: float = 0.0

    @property
    def take(self) -> bool:
        """Whether to attempt the acquiring write."""
        return self.verdict in (Verdict.FREE, Verdict.EXPIRED)


def assess(
    record: LockRecord | None,
    *,
    now: float,
    skew: float,
    holder: str,
    window: float | None = None,
) -> Assessment:
    """Decide from a record read at wall time `now` by the contender whose attempt id is `holder`.

    A lease counts as expired only once `now` is past ``lease_expires + skew``:
    the expiry was computed on the holder's clock, and the two clocks may
    differ by up to `skew`.  With `window` (once_per), a successful run
    recorded for that window or a later one means there is nothing to do.
    """
    if record is None:
        return Assessment(Verdict.FREE)
    if record.held and record.holder == holder:
        return Assessment(Verdict.OURS)
    if window is not None and record.last_run is not None and record.last_run.window >= window:
        return Assessment(Verdict.DONE)
    if not record.held:
        return Assessment(Verdict.FREE)
    assert record.lease_expires is not None
    remaining = record.lease_expires + skew - now
    if remaining < 0:
        return Assessment(Verdict.EXPIRED)
    return Assessment(Verdict.HELD, wait=remaining)


@dataclass(frozen=True, slots=True)
class LockStatus:
    """What the record says, as read by `CasLock.status()`.

    `held` means a live lease as judged by the reader's clock plus the skew
    allowance; `token` is the current (or last) holder's fencing token.
    """

    held: bool
    owner: str | None
    token: int | None
    lease_expires: datetime | None
    last_run: datetime | None
    last_failure: str | None


def status_of(record: LockRecord | None, mzxid: int, *, now: float, skew: float) -> LockStatus:
    """The `LockStatus` of `record`, whose node was last written at `mzxid`."""
    if record is None:
        return LockStatus(False, None, None, None, None, None)
    live = assess(record, now=now, skew=skew, holder="").verdict is Verdict.HELD
    # A null token in a held record means "the mzxid of this write" (the acquiring one).
    token = mzxid if record.held and record.token is None else record.token
    return LockStatus(
        held=live,
        owner=record.owner,
        token=token,
        lease_expires=to_datetime(record.lease_expires),
        last_run=to_datetime(record.last_run.at) if record.last_run else None,
        last_failure=record.last_failure.error if record.last_failure else None,
    )


def window_start(now: float, interval: float) -> float:
    """The start of the schedule slot containing wall time `now` (slots start at the epoch)."""
    return math.floor(now / interval) * interval


def to_datetime(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


# --- argument checks -----------------------------------------------------------------------


def check_lease(lease: object) -> float:
    """The lease; at most `MAX_LEASE`, so that its expiry stays a time the record can hold."""
    return check_seconds("lease", lease, positive=True, most=MAX_LEASE)


def check_interval(interval: object) -> float:
    return check_seconds("interval", interval, positive=True)


def check_skew(skew: object, lease: float) -> float:
    """The clock-skew allowance: default min(1 s, lease/10); must stay below lease/2."""
    if skew is None:
        return min(1.0, lease / 10)
    seconds = check_seconds("skew", skew)
    if not seconds < lease / 2:
        raise ConfigError("skew", f"must be below lease/2 ({lease / 2:g}s), not {show(skew)}")
    return seconds


def check_owner(owner: object) -> str:
    """The owner name; default ``<host>-<pid>``."""
    if owner is None:
        return f"{socket.gethostname()}-{os.getpid()}"
    if not isinstance(owner, str):
        raise TypeError(f"owner must be a str, not {type(owner).__name__}")
    if not owner or len(owner) > MAX_OWNER:
        raise ConfigError("owner", f"must be 1 to {MAX_OWNER} characters, not {len(owner)}")
    try:
        owner.encode("utf-8")  # a lone surrogate would make the record unwritable
    except UnicodeEncodeError:
        raise ConfigError("owner", f"{owner!r} is not valid Unicode text") from None
    return owner


def error_text(exc: BaseException) -> str:
    """A short description of why a once_per body failed, for the record."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    # A lone surrogate (an os.fsdecode'd file name, say) is spelled out: records hold only UTF-8.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:MAX_ERROR]
