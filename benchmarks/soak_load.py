"""The soak's load: the roles it runs on its sessions, each reporting to the `Recorder`.

Each role loops until cancelled and uses only the public API:

- `latch_participant`: joins a leader latch, and once it leads holds the term
  for a while, then leaves the latch and joins again at the back;
- `lock_contender`: takes a contended `cas_lock`, holds it briefly, lets go;
- `mutex_contender`: the same with the queued `mutex`, writing through the
  fenced store with its token when its term begins and before it ends;
- `once_caller`: calls `once_per` on a 1 s window every 0.1-0.3 s; each run
  it gets is recorded with its window, and whether it was recorded (closed
  the window);
- `cron_worker`: a `Cron` worker running `cron_jobs` jobs every second; each
  firing is recorded with its scheduled time and writes through the fenced
  store with ``firing.token``;
- `task_worker`: a task-leadership worker that leads its share of the tasks,
  leaves once in a while (between two samples) and joins again under a new id;
- `job_worker` / `submit_jobs`: the scheduler's workers, and a client that
  submits jobs at a steady rate, each awaited to its result, a bounded
  number at a time;
- `inject_faults`: now and then cuts one session's connection, or pauses it
  for less (or, more rarely, more) than the session timeout;
- `follow` and `probe`: each session's connection states, and a round trip
  plus the event loop's lateness on a session of its own.

Every term (latch, lock, task) is recorded with its fencing token when its
body starts and when it ends.  The body passes a checkpoint first, so a term
that was already lost when its body was scheduled is never recorded as
begun.  A `CoordError` is expected under faults (counted); anything else is a
defect: recorded with its traceback, and the role starts again.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

import aiocoord
from aiocoord import (
    ConnectionLostError,
    ConnectionState,
    CoordError,
    Cron,
    Firing,
    JobFailed,
    LeadershipLost,
    LockLost,
    Scheduler,
    Worker,
    cas_lock,
    leader_latch,
    mutex,
    once_per,
    task_leadership,
)
from aiocoord.recipes.cron import FiringOutcome
from aiocoord.testing import FaultProxy

from .soak_record import Fault, Recorder

__all__ = (
    "cron_worker",
    "forever",
    "follow",
    "inject_faults",
    "job_worker",
    "latch_participant",
    "lock_contender",
    "make_scheduler",
    "mutex_contender",
    "once_caller",
    "probe",
    "submit_jobs",
    "task_worker",
)

LATCH_HOLD = (2.0, 20.0)  # a latch leader holds its term this long, then leaves and rejoins
LOCK_HOLD = (0.02, 0.2)
LOCK_PAUSE = (0.0, 0.3)  # between a release and the next try
LOCK_LEASE = 5.0
ONCE_INTERVAL = 1.0  # a once_per window (s)
ONCE_PAUSE = (0.1, 0.3)  # between two calls of once_per
ONCE_HOLD = (0.05, 0.2)
ONCE_LEASE = 5.0
CRON_EVERY = 1.0  # every cron job fires every second
CRON_HOLD = (0.05, 0.3)
CRON_GRACE = 60.0  # a time late by less than this still runs, late; a later one is given up
JOB_CAPACITY = 64
PROBE_EVERY = 0.1
SUSPENDED = (ConnectionState.SUSPENDED, ConnectionState.LOST)


async def forever(rec: Recorder, role: str, body: Callable[[], Awaitable[None]]) -> None:
    """Run `body` again and again; a `CoordError` is counted, anything else recorded as a defect."""
    while True:
        try:
            await body()
        except CoordError as exc:
            rec.counts[f"{role}: {type(exc).__name__}"] += 1
            await anyio.sleep(0.2)
        except Exception as exc:
            rec.error(role, exc)
            await anyio.sleep(0.5)


async def latch_participant(
    coord: aiocoord.Coordinator, rec: Recorder, rng: random.Random, path: str, session: int
) -> None:
    holder = f"s{session}"

    async def once() -> None:
        async with leader_latch(coord, path, participant_id=holder) as latch:
            while True:
                try:
                    async with latch.leadership() as term:
                        async with rec.term(path, holder, session, term.token):
                            await anyio.sleep(rng.uniform(*LATCH_HOLD))
                    break  # held it to the end: leave and join again at the back
                except LeadershipLost:
                    continue
        await anyio.sleep(rng.uniform(0.0, 1.0))

    await forever(rec, "latch", once)


async def lock_contender(
    coord: aiocoord.Coordinator,
    rec: Recorder,
    rng: random.Random,
    path: str,
    owner: str,
    session: int,
) -> None:
    async def once() -> None:
        asked = time.monotonic()
        try:
            async with cas_lock(coord, path, owner=owner, lease=LOCK_LEASE) as lock:
                rec.lock_latency.append(time.monotonic() - asked)
                token = -1 if lock.token is None else lock.token  # -1: out of order, reported
                async with rec.term(path, owner, session, token):
                    await anyio.sleep(rng.uniform(*LOCK_HOLD))
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(*LOCK_PAUSE))

    await forever(rec, "lock", once)


async def mutex_contender(
    coord: aiocoord.Coordinator,
    rec: Recorder,
    rng: random.Random,
    path: str,
    owner: str,
    session: int,
) -> None:
    """Take the queued `mutex` at `path`, hold it briefly writing through the fenced store."""

    async def once() -> None:
        try:
            async with mutex(coord, path, participant_id=owner) as held:
                token = -1 if held.token is None else held.token  # -1: out of order, reported
                async with rec.term(path, owner, session, token):
                    rec.store.write(path, token)
                    await anyio.sleep(rng.uniform(*LOCK_HOLD))
                    rec.store.write(path, token)
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(*LOCK_PAUSE))

    await forever(rec, "mutex", once)


async def once_caller(
    coord: aiocoord.Coordinator,
    rec: Recorder,
    rng: random.Random,
    path: str,
    owner: str,
    session: int,
) -> None:
    """Call `once_per` at `path` again and again; record every run it gets, with its window.

    A run counts as recorded (``ok``) when the block exited without an error:
    then its release wrote the run and closed the window.  Its body is a term
    of `path` too, with the slot's token.
    """

    async def once() -> None:
        began: float | None = None
        window = 0.0
        ok = False
        try:
            async with once_per(coord, path, ONCE_INTERVAL, owner=owner, lease=ONCE_LEASE) as slot:
                if slot.acquired:
                    window = slot.window.timestamp()
                    token = -1 if slot.token is None else slot.token
                    async with rec.term(path, owner, session, token):
                        began = rec.now()
                        await anyio.sleep(rng.uniform(*ONCE_HOLD))
            ok = True
        finally:
            if began is not None:
                rec.window_run(path, owner, window, ok, began)
        await anyio.sleep(rng.uniform(*ONCE_PAUSE))

    async def guarded() -> None:
        try:
            await once()
        except LockLost:
            await anyio.sleep(rng.uniform(*ONCE_PAUSE))

    await forever(rec, "once_per", guarded)


async def cron_worker(
    coord: aiocoord.Coordinator,
    rec: Recorder,
    rng: random.Random,
    root: str,
    jobs: int,
    slot: int,
    session: int,
) -> None:
    """A `Cron` worker with `jobs` jobs firing every second (each worker runs its share).

    Each firing is recorded when its function begins (with its scheduled
    time), is a term of ``cron:<job>`` with ``firing.token``, and writes
    through the fenced store with that token as it begins and before it ends.
    The outcomes the worker writes (ok, failed, interrupted, missed) are
    counted by status (missed ones by the times given up).
    """
    generation = 0

    async def once() -> None:
        nonlocal generation
        generation += 1
        worker = Worker(version="1.0.0", id=f"c{slot}-{generation}")
        cron = Cron(coord, root, worker=worker, grace=CRON_GRACE, settle=0.5)

        async def fire(firing: Firing) -> None:
            resource = f"cron:{firing.job}"
            async with rec.term(resource, worker.id, session, firing.token):
                rec.firing(firing.job, worker.id, firing.scheduled_at.timestamp())
                rec.store.write(resource, firing.token)
                await anyio.sleep(rng.uniform(*CRON_HOLD))
                rec.store.write(resource, firing.token)

        async def count(outcomes: AsyncIterator[FiringOutcome]) -> None:
            async for outcome in outcomes:
                rec.cron_outcomes[outcome.status] += outcome.count

        for k in range(jobs):
            cron.job(every=CRON_EVERY, name=f"j{k}")(fire)
        outcomes = cron.outcomes()  # subscribed now, before anything fires
        async with cron, anyio.create_task_group() as tg:
            tg.start_soon(count, outcomes)
            await anyio.sleep_forever()

    await forever(rec, "cron", once)


async def task_worker(
    coord: aiocoord.Coordinator,
    rec: Recorder,
    root: str,
    tasks: Sequence[str],
    slot: int,
    slots: int,
    interval: float,
    session: int,
) -> None:
    """A worker that leaves and joins again once every `slots` intervals, between two samples.

    Slot k is away from 25 % to 65 % into interval k of each cycle of `slots`
    intervals, so that one worker leaves and one joins in every interval, and
    every sample (taken at the end of an interval) sees them all: the task
    count, which moves by hundreds with each worker, then measures a leak.
    """
    generation = 0
    cycle = slots * interval

    def away(at: float) -> tuple[float, float]:
        """The next away window of this slot that has not ended by `at`."""
        base = (at // cycle) * cycle + (slot + 0.25) * interval
        while base + 0.4 * interval <= at:
            base += cycle
        return base, base + 0.4 * interval

    async def lead(tl: aiocoord.TaskLeadership, task: str, holder: str) -> None:
        while True:
            try:
                async with tl.lead(task) as term:
                    async with rec.term(f"task:{task}", holder, session, term.token):
                        await anyio.sleep_forever()
            except LeadershipLost:
                continue

    async def once() -> None:
        nonlocal generation
        leave, back = away(rec.now())
        if leave <= rec.now():  # inside the window: stay away until its end
            await anyio.sleep(back - rec.now())
            leave, back = away(back)
        generation += 1
        worker = Worker(version="1.0.0", id=f"w{slot}-{generation}")
        async with task_leadership(coord, root, worker=worker, tasks=tasks, settle=0.5) as tl:
            async with anyio.create_task_group() as tg:
                for task in tasks:
                    tg.start_soon(lead, tl, task, worker.id)
                await anyio.sleep(max(0.0, leave - rec.now()))
                tg.cancel_scope.cancel()

    await forever(rec, "tasks", once)


def make_scheduler(coord: aiocoord.Coordinator, root: str, result_ttl: float) -> Scheduler:
    sched = Scheduler(coord, root, result_ttl=result_ttl)

    @sched.job("square")
    async def square(n: int) -> int:
        return n * n

    return sched


async def job_worker(coord: aiocoord.Coordinator, rec: Recorder, root: str, ttl: float) -> None:
    sched = make_scheduler(coord, root, ttl)

    async def once() -> None:
        async with sched.worker(capacity=JOB_CAPACITY):
            await anyio.sleep_forever()

    await forever(rec, "job worker", once)


async def _one_job(sched: Scheduler, rec: Recorder, n: int, slots: anyio.Semaphore) -> None:
    job_id = f"soak-{n}"
    asked = time.monotonic()
    rec.open_jobs[job_id] = asked
    rec.jobs.submitted += 1
    try:
        while True:
            try:
                await sched.submit("square", {"n": n}, job_id=job_id)
                break
            except ConnectionLostError:  # it may have been queued: submit it again to be sure
                rec.counts["submit: ConnectionLostError"] += 1
        try:
            value = await sched.result(job_id)
        except JobFailed:
            rec.jobs.failed += 1
        else:
            rec.jobs.done += 1
            rec.jobs.wrong += value != n * n
        rec.job_latency.append(time.monotonic() - asked)
        del rec.open_jobs[job_id]
    except Exception as exc:
        rec.error(f"job {job_id}", exc)
    finally:
        slots.release()


async def submit_jobs(
    sched: Scheduler,
    rec: Recorder,
    rate: float,
    most: int,
    stop: anyio.Event,
    tg: anyio.abc.TaskGroup,
) -> None:
    """Start one job every 1/`rate` s until `stop` is set (each awaits its result in `tg`).

    At most `most` jobs are open at a time, as a client with bounded
    concurrency would have: while the job client's session is away, the
    backlog (and the memory it takes) stops there instead of growing with
    the outage, so the largest one is reached early in the run.
    """
    slots = anyio.Semaphore(most)
    n = 0
    start = time.monotonic()
    while not stop.is_set():
        await slots.acquire()
        n += 1
        tg.start_soon(_one_job, sched, rec, n, slots)
        due = start + n / rate
        behind = time.monotonic() - due
        if behind > 1.0:  # held up (by the bound or the loop): go on at the rate, no burst
            start += behind
            rec.counts["submitter: behind by more than 1 s"] += 1
        with anyio.move_on_after(max(0.0, due - time.monotonic())):
            await stop.wait()


async def inject_faults(
    proxies: Sequence[FaultProxy],
    rec: Recorder,
    rng: random.Random,
    every: float,
    session_timeout: float,
    expire_share: float,
    rehearse: float | None,
) -> None:
    """Every `every` s on average (0.5-1.5 times), fault one session: cut it, or pause it.

    A pause lasts 10-50 % of the session timeout, or (`expire_share` of the
    faults) 130-160 %, so that the server expires the session.  With
    `rehearse`, the first fault, at that time, expires session 0 (the job
    client's): the largest transient of the run (a full backlog of jobs)
    then comes during the warm-up, and the high-water mark it leaves in RSS
    is not counted as growth.
    """
    if rehearse is not None:
        await anyio.sleep(max(0.0, rehearse - rec.now()))
        await _fault(proxies, rec, 0, "expire", 1.5 * session_timeout)
    while True:
        await anyio.sleep(rng.uniform(0.5, 1.5) * every)
        session = rng.randrange(len(proxies))
        roll = rng.random()
        if roll < expire_share:
            await _fault(proxies, rec, session, "expire", rng.uniform(1.3, 1.6) * session_timeout)
        elif roll < 0.5:
            await _fault(proxies, rec, session, "pause", rng.uniform(0.1, 0.5) * session_timeout)
        else:
            await _fault(proxies, rec, session, "cut", 0.0)


async def _fault(
    proxies: Sequence[FaultProxy], rec: Recorder, session: int, kind: str, hold: float
) -> None:
    proxy = proxies[session]
    start = rec.now()
    if kind == "cut":
        await anyio.to_thread.run_sync(proxy.cut)
    else:
        await anyio.to_thread.run_sync(proxy.pause)
        try:
            await anyio.sleep(hold)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(proxy.resume)
    rec.faults.append(Fault(session, kind, start, rec.now()))


async def follow(coord: aiocoord.Coordinator, rec: Recorder, session: int) -> None:
    """Record `session`'s connection states as they arrive (SUSPENDED and LOST also apart)."""

    async def once() -> None:
        async for event in coord.connection_events():
            now = rec.now()
            rec.states[session].append((now, event.state.value))
            if event.state in SUSPENDED:
                rec.suspended[session].append(now)
        await anyio.sleep_forever()  # the coordinator closed: the run is ending

    await forever(rec, "follow", once)


async def probe(coord: aiocoord.Coordinator, rec: Recorder) -> None:
    """Every 0.1 s: how late the event loop woke up, and one exists() round trip."""

    async def once() -> None:
        while True:
            asked = time.monotonic()
            await anyio.sleep(PROBE_EVERY)
            rec.lag = max(rec.lag, time.monotonic() - asked - PROBE_EVERY)
            asked = time.monotonic()
            await coord.client.exists("/")
            rec.rtt.append(time.monotonic() - asked)

    await forever(rec, "probe", once)
