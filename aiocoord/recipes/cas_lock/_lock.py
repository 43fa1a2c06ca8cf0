"""`CasLock`: acquiring, renewing and releasing; see the package docstring."""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio

from ..._checks import check_blocking, check_coordinator, check_timeout
from ...errors import (
    ConnectionLostError,
    LockLost,
    LockNotAcquired,
    NoNodeError,
)
from ...session import Coordinator
from ...zk import EventType, Node, Stat, Watch, WatchedEvent
from ...zk.paths import validate_path
from .._task_turns import TaskTurns
from ._hold import Acquisition, guard
from ._record import (
    Assessment,
    LockRecord,
    LockStatus,
    RunInfo,
    Verdict,
    assess,
    check_lease,
    check_owner,
    check_skew,
    decode,
    encode,
    status_of,
)
from ._turns import contender_id, joining, pace_of, rank, served
from ._writes import NodeWriter, View

__all__ = ("CasLock", "LockStatus")

log = logging.getLogger("aiocoord.recipes.cas_lock")


@dataclass(slots=True)
class _Attempt:
    acquired: bool
    decision: Assessment | None = None
    record: LockRecord | None = None
    watch: Watch | None = None
    after: View | None = None  # what a lost CAS found (no need to read again)
    turn: float = 0.0  # seconds until our turn to write what `node` shows (free or expired)
    node: Node | None = None  # what the decision was made on
    version: int = -1


