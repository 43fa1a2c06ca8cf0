"""`CasLock`, `cas_lock()` and `once_per()`: acquiring, renewing and releasing; see the package docstring."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

import anyio

from ...errors import (
    ConnectionLostError,
    LockLost,
    LockNotAcquired,
    NoNodeError,
)
from ...session import Coordinator
from ...zk import EventType, Node, Stat, Watch
from ...zk.paths import validate_path
from ._hold import Lease, Slot, guard, run_once
from ._record import (
    Assessment,
    LockRecord,
    LockStatus,
    RunInfo,
    Verdict,
    assess,
    check_interval,
    check_lease,
    check_owner,
    check_skew,
    decode,
    encode,
    status_of,
)
from ._writes import NodeWriter, View

__all__ = ("CasLock", "LockStatus", "Slot", "cas_lock", "once_per")

log = logging.getLogger("aiocoord.recipes.cas_lock")


@dataclass(slots=True)
class _Attempt:
    acquired: bool
    decision: Assessment | None = None
    record: LockRecord | None = None
    watch: Watch | None = None
    after: View | None = None  # what a lost CAS found (no need to read again)


class CasLock:
    """A lease-based lock on the record at `path`; see the module docstring.

    `try_acquire()`, `acquire()` and `release()` alone never start background
    work, so nothing renews the lease: call `renew()` within each lease, or
    better use `hold()` / `cas_lock()`, which renew in the background and
    cancel the body when the lock is lost.  Not reentrant; one task at a time.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
    ) -> None:
        if not isinstance(coord, Coordinator):
            raise TypeError(f"coord must be an aiocoord Coordinator, not {type(coord).__name__}")
        self._coord = coord
        self.path = validate_path(path)
        self._writer = NodeWriter(coord.client, self.path)
        self._owner = check_owner(owner)
        self.lease = check_lease(lease)
        self.skew = check_skew(skew, self.lease)
        self._id = uuid.uuid4().hex  # this acquisition's holder id; renewed after each hold
        self._record: LockRecord | None = None  # what we last wrote, while we hold it
        self._version = -1
        self._token: int | None = None
        self._confirmed = 0.0  # monotonic time just before our last landed write was built
        self._lost: str | None = None
        self._taken = False  # the loss was someone else's write: the record is not ours to touch
        self._session: int | None = None
        self._seen_owner: str | None = None
        self._released: Node | None = None  # the record our last release wrote, with its stat

    # --- state -----------------------------------------------------------------------------

    @property
    def owner(self) -> str:
        """The name this lock writes as its holder (default ``<host>-<pid>``)."""
        return self._owner

    @property
    def token(self) -> int | None:
        """Fencing token of the current (or last) acquisition: the acquiring write's mzxid."""
        return self._token

    @property
    def held(self) -> bool:
        """Whether we hold it: acquired, not lost, and within ``lease - skew`` of our last write."""
        return (
            self._record is not None
            and self._lost is None
            and time.monotonic() < self._confirmed + self.lease - self.skew
        )

    def __repr__(self) -> str:
        if self._record is None:
            state = "FREE"
        elif self._lost is not None:
            state = f"LOST ({self._lost})"
        else:
            state = "HELD" if self.held else "EXPIRED"
        token = f" token=0x{self._token:x}" if self._token is not None else ""
        return f"<CasLock {self.path} owner={self._owner} {state}{token}>"

    async def status(self) -> LockStatus:
        """Read the record (`NodeDataError` if foreign); a missing node reads as free."""
        try:
            node = await self._coord.client.get(self.path)
        except NoNodeError:
            return status_of(None, 0, now=time.time(), skew=self.skew)
        record = decode(self.path, node.data)
        return status_of(record, node.stat.mzxid, now=time.time(), skew=self.skew)

    # --- acquiring -------------------------------------------------------------------------

    async def try_acquire(self) -> bool:
        """Take the lock if it is free or its lease expired; never waits for the holder.

        Raises `ConnectionLostError` when ZooKeeper cannot be reached in time,
        `NodeDataError` for a foreign record, `RuntimeError` if already held.
        """
        acquired, _ = await self._try_window(None)
        return acquired

    async def acquire(self) -> None:
        """Wait until the lock is ours; bound it with `anyio.fail_after`.

        Waits on a data watch, waking when the record changes or when the
        holder's lease (plus skew) runs out, whichever comes first.  Waiting
        for the holder has no bound of its own, waiting for ZooKeeper has one:
        a connection loss is ridden out if ZooKeeper answers again within the
        request timeout (counted from the request that found it gone, or from
        the session's loss while waiting on the watch); otherwise
        `ConnectionLostError` says how long it waited and why.  Raises
        `NodeDataError` for a foreign record.
        """
        self._check_idle()
        client = self._coord.client
        what = f"lock {self.path}: could not acquire"
        view = self._remembered()
        while True:
            deadline = client.deadline()
            try:
                if view is None:
                    view = await self._look(watch=True)
                rnd = await self._round(view, watch=True, window=None)
            except ConnectionLostError:
                await client.wait_connected(deadline, what)
                view = None
                continue
            if rnd.acquired:
                return
            view = rnd.after
            if view is not None or rnd.watch is None or rnd.decision is None:
                continue
            with anyio.move_on_after(rnd.decision.wait):
                if (await rnd.watch.wait()).type is EventType.SESSION_LOST:
                    await client.wait_connected(client.deadline(), what)

    async def _try_window(self, window: float | None) -> tuple[bool, LockRecord | None]:
        """Acquire without waiting (once_per: unless `window` already ran); with the record."""
        self._check_idle()
        view = self._remembered()
        while True:
            if view is None:
                view = await self._look(watch=False)
            rnd = await self._round(view, watch=False, window=window)
            if rnd.acquired:
                return True, self._record
            if rnd.decision is not None:
                return False, rnd.record
            view = rnd.after

    def _check_idle(self) -> None:
        if self._record is not None:
            raise RuntimeError(f"{self!r} is already held (CasLock is not reentrant)")

    def _remembered(self) -> View | None:
        """What our last release wrote, if anything: a free record worth a CAS without a read.

        Taking the lock again right after releasing it then costs one round
        trip; if anyone wrote since, the CAS fails and its pipelined read
        tells what they wrote.
        """
        node, self._released = self._released, None
        return View(node, known=True) if node is not None else None

    async def _look(self, *, watch: bool) -> View:
        client = self._coord.client
        try:
            if watch:
                node, watcher = await client.get_watch(self.path)
                return View(node, watcher)
            return View(await client.get(self.path))
        except NoNodeError:
            return View(None)

    async def _round(self, view: View, *, watch: bool, window: float | None) -> _Attempt:
        """Decide from `view`, and write if we may: acquired, a decision to wait, or neither."""
        node = view.node
        record = decode(self.path, node.data) if node is not None else None
        decision = assess(record, now=time.time(), skew=self.skew, holder=self._id, window=window)
        if view.known and not decision.take:
            return _Attempt(False)  # a remembered record decides nothing but a CAS: read
        if decision.verdict is Verdict.OURS and node is not None and record is not None:
            # An acquiring write of ours landed although its reply was lost; our own
            # clock wrote its expiry, so the local deadline follows from it.
            left = (record.lease_expires or 0.0) - time.time()
            self._took(record, node.stat, time.monotonic() + left - self.lease, None)
            return _Attempt(True)
        if not decision.take:
            self._seen_owner = record.owner if record is not None else None
            return _Attempt(False, decision, record, view.watch)
        # The holder's own deadline counts from `started`, taken before the expiry it
        # writes is computed, so it is never later than the lease others see.
        started = time.monotonic()
        new = (record or LockRecord()).acquired(
            owner=self._owner, holder=self._id, expires=time.time() + self.lease
        )
        # Shielded (and bounded): once the write is sent, we must learn its outcome,
        # or a cancelled acquire could leave a lock nobody knows it holds.
        limit = self._coord.client.timing.retry_window
        after: View | None = None
        with anyio.CancelScope(shield=True), anyio.move_on_after(limit) as scope:
            if node is None:
                stat = await self._writer.create(new)
            else:
                stat, after = await self._writer.cas(new, node.stat.version, watch=watch)
        if scope.cancelled_caught:
            raise ConnectionLostError(f"the outcome of acquiring {self.path} is unknown")
        if stat is None:
            return _Attempt(False, after=after)  # lost the race: `after` (or a read) tells to whom
        self._took(new, stat, started, record if decision.verdict is Verdict.EXPIRED else None)
        return _Attempt(True)

    def _took(self, new: LockRecord, stat: Stat, start: float, expired: LockRecord | None) -> None:
        self._record, self._version = new, stat.version
        self._token = new.token if new.token is not None else stat.mzxid
        self._confirmed, self._lost = start, None
        self._session = self._coord.session_id
        over = f", taking over the expired lease of {expired.owner}" if expired else ""
        log.info("lock %s acquired by %s (token 0x%x%s)", self.path, self._owner, self._token, over)

    async def renew(self) -> None:
        """Extend the lease to `lease` from now, by CAS on the version we last wrote.

        Raises `LockLost` (record untouched) if someone else changed the record,
        `ConnectionLostError` if ZooKeeper could not be reached in time.
        """
        if self._record is None:
            raise RuntimeError(f"{self!r} is not held")
        if self._lost is not None:
            raise LockLost(self.path, self._lost)
        assert self._token is not None
        started = time.monotonic()  # before the expiry is computed, as in acquiring
        new = self._record.renewed(expires=time.time() + self.lease, token=self._token)
        stat = await self._writer.write_ours(new, self._version, self._id)
        if stat is None:
            reason = "renewal lost its CAS: another client changed the record"
            self._mark_lost(reason, taken=True)
            raise LockLost(self.path, reason)
        self._record, self._version, self._confirmed = new, stat.version, started

    async def release(self) -> None:
        """Free the lock by CAS on our version.

        Raises `LockLost` without touching the record when it is no longer ours
        (someone else changed it), `ConnectionLostError` when the outcome could
        not be learnt (the lease then frees it), `RuntimeError` if not held.
        """
        await self._release()

    async def _release(self, run: RunInfo | None = None, failure: RunInfo | None = None) -> None:
        if self._record is None:
            raise RuntimeError(f"{self!r} is not held")
        if self._taken:
            reason = self._lost or "another client changed the record"
            self._forget()
            raise LockLost(self.path, reason)
        assert self._token is not None
        released = self._record.released(token=self._token, run=run, failure=failure)
        stat = await self._writer.write_ours(released, self._version, self._id)
        self._forget()
        if stat is not None:
            self._released = Node(encode(released), stat)
        if stat is None:
            raise LockLost(self.path, "another client changed the record before the release")
        log.info("lock %s released by %s", self.path, self._owner)

    def _forget(self) -> None:
        self._record, self._version, self._lost, self._taken = None, -1, None, False
        self._id = uuid.uuid4().hex

    def _mark_lost(self, reason: str, *, taken: bool = False) -> None:
        """Record the loss; `taken`: someone else changed the record (never write it again)."""
        self._taken = self._taken or taken
        if self._lost is None:
            self._lost = reason
            log.warning("lock %s lost by %s: %s", self.path, self._owner, reason)

    # --- holding ---------------------------------------------------------------------------

    def _lease(self) -> Lease:
        """What `guard` needs of this acquisition (see `Lease`)."""
        return Lease(
            path=self.path,
            coord=self._coord,
            session=self._session,
            lease=self.lease,
            skew=self.skew,
            confirmed=lambda: self._confirmed,
            lost=lambda: self._lost,
            mark_lost=self._mark_lost,
            renew=self.renew,
            release=self._release,
            forget=self._forget,
        )

    @asynccontextmanager
    async def hold(self, *, blocking: bool = True) -> AsyncIterator[CasLock]:
        """Acquire, run the body with the lease renewed, release on exit.

        Entering blocks until the lock is ours (`blocking=False`: raises
        `LockNotAcquired` at once if it is held); either raises
        `ConnectionLostError` once ZooKeeper has been unreachable for the
        request timeout (see `acquire`).  The body is cancelled and
        `LockLost` raised on exit when a renewal loses its CAS, the session is
        LOST, or the lease runs out (``lease - skew`` after the last successful
        write) before a renewal succeeds; SUSPENDED alone cancels nothing.
        Leaving releases with a CAS (shielded, bounded); if the release cannot
        be confirmed, the lease frees the lock.
        """
        if blocking:
            await self.acquire()
        elif not await self.try_acquire():
            raise LockNotAcquired(self.path, self._seen_owner)
        async with guard(self._lease()):
            yield self


