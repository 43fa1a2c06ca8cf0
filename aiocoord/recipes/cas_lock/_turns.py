"""Whose turn it is when the CAS lock comes free: an order every waiter computes the same way.

The record keeps ``recent``: short ids of the contenders that took the lock
(one owner on one session), the least recently served first, each once: the
acquiring write moves its writer to the end, so keeping it costs no write of
its own.  When the lock comes free, a listed waiter's rank is its place in
that list; a newcomer ranks within the first step (newcomers ordered among
themselves by a hash of the record's version and their id), and lists itself
by a CAS (`joining`) when it finds the lock held.  A contender of rank ``r``
tries its CAS only once ``r`` steps have passed since it learnt of the change
without seeing anyone take the lock: the least recently served waiter goes at
once, and the others' CAS would have lost anyway.  So in a tight loop the
lock goes round the contenders in turn, and a lost CAS is rare; the CAS still
decides, so a wrong guess costs a write, never safety.

A contender that took the lock after waiting out the turns of those ahead of
it marks them (they were not waiting); one marked already is dropped, and
ranks as a newcomer when it comes back.  A step is a few of this contender's
own round trips (read, then CAS), measured as it goes (`Pace`), so that a
loaded machine stretches it rather than passing over the next in line.
"""

from __future__ import annotations

import hashlib
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from ._record import LockRecord

__all__ = (
    "MAX_RECENT",
    "PACED_PATHS",
    "Pace",
    "contender_id",
    "joining",
    "pace_of",
    "rank",
    "served",
)

MAX_RECENT = 64  # ids kept in the record; beyond, the most recently served drop out first
ID_CHARS = 8
SKIPPED = "~"  # marks a listed contender that let its last turn pass
_STEP_FLOOR = 0.01
_STEP_CEILING = 0.5
# A step: this many times the next in line's read and CAS round trips.  Generous, because
# a waiter that lets its turn pass loses it (a loaded machine stalls for many round
# trips now and then), while a long step costs only where a listed contender has
# left: twice, since it is marked, then dropped.
_STEPS = 8.0
_SETTLE = 1.5  # the round trips a waiter that is not next leaves the next one, before reading
_SMOOTHING = 0.2


def contender_id(owner: str, session: int | None) -> str:
    """A short id for one owner on one session: stable across its acquisitions."""
    digest = hashlib.blake2b(f"{owner}\0{session}".encode(), digest_size=ID_CHARS // 2)
    return digest.hexdigest()


def _listed(recent: tuple[str, ...], me: str) -> int | None:
    for i, entry in enumerate(recent):
        if entry == me or entry == me + SKIPPED:
            return i
    return None


def rank(recent: tuple[str, ...], me: str, version: int) -> float:
    """My place in the order for the free record at `version` (0: my turn at once).

    A newcomer ranks within the first step, ordered among newcomers by a hash
    of the version: it has waited for no one's turn yet, and it joins the
    list on its first acquisition (or by `joining` while the lock is held).
    """
    at = _listed(recent, me)
    if at is not None:
        return float(at)
    digest = hashlib.blake2b(f"{version}\0{me}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") / 2**33


def served(recent: tuple[str, ...], me: str, skipped: int = 0) -> tuple[str, ...]:
    """The list after `me` takes the lock, the `skipped` first having let their turn pass.

    One that let its turn pass keeps its place, marked; a second time in a
    row, it is dropped (it has left, or stalls for long): it ranks as a
    newcomer if it comes back.
    """
    passed = tuple(e + SKIPPED for e in recent[:skipped] if not e.endswith(SKIPPED))
    rest = tuple(e for e in passed + recent[skipped:] if e not in (me, me + SKIPPED))
    if len(rest) >= MAX_RECENT:
        rest = rest[: MAX_RECENT - 1]  # the most recently served would rank last anyway
    return (*rest, me)


def joining(record: LockRecord, mzxid: int, me: str) -> LockRecord | None:
    """`record` (held, last written at `mzxid`) with `me` listed just before its holder.

    That is next after those already waiting.  None when `me` is listed
    already, or the list is full.  A null token (the acquiring write's own
    mzxid) is spelled out, since this write gets another mzxid.
    """
    recent = record.recent
    if _listed(recent, me) is not None or len(recent) >= MAX_RECENT:
        return None
    at = len(recent) - 1 if recent else 0  # the holder took the last place when it acquired
    token = mzxid if record.token is None else record.token
    return replace(record, recent=(*recent[:at], me, *recent[at:]), token=token)


class Pace:
    """How long one turn lasts for this contender: its own read and CAS round trips, smoothed.

    The next in line reads the free record, then writes: a step is a few of
    those two round trips, so the next rank tries only after the change
    that took the lock would have reached it.
    """

    def __init__(self, read: float = 0.002, write: float = 0.003) -> None:
        self._trips = {"read": read, "write": write}
        self._handover = 0.0  # seconds between two hand-overs, as seen in our reads
        self._mark: tuple[float, int] | None = None  # (when, version) of a read

    def saw(self, version: int) -> None:
        """A read showed the record at `version`: learn how fast the lock changes hands.

        Each hand-over writes the record twice (taking and releasing it).
        """
        now = time.monotonic()
        if self._mark is not None and version > self._mark[1]:
            passed = (now - self._mark[0]) / ((version - self._mark[1]) / 2)
            self._handover += _SMOOTHING * (passed - self._handover)
        if self._mark is None or version != self._mark[1]:
            self._mark = (now, version)

    def behind(self, place: float) -> float:
        """How long a waiter `place` turns from the front may leave the record unread.

        A third of the hand-overs before its turn: it reads (and watches) again
        well before it is next, and the others take their turns unread.  At
        most `place` steps, so that a few long holds do not make it sleep
        through its turn when short ones follow.
        """
        return max(self.settle, min((place - 1) * self._handover / 3, place * self.step))

    @property
    def step(self) -> float:
        return min(max(self._trip * _STEPS, _STEP_FLOOR), _STEP_CEILING)

    @property
    def settle(self) -> float:
        """How long a waiter that is not next lets the next one take the lock before it reads."""
        return self._trip * _SETTLE

    @property
    def _trip(self) -> float:
        return self._trips["read"] + self._trips["write"]

    @contextmanager
    def timing(self, kind: str) -> Iterator[None]:
        """Measure one round trip of `kind` ("read" or "write"): ``with pace.timing("read"):``."""
        start = time.monotonic()
        yield
        self._trips[kind] += _SMOOTHING * (time.monotonic() - start - self._trips[kind])


_paces: weakref.WeakKeyDictionary[object, dict[str, Pace]] = weakref.WeakKeyDictionary()

PACED_PATHS = 1024
"""Lock paths whose `Pace` a client remembers (the latest used): a process locking one
path per job or per entity would otherwise keep one for every path it ever locked."""


def pace_of(client: object, path: str) -> Pace:
    """The `Pace` of the lock at `path` on `client`, shared by every `CasLock` on them.

    ``cas_lock()`` makes a new `CasLock` for each acquisition: what the last
    ones measured carries over, for the `PACED_PATHS` paths used last.
    """
    paces = _paces.setdefault(client, {})
    pace = paces.pop(path, None)  # put back last: the dict's order is the order of use
    if pace is None:
        pace = Pace()
        if len(paces) >= PACED_PATHS:
            del paces[next(iter(paces))]
    paces[path] = pace
    return pace