class CasLock:
    """A lease-based lock on the record at `path`; see the module docstring.

    ``async with lock`` (as `hold()`, `cas_lock()`) acquires (waiting at most
    `timeout` seconds, None: no bound, then `LockNotAcquired`), renews the
    lease in the background while the block runs, cancels the block when the
    lock is lost (then `LockLost`), and releases.  `try_acquire()`,
    `acquire()` and `release()` alone never start background work, so
    nothing renews the lease: call `renew()` within each lease.  Not
    reentrant; tasks sharing one `CasLock` take it in turn (a task waits
    for the others' holds, within its `timeout`).  Raises `InvalidPathError`,
    `ConfigError` or `TypeError` for bad arguments.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
        timeout: float | None = None,
    ) -> None:
        check_coordinator(coord)
        self._coord = coord
        self._timeout = check_timeout(timeout)
        # `async with`'s hold: one at a time, since the tasks sharing this CasLock take it
        # in turn; left from any task (a hold entered in one task may be left from another).
        self._holding: AbstractAsyncContextManager[CasLock] | None = None
        self._turns = TaskTurns()  # the tasks sharing this CasLock take it in turn
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
        self._session_id: int | None = None
        self._seen_owner: str | None = None
        self._released: Node | None = None  # the record our last release wrote, with its stat
        self._released_at = 0.0  # monotonic time of that release
        self._pace = pace_of(coord.client, self.path)

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

        False too while another task sharing this `CasLock` holds or waits
        for it.  Raises `ConnectionLostError` when ZooKeeper cannot be reached
        in time, `NodeDataError` for a foreign record, `RuntimeError` if this
        task already holds it.
        """
        acquired, _ = await self._try_window(None)
        return acquired

    async def acquire(self, timeout: float | None = None) -> bool:
        """Wait until the lock is ours; True then, False if `timeout` seconds passed first.

        None waits as long as it takes; ``timeout=0`` is `try_acquire()`.
        Tasks sharing this `CasLock` take it in turn: first it waits (within
        `timeout`) until no other task of it holds or waits for it.  Then it
        waits on a data watch, waking when the record changes or when the
        holder's lease (plus skew) runs out, whichever comes first.  A
        connection loss is ridden out if ZooKeeper answers again within the
        request timeout (counted from the request that found it gone, or from
        the session's loss while waiting on the watch); otherwise
        `ConnectionLostError` says how long it waited and why.  Cancelled (or
        timed out) while waiting, it holds nothing, unless its write had
        already landed: then it returns True.  Raises `NodeDataError` for a
        foreign record, `RuntimeError` if this task already holds or waits for
        it, `TypeError` or `ConfigError` (naming `timeout`) for a bad timeout.
        """
        seconds = check_timeout(timeout)
        if seconds == 0:
            return await self.try_acquire()
        task = self._check_idle()
        acquired = False
        try:
            with anyio.move_on_after(math.inf if seconds is None else seconds):
                if self._turns.busy:
                    self._seen_owner = self._owner  # another task of ours has it: we are behind it
                await self._turns.take(task)
                await self._acquire()
            acquired = self._turns.task is task and self._record is not None
        finally:
            if not acquired:
                self._turns.end(task)
        return acquired

    async def _acquire(self) -> None:
        client = self._coord.client
        what = f"lock {self.path}: could not acquire"
        view = self._remembered()  # our own release, if any: we learnt of it when we wrote it
        since = self._released_at if view is not None else time.monotonic()
        while True:
            deadline = client.session.deadline()
            try:
                if view is None:
                    with self._pace.timing("read"):
                        view = await self._look(watch=True)
                    if view.node is not None:
                        self._pace.saw(view.node.stat.version)
                rnd = await self._round(view, watch=True, window=None, since=since)
            except ConnectionLostError:
                await client.session.wait_connected(deadline, what)
                view = None
                continue
            if rnd.acquired:
                return
            view, since = await self._wait(rnd, since, what)

    async def _wait(self, rnd: _Attempt, since: float, what: str) -> tuple[View | None, float]:
        """After a round that did not acquire: wait for a change or our turn; what to try next.

        Returns the view to decide on (None: read again) and when we learnt of
        the change it shows (`since` while that is still what we wait on).  A
        waiter that is not next in line reads only once the turns before its
        own have passed (see `_turns`).
        """
        client = self._coord.client
        if rnd.after is not None or rnd.decision is None:
            # A lost CAS showed what won; a remembered record decided nothing: read.
            return rnd.after, time.monotonic()
        if rnd.watch is None:
            # Our own release, remembered (or no node at all): read, and watch, once the next
            # in line had time to take it; at once if we come right after that one.
            if rnd.record is None or self._place(rnd.record.recent, rnd.version) >= 2:
                await anyio.sleep(min(rnd.turn, self._pace.settle))
            return None, since
        event: WatchedEvent | None = None
        with anyio.move_on_after(rnd.turn or rnd.decision.wait):
            event = await rnd.watch.wait()
        if event is None and rnd.turn:  # our turn came with no change: write what we read
            return View(rnd.node, rnd.watch), since
        if event is None:  # the holder's lease ran out
            return None, time.monotonic()
        if event.type is EventType.SESSION_LOST:
            await client.session.wait_connected(client.session.deadline(), what)
            return None, time.monotonic()
        changed = time.monotonic()
        held = rnd.record if not rnd.turn and rnd.record is not None and rnd.record.held else None
        place = self._place(held.recent, rnd.version) if held is not None else 0.0
        if place >= 1:
            # Held until now: the next in line reads at once, the others once it had time to
            # take it (or later, the further back they are).
            await anyio.sleep(self._pace.behind(place))
        return None, changed

    async def _try_window(self, window: float | None) -> tuple[bool, LockRecord | None]:
        """Acquire without waiting (once_per: unless `window` already ran); with the record."""
        task = self._check_idle()
        if not await self._turns.take_now(task):
            self._seen_owner = self._owner  # another task of ours has it
            return False, None
        acquired = False
        try:
            view = self._remembered()
            while True:
                if view is None:
                    view = await self._look(watch=False)
                rnd = await self._round(view, watch=False, window=window)
                if rnd.acquired:
                    acquired = True
                    return True, self._record
                if rnd.decision is not None:
                    return False, rnd.record
                view = rnd.after
        finally:
            if not acquired:
                self._turns.end(task)

    def _check_idle(self) -> asyncio.Task[Any]:
        """The current task, unless it already holds or waits for this lock (`RuntimeError`)."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("CasLock must be used from an asyncio task")
        if self._turns.task is task:
            raise RuntimeError(f"{self!r}: this task already holds or waits for it (not reentrant)")
        return task

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

    def _place(self, recent: tuple[str, ...], version: int) -> float:
        """Our rank among the waiters when the record at `version` is free (see `_turns`)."""
        return rank(
            recent, contender_id(self._owner, self._coord.client.session.session_id), version
        )

    async def _round(
        self, view: View, *, watch: bool, window: float | None, since: float | None = None
    ) -> _Attempt:
        """Decide from `view`, and write if we may: acquired, a decision to wait, or neither.

        With `since` (acquire: when we learnt of what `view` shows), a free
        record is written only once our turn has come (see `_turns`).
        """
        node = view.node
        version = node.stat.version if node is not None else -1
        record = decode(self.path, node.data) if node is not None else None
        decision = assess(record, now=time.time(), skew=self.skew, holder=self._id, window=window)
        if view.known and not decision.take:
            return _Attempt(False)  # a remembered record decides nothing but a CAS: read
        recent = record.recent if record is not None else ()
        me = contender_id(self._owner, self._coord.client.session.session_id)
        skipped = 0
        if decision.take and since is not None:
            place = rank(recent, me, version)
            turn = since + place * self._pace.step - time.monotonic()
            if turn > 0:
                return _Attempt(
                    False, decision, record, view.watch, turn=turn, node=node, version=version
                )
            skipped = int(place)  # those ahead let their turn pass: they were not waiting
        if decision.verdict is Verdict.OURS and node is not None and record is not None:
            # An acquiring write of ours landed although its reply was lost; our own
            # clock wrote its expiry, so the local deadline follows from it.
            left = (record.lease_expires or 0.0) - time.time()
            self._took(record, node.stat, time.monotonic() + left - self.lease, None)
            return _Attempt(True)
        if not decision.take:
            self._seen_owner = record.owner if record is not None else None
            if since is not None and node is not None and record is not None:
                joined = joining(record, node.stat.mzxid, me)
                if joined is not None:  # not listed: join the order, behind those waiting
                    return _Attempt(False, after=await self._writer.join(joined, version))
            return _Attempt(False, decision, record, view.watch, node=node, version=version)
        # The holder's own deadline counts from `started`, taken before the expiry it
        # writes is computed, so it is never later than the lease others see.
        started = time.monotonic()
        new = (record or LockRecord()).acquired(
            owner=self._owner,
            holder=self._id,
            expires=time.time() + self.lease,
            recent=served(recent, me, skipped),
        )
        # Shielded (and bounded): once the write is sent, we must learn its outcome,
        # or a cancelled acquire could leave a lock nobody knows it holds.
        limit = self._coord.client.session.timing.retry_window
        after: View | None = None
        with anyio.CancelScope(shield=True), anyio.move_on_after(limit) as scope:
            if node is None:
                stat = await self._writer.create(new)
            else:
                with self._pace.timing("write"):
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
        self._session_id = self._coord.client.session.session_id
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
        written = await self._writer.write_ours(new, self._version, self._id)
        if written is None:
            reason = "renewal lost its CAS: another client changed the record"
            self._mark_lost(reason, taken=True)
            raise LockLost(self.path, reason)
        stat, self._record = written
        self._version, self._confirmed = stat.version, started

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
        written = await self._writer.write_ours(released, self._version, self._id)
        self._forget()
        if written is None:
            raise LockLost(self.path, "another client changed the record before the release")
        self._released = Node(encode(written[1]), written[0])
        self._released_at = time.monotonic()
        log.info("lock %s released by %s", self.path, self._owner)

    def _forget(self) -> None:
        """Drop the acquisition and end its turn: the next task sharing this CasLock may go."""
        self._record, self._version, self._lost, self._taken = None, -1, None, False
        self._id = uuid.uuid4().hex
        self._turns.end()

    def _forget_hold(self, holder: str) -> None:
        """`_forget()`, if the acquisition of `holder` was not forgotten already."""
        if self._id == holder:
            self._forget()

    def _mark_lost(self, reason: str, *, taken: bool = False) -> None:
        """Record the loss; `taken`: someone else changed the record (never write it again)."""
        self._taken = self._taken or taken
        if self._lost is None:
            self._lost = reason
            log.warning("lock %s lost by %s: %s", self.path, self._owner, reason)

    # --- holding ---------------------------------------------------------------------------

    def _lease(self) -> Acquisition:
        """What `guard` needs of this acquisition (see `Acquisition`)."""
        return Acquisition(
            path=self.path,
            coord=self._coord,
            session=self._session_id,
            lease=self.lease,
            skew=self.skew,
            confirmed=lambda: self._confirmed,
            lost=lambda: self._lost,
            mark_lost=self._mark_lost,
            renew=self.renew,
            release=self._release,
            forget=functools.partial(self._forget_hold, self._id),
        )

    def hold(
        self, *, blocking: bool = True, timeout: float | None = None
    ) -> AbstractAsyncContextManager[CasLock]:
        """Acquire, run the body with the lease renewed, release on exit.

        Entering waits until the lock is ours, at most `timeout` seconds
        (None: no bound; ``blocking=False`` is ``timeout=0``), then raises
        `LockNotAcquired`; either raises `ConnectionLostError` once ZooKeeper
        has been unreachable for the request timeout (see `acquire`).  The
        body is cancelled and `LockLost` raised on exit when a renewal loses
        its CAS, the session is LOST, or the lease runs out (``lease - skew``
        after the last successful write) before a renewal succeeds; SUSPENDED
        alone cancels nothing.  Leaving releases with a CAS (shielded,
        bounded); if the release cannot be confirmed, the lease frees the lock.
        Raises `TypeError` for a bad `blocking` or `timeout`, `ConfigError`
        (naming `timeout`) for a negative one or one given with
        ``blocking=False``, before anything is sent.
        """
        return self._hold(check_blocking(blocking, timeout))

    @asynccontextmanager
    async def _hold(self, timeout: float | None) -> AsyncIterator[CasLock]:
        if not await self.acquire(timeout):
            raise LockNotAcquired(self.path, self._seen_owner)
        async with guard(self._lease()):
            yield self

    async def __aenter__(self) -> CasLock:
        """Acquire (within `timeout`, else `LockNotAcquired`) and hold it as `hold()` does.

        Tasks sharing this `CasLock` take it in turn: a task's hold begins
        once the one before has been left.
        """
        holding = self.hold(timeout=self._timeout)
        await holding.__aenter__()
        self._holding = holding
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Release; raises `LockLost` (after the block) if the lock was lost meanwhile."""
        holding, self._holding = self._holding, None
        if holding is None:
            raise RuntimeError(f"{self!r} was not entered with `async with`")
        return await holding.__aexit__(exc_type, exc, tb)