def cas_lock(
    coord: Coordinator,
    path: str,
    *,
    owner: str | None = None,
    lease: float = 60.0,
    skew: float | None = None,
    blocking: bool = True,
) -> AbstractAsyncContextManager[CasLock]:
    """``async with cas_lock(coord, path, owner=..., lease=...) as lock``: see `CasLock.hold`.

    Arguments are checked here: `lease` must be positive, `skew` (default
    min(1 s, lease/10)) below lease/2; bad ones raise `ConfigError`/`TypeError`.
    """
    if not isinstance(blocking, bool):
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    return CasLock(coord, path, owner=owner, lease=lease, skew=skew).hold(blocking=blocking)


def once_per(
    coord: Coordinator,
    path: str,
    interval: float,
    *,
    owner: str | None = None,
    lease: float = 60.0,
    skew: float | None = None,
) -> AbstractAsyncContextManager[Slot]:
    """Run a job at most once per schedule slot across the fleet: check ``slot.acquired``.

    Slots are ``[k*interval, (k+1)*interval)`` on the wall clock since the
    epoch, so every pod names the same window whenever it wakes; a pod whose
    clock is off by d can start a window at most d early and never runs a
    window already recorded.  Entering never waits: `acquired` is False when
    the window already has a successful run or a live holder is running it.

    Policy: a successful body (no exception) records the run in the same CAS
    write that releases the lock.  A body that raises (or is cancelled)
    records the failure and releases, so a later caller in the same window may
    retry; a holder that crashes leaves the lease, and a caller after its
    expiry may retry.  Only successful runs close the window.  While the body
    runs, the lock behaves as in `cas_lock()` (renewed; cancelled with
    `LockLost` when lost).  If the successful run cannot be recorded, the exit
    raises (`ConnectionLostError` or `LockLost`): the window may run again.
    """
    interval = check_interval(interval)
    lock = CasLock(coord, path, owner=owner, lease=lease, skew=skew)
    return run_once(lock._try_window, lock._lease, lock.owner, lambda: lock.token, interval)
