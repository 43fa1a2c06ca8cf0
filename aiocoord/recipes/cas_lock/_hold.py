"""Running a body under a held `CasLock`: renewal, loss, cancellation, release; once_per's slot.

`guard()` is the half of `cas_lock()` / `CasLock.hold()` / `once_per()` that
runs after the acquiring write: two tasks (the renewer, which
also enforces the holder's own ``lease - skew`` deadline, and the session
watcher) and a cancel scope around the body that either task cancels when the
lock is lost.  The shielded, bounded release runs after both are gone, and
`LockLost` is raised only after the body's scope has exited.

`run_once()` is `once_per()`'s body.  The window is the schedule slot
``[k*interval, (k+1)*interval)`` of the wall clock since the epoch, computed
by each caller when it enters; entering reads the record once and never waits:

- a successful run recorded for this window or a later one: not acquired
  (a pod whose clock lags is still in an earlier window and sees it done);
- a live lease held by someone else (it is running now): not acquired;
- otherwise the lock is taken with a CAS and the body runs under `guard()`.

On exit the release write carries the outcome: the run (window, end time,
owner, token) when the body returned, the failure (with the error text) when
it raised or was cancelled.  Only a recorded success closes the window; after
a failure, or after a crashed holder's lease runs out, a later caller in the
same window may run it again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
import anyio.abc

from ..._lifecycle import Lifecycle
from ...errors import ConnectionLostError, CoordError, LockLost
from ...session import Coordinator
from ...zk.states import ConnectionEvent, ConnectionState
from .._loss import LossPolicy, LossWatch
from .._tenure import Tenure
from ._record import LockRecord, RunInfo, error_text, to_datetime, window_start

__all__ = ("Acquisition", "Outcome", "Slot", "guard", "run_once")

log = logging.getLogger("aiocoord.recipes.cas_lock")

RENEW_FRACTION = 1 / 3  # renew after a third of the lease: two more tries before it runs out

Outcome = Callable[[BaseException | None], tuple[RunInfo | None, RunInfo | None]]
"""once_per's recorder: from the body's exception (None: success) to (run, failure)."""


@dataclass(frozen=True, slots=True)
class Acquisition:
    """What holding one acquisition needs from its `CasLock`, handed over by the lock itself.

    `confirmed()` is the monotonic time just before the last landed write was
    built (the holder's own deadline counts from it); `lost()` the loss reason
    or None; `mark_lost(reason, taken=...)` records a loss (`taken`: someone
    else wrote the record, never touch it again); `release(run, failure)`
    frees the lock, recording once_per's outcome; `forget()` drops the
    acquisition, whatever the release did.
    """

    path: str
    coord: Coordinator
    session: int | None
    lease: float
    skew: float
    confirmed: Callable[[], float]
    lost: Callable[[], str | None]
    mark_lost: Callable[..., None]
    renew: Callable[[], Awaitable[None]]
    release: Callable[[RunInfo | None, RunInfo | None], Awaitable[None]]
    forget: Callable[[], None]


@asynccontextmanager
async def guard(lock: Acquisition, outcome: Outcome | None = None) -> AsyncIterator[None]:
    """Run the body of a held lock (its `Acquisition`); see the module docstring.

    With `outcome` (once_per), the release also records the run or failure,
    and a release that cannot be confirmed is raised rather than logged.
    """
    tenure = Tenure(lock.path, LockLost)
    failure: BaseException | None = None

    def lost(reason: str, *, taken: bool = False) -> None:
        lock.mark_lost(reason, taken=taken)
        tenure.end(reason)

    async def keeper(task: Callable[[Acquisition, Callable[..., None]], Awaitable[None]]) -> None:
        try:
            await task(lock, lost)
        except Exception as exc:  # the hold can no longer be kept: the body must not go on
            lost(f"the lock's keeper failed: {exc!r}")
            raise

    async def setup(tg: anyio.abc.TaskGroup) -> None:
        tg.start_soon(keeper, _keep)

    # The renewer runs in a task of its own, so that the hold may be left from another
    # task than the one that entered it; the session's states are followed where they
    # are reported.
    keepers = Lifecycle(f"lock {lock.path}", setup)
    unfollow = _follow_session(lock, lost)
    try:
        await keepers.start()
    except BaseException:
        unfollow()
        raise
    keeper_error: BaseException | None = None
    try:
        try:
            async with tenure.body():
                yield
        except GeneratorExit:
            raise
        except BaseException as exc:  # re-raised below, after the release
            failure = exc
        finally:
            with anyio.CancelScope(shield=True):
                unfollow()
                try:
                    await keepers.aclose()  # a renewal in flight is abandoned: the release re-reads
                except Exception as exc:
                    keeper_error = exc
            lost_reason = lock.lost()
            release_error = await _release_after(lock, failure, outcome)
        if isinstance(failure, anyio.get_cancelled_exc_class()):
            raise failure  # cancelled from outside: never swallowed
        if lost_reason is not None:
            if isinstance(failure, LockLost) and failure.path == lock.path:
                failure = None  # the tenure's own report of the loss
            raise LockLost(lock.path, lost_reason) from (failure or keeper_error)
        if failure is not None:
            raise failure
        if release_error is not None:
            raise release_error
    finally:
        failure = keeper_error = None  # no reference cycle through the traceback


async def _release_after(
    lock: Acquisition, failure: BaseException | None, outcome: Outcome | None
) -> CoordError | None:
    """Release after the body (shielded, bounded); the error to raise, if any."""
    lost = lock.lost()
    run = failed = None
    if outcome is not None:
        run, failed = outcome(failure if lost is None else LockLost(lock.path, lost))
    error: CoordError | None = None
    # After a loss the release is only a courtesy (the lease frees the lock anyway),
    # so it gets one request deadline; a normal release gets two.
    timing = lock.coord.client.session.timing
    limit = timing.request_timeout if lost else timing.retry_window
    with anyio.CancelScope(shield=True), anyio.move_on_after(limit) as scope:
        try:
            await lock.release(run, failed)
        except LockLost as exc:
            error = exc if lost is None else None
        except CoordError as exc:
            log.warning("lock %s: release not confirmed (%s); its lease frees it", lock.path, exc)
            error = exc if outcome is not None else None
    if scope.cancelled_caught:
        log.warning("lock %s: release timed out; its lease frees it", lock.path)
        if outcome is not None:
            error = ConnectionLostError(f"the run in {lock.path} could not be recorded in time")
    lock.forget()
    return error


def _follow_session(lock: Acquisition, lost: Callable[[str], None]) -> Callable[[], None]:
    """The one loss rule, LOST-only: LOST (or a new session) ends the hold, SUSPENDED is
    only logged (the lease holds; `_keep` ends the hold once it runs out).  Followed
    where the session reports each state; returns the function that stops following."""
    coord = lock.coord
    if coord.client.session.session_id != lock.session:
        lost("session lost")  # between the acquiring write and this subscription
    # The current state, replayed first, is judged too (nothing before it is history).
    watch = LossWatch(LossPolicy.LOST_ONLY, lock.session, lost, granted_at=-math.inf)

    def on_event(event: ConnectionEvent) -> None:
        watch.on_event(event)
        if event.state is ConnectionState.SUSPENDED and lock.lost() is None:
            log.info("lock %s: connection suspended; the lease still holds", lock.path)

    return coord.client.session.follow_states(on_event, watch.on_closed)


async def _keep(lock: Acquisition, lost: Callable[..., None]) -> None:
    """Renew after a third of the lease; the lease running out first loses the lock."""
    while lock.lost() is None:
        now = time.monotonic()
        deadline = lock.confirmed() + lock.lease - lock.skew
        if now >= deadline:
            lost("lease ran out before a renewal succeeded")
            return
        due = lock.confirmed() + lock.lease * RENEW_FRACTION
        if now < due:
            await anyio.sleep(due - now)
            continue
        retry = False
        with anyio.move_on_after(deadline - now):  # past the deadline a renewal is moot
            try:
                await lock.renew()
            except LockLost as exc:
                lost(exc.reason, taken=True)
            except ConnectionLostError as exc:
                log.info("lock %s: renewal failed (%s); retrying", lock.path, exc)
                retry = True
            except CoordError as exc:
                lost(f"renewal failed: {exc}")
            if retry:
                try:
                    await lock.coord.client.session.wait_connected()
                except CoordError as exc:
                    lost(str(exc))


# --- once_per ------------------------------------------------------------------------------


@dataclass(slots=True)
class Slot:
    """What `once_per()` yields: whether this caller runs the job for this window.

    `window` is the start of the schedule slot (UTC); `last_run` the end time
    of the last successful run (this run's, once its release recorded it);
    `token` the fencing token when `acquired`.
    """

    acquired: bool
    window: datetime
    last_run: datetime | None
    token: int | None = None


@asynccontextmanager
async def run_once(
    try_window: Callable[[float], Awaitable[tuple[bool, LockRecord | None]]],
    lease: Callable[[], Acquisition],
    owner: str,
    token: Callable[[], int | None],
    interval: float,
) -> AsyncIterator[Slot]:
    """The body of `once_per()`, given an unheld lock's parts; see the module docstring.

    `try_window(window)` acquires unless the window already ran, returning
    the record read; `lease()` gives what `guard` needs of the acquisition; `token()` its token.
    """
    window = window_start(time.time(), interval)
    acquired, record = await try_window(window)
    last = record.last_run if record is not None else None
    slot = Slot(
        acquired,
        datetime.fromtimestamp(window, UTC),
        to_datetime(last.at if last else None),
        token() if acquired else None,
    )
    if not acquired:
        yield slot
        return
    ended: list[float] = []

    def outcome(failure: BaseException | None) -> tuple[RunInfo | None, RunInfo | None]:
        info = RunInfo(window=window, at=time.time(), owner=owner, token=token())
        if failure is None:
            ended.append(info.at)
            return info, None
        return None, RunInfo(window, info.at, info.owner, info.token, error_text(failure))

    async with guard(lease(), outcome):
        yield slot
    slot.last_run = to_datetime(ended[0])  # recorded: the release carried it
