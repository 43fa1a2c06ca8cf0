"""What a campaign participant runs: one function per role, sharing a `Context`.

- ``latch``: a leader latch on ``/latch``; while leading, fenced writes to
  resource ``latch`` with the term's token;
- ``lock``: `cas_lock` on ``/lock`` (a 2 s lease, shorter than the session
  timeout) over and over, holding it a random short while (one hold in
  three lasts longer than the lease, so that it lives on renewals) and
  writing to resource ``lock``;
- ``mutex``: the queued `mutex` on ``/mutex`` over and over, the same way,
  writing to resource ``mutex``;
- ``selector``: a `leader_selector` (requeue) on ``/selector`` whose ``lead``
  holds for as long as a mutex holder does, writing to resource ``selector``,
  then returns (the next in line leads; this one joins again at the back);
- ``once``: `once_per` on ``/once`` every 0.1–0.3 s; a run writes to
  resource ``once`` and is logged with its window;
- ``tasks``: task leadership on ``/tasks`` for tasks t1..t3 (its version comes
  from the command line); each led task writes to resource ``task:<name>``;
- ``cron``: a `Cron` worker on ``/cron`` with one job, ``tick``, every
  second; each firing writes to resource ``cron`` with ``firing.token`` and
  is logged with its scheduled time (``win``), so that a time run twice shows;
- ``jobs``: a worker of the job scheduler on ``/jobs`` (whose handler logs
  each run) that also submits a job every 0.2–0.6 s while the orchestrator
  allows it, and awaits each result; the worker's assigner terms are logged
  too (role ``assigner``), read from its log lines, the only hook it has;
- ``cache``: a `tree_cache` of ``/cache`` whose every event is logged
  (``cache_view`` when it is entered, ``cache_ev`` after, ``cache_final``
  when the participant stops), while the same participant writes under
  ``/cache/<name>.<inc>`` (while the orchestrator allows writes, as jobs):
  nodes named once each (``n<k>``), created, set and deleted, never created
  again, so that a change the cache misses stays missed and shows in its
  final view.
- ``sem``: a semaphore of `SEM_LEASES` leases on ``/sem``, each lease held a
  random short while and writing to resource ``sem`` (at most `SEM_LEASES`
  terms at once);
- ``rw``: a read/write lock on ``/rw``, a write on every fifth turn (roles
  ``read`` and ``write``, resource ``rw``: a writer's term overlaps nobody's).
- ``members``: a `group_member` of ``/group`` and a `service_discovery`
  registration under ``/services/chaos``, both as ``<name>.<inc>``; it logs
  when each is joined (``mjoin``) and left (``mleave``), and every view of
  each that differs from the one before (``mview``, polled every
  `MEMBER_POLL` s: the ids listed and whether the view was fresh);
- ``count``: a `shared_count` on ``/count`` and an `atomic_long` on
  ``/along``, each incremented by one again and again while the
  orchestrator allows writes, every 0.05-0.3 s (``cadd`` before the call,
  ``cack`` with the value it returned, ``cunk`` when it raised: outcome
  unknown), and both read every 0.2-0.5 s (``cread``, with the read's start ``t0`` and the
  session it was read on);
- ``barrier``: a `double_barrier` of `BARRIER_MEMBERS` per round, a round
  every `BARRIER_PERIOD` s of wall clock (round ``k`` at
  ``/barrier/r<k>``, so every participant agrees on it); a participant joins
  at a random moment of the round's first `BARRIER_JOIN` s (``bjoin``), passes
  (``bin``) or gives up (``bnot``), stays in a short while, leaves
  (``bleave``) and has left (``bout``) or gave up waiting (``bstuck``).

Every term is logged when its body starts and when it ends (cancelled or
returned), on the shared monotonic clock (see `records`).  A body first
passes a checkpoint, so a term that was already lost when its body was
scheduled is never logged as begun; each fenced write is shielded (and
bounded), so a write the store accepted always lies inside its logged term.
A role survives every `CoordError` (logged as ``coord_error``); any other
exception is logged as ``error``, a bug, and the role starts again.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import random
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.lowlevel

import aiocoord
from aiocoord import (
    CoordError,
    Cron,
    Firing,
    JobFailed,
    LeadershipLost,
    LockLost,
    NodeExistsError,
    NoNodeError,
    ReadWriteLock,
    ServiceInstance,
    Worker,
    atomic_long,
    cas_lock,
    double_barrier,
    group_member,
    leader_latch,
    leader_selector,
    mutex,
    once_per,
    semaphore,
    service_discovery,
    shared_count,
    task_leadership,
    tree_cache,
)
from aiocoord.scheduler import Scheduler

from .records import Writer
from .store import StoreClient

__all__ = (
    "ALONG",
    "BARRIER_MEMBERS",
    "BARRIER_PERIOD",
    "BARRIER_ROOT",
    "CACHE_ROOT",
    "COUNT",
    "GROUP",
    "CRON_ROOT",
    "JOBS_ROOT",
    "LATCH",
    "LEASE",
    "LOCK",
    "LOCK_LEASE",
    "MEMBER_POLL",
    "MUTEX",
    "NAMESPACE",
    "ONCE",
    "ONCE_INTERVAL",
    "ROLES",
    "ROLE_FUNCS",
    "RW",
    "SEM",
    "SELECTOR",
    "SEM_LEASES",
    "SERVICE",
    "SERVICES",
    "SKEW",
    "STALL",
    "TASKS",
    "Context",
)

NAMESPACE = "/chaos"
LATCH = "/latch"
LOCK = "/lock"
MUTEX = "/mutex"
SELECTOR = "/selector"
CRON_ROOT = "/cron"
CRON_EVERY = 1.0  # the cron job's interval (s)
ONCE = "/once"
TASKS_ROOT = "/tasks"
TASKS = ("t1", "t2", "t3")
JOBS_ROOT = "/jobs"
CACHE_ROOT = "/cache"
CACHE_POOL = 4  # nodes each participant's cache writer keeps at most
LEASE = 3.0  # once_per lease (s)
SKEW = 0.5  # its clock-skew allowance, and the CAS lock's (s)
# The CAS lock's lease: shorter than the session timeout (3 s), so that a holder cut off
# must stop at its own lease deadline, before LOST would stop it: the lease, not the
# session, is what keeps two holders apart.
LOCK_LEASE = 2.0
ONCE_INTERVAL = 1.0  # once_per window (s)
STALL = 0.3  # a participant that runs nothing for this long logs a stall (s)
SEM = "/sem"
SEM_LEASES = 2
RW = "/rw"
GROUP = "/group"
SERVICES = "/services"
SERVICE = "chaos"
MEMBER_POLL = 0.1  # how often a member looks at its views (s)
COUNT = "/count"
ALONG = "/along"
BARRIER_ROOT = "/barrier"
BARRIER_PERIOD = 5.0  # a barrier round every this many seconds of wall clock
BARRIER_MEMBERS = 3  # participants a round needs (of the campaign's four)
# A participant joins within the round's first this many seconds: spread out, so that a
# barrier letting one in too early does it before the next one has begun to join (entering
# takes 0.1-1.4 s on a loaded machine).
BARRIER_JOIN = 2.5
BARRIER_ENTER = 3.5  # and gives up entering this many seconds into the round
BARRIER_LEAVE = 4.8  # and gives up waiting for the others to leave then
ROLES = (
    "latch",
    "lock",
    "mutex",
    "selector",
    "once",
    "tasks",
    "cron",
    "jobs",
    "cache",
    "sem",
    "rw",
    "members",
    "count",
    "barrier",
)

Body = Callable[[], Awaitable[None]]


class Context:
    """What every role shares: the log, the store, this incarnation's names and a seeded RNG."""

    def __init__(self, args: argparse.Namespace, log: Writer, store: StoreClient) -> None:
        self.name: str = args.name
        self.inc: int = args.inc
        self.version: str = args.version
        self.seed: int = args.seed
        self.log = log
        self.store = store
        self._terms = 0

    def rng(self, role: str) -> random.Random:
        return random.Random(f"{self.seed}/{self.name}/{self.inc}/{role}")

    async def hold(
        self,
        role: str,
        res: str,
        token: int | None,
        rng: random.Random,
        *,
        duration: float | None = None,
        ids: list[str] | None = None,
        **extra: Any,
    ) -> None:
        """The body of a term: log it, write through the store until cancelled or `duration`.

        The term's id is appended to `ids` as soon as it begins.
        """
        await anyio.lowlevel.checkpoint()  # a term already lost never begins
        if token is None:
            self.log.emit("error", role=role, exc="term without a token", tb="")
            return
        tid = self.begin(role, res, token, **extra)
        if ids is not None:
            ids.append(tid)
        why = "exit"
        try:
            until = time.monotonic() + duration if duration is not None else None
            while until is None or time.monotonic() < until:
                await self.write(res, token, tid)
                await anyio.sleep(rng.uniform(0.03, 0.12))
        except BaseException as exc:
            why = "cancelled" if isinstance(exc, anyio.get_cancelled_exc_class()) else repr(exc)
            raise
        finally:
            self.log.emit("end", id=tid, why=why)

    def begin(self, role: str, res: str, token: int, **extra: Any) -> str:
        """Log the start of a term; returns its id (for its ``end``)."""
        self._terms += 1
        tid = f"{self.name}.{self.inc}.{self._terms}"
        self.log.emit("term", id=tid, role=role, res=res, tok=token, **extra)
        return tid

    async def write(self, res: str, token: int, tid: str) -> bool | None:
        # Shielded: once sent, the write's outcome is part of the term (bounded: the store
        # is on loopback and answers in microseconds unless the orchestrator is gone).
        with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
            return await self.store.write(res, token, tid)
        return None


async def forever(ctx: Context, role: str, body: Body) -> None:
    """Run `body` again and again; a `CoordError` is logged as expected, anything else as a bug."""
    while True:
        try:
            await body()
        except CoordError as exc:
            ctx.log.emit("coord_error", role=role, exc=type(exc).__name__, msg=str(exc)[:200])
            await anyio.sleep(0.1)
        except Exception as exc:
            ctx.log.emit("error", role=role, exc=repr(exc)[:500], tb=traceback.format_exc())
            await anyio.sleep(0.5)


# --- the roles ----------------------------------------------------------------------------


async def latch_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("latch")

    async def body() -> None:
        async with leader_latch(coord, LATCH, participant_id=f"{ctx.name}.{ctx.inc}") as latch:
            while True:
                try:
                    async with latch.leadership() as term:
                        await ctx.hold("latch", "latch", term.token, rng)
                except LeadershipLost:
                    continue

    await forever(ctx, "latch", body)


async def lock_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("lock")
    owner = f"{ctx.name}.{ctx.inc}"

    async def body() -> None:
        try:
            async with cas_lock(coord, LOCK, owner=owner, lease=LOCK_LEASE, skew=SKEW) as lock:
                await ctx.hold("lock", "lock", lock.token, rng, duration=hold_time(rng))
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(0.05, 0.4))

    await forever(ctx, "lock", body)


def hold_time(rng: random.Random) -> float:
    """How long a lock or mutex holder keeps it: mostly short, one hold in three past the
    lock's lease (so that it lives on renewals)."""
    return rng.uniform(0.2, 1.2) if rng.random() < 2 / 3 else rng.uniform(LOCK_LEASE, 6.0)


async def mutex_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("mutex")
    pid = f"{ctx.name}.{ctx.inc}"

    async def body() -> None:
        try:
            async with mutex(coord, MUTEX, participant_id=pid) as held:
                await ctx.hold("mutex", "mutex", held.token, rng, duration=hold_time(rng))
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(0.05, 0.4))

    await forever(ctx, "mutex", body)


async def selector_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("selector")

    async def lead(term: aiocoord.LeadershipTerm) -> None:
        await ctx.hold("selector", "selector", term.token, rng, duration=hold_time(rng))

    async def body() -> None:
        pid = f"{ctx.name}.{ctx.inc}"
        async with leader_selector(coord, SELECTOR, lead, participant_id=pid, requeue=True):
            await anyio.sleep_forever()

    await forever(ctx, "selector", body)


async def cron_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("cron")
    worker = Worker(version=ctx.version, id=f"{ctx.name}.{ctx.inc}")

    async def body() -> None:
        cron = Cron(coord, CRON_ROOT, worker=worker, grace=10.0, settle=0.3)

        @cron.job(every=CRON_EVERY, name="tick")
        async def tick(firing: Firing) -> None:
            at = firing.scheduled_at.timestamp()
            duration = rng.uniform(0.05, 0.3)
            await ctx.hold("cron", "cron", firing.token, rng, duration=duration, win=at)

        async with cron:
            await anyio.sleep_forever()

    await forever(ctx, "cron", body)


async def once_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("once")
    owner = f"{ctx.name}.{ctx.inc}"

    async def body() -> None:
        ids: list[str] = []
        outcome = "cancelled"
        asked = time.monotonic()  # the lock may be held from here: see the checker's windows
        try:
            async with once_per(
                coord, ONCE, ONCE_INTERVAL, owner=owner, lease=LEASE, skew=SKEW
            ) as slot:
                if slot.acquired:
                    win = slot.window.timestamp()
                    duration = rng.uniform(0.05, 0.2)
                    await ctx.hold(
                        "once",
                        "once",
                        slot.token,
                        rng,
                        duration=duration,
                        ids=ids,
                        win=win,
                        asked=asked,
                    )
            outcome = "ok"
        except LockLost:
            outcome = "lost"
        except CoordError as exc:
            outcome = f"unknown: {type(exc).__name__}"
            if not ids:
                raise
        finally:
            if ids:
                ctx.log.emit("outcome", id=ids[0], res=outcome)
        await anyio.sleep(rng.uniform(0.1, 0.3))

    await forever(ctx, "once", body)


async def tasks_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("tasks")
    worker = Worker(version=ctx.version, id=f"{ctx.name}.{ctx.inc}")

    async def lead(tl: aiocoord.TaskLeadership, task: str) -> None:
        while True:
            try:
                async with tl.lead(task) as term:
                    await ctx.hold("task", f"task:{task}", term.token, rng)
            except LeadershipLost:
                continue

    async def body() -> None:
        async with task_leadership(coord, TASKS_ROOT, worker=worker, tasks=TASKS, settle=0.3) as tl:
            async with anyio.create_task_group() as tg:
                for task in TASKS:
                    tg.start_soon(lead, tl, task)

    await forever(ctx, "tasks", body)


class AssignerTerms(logging.Handler):
    """Turns the scheduler worker's assigner log lines into ``term``/``end`` events.

    The worker runs its assigner under a leader latch of its own and says so
    only in its log: "assigner of <root>: <id> (token 0x..)" inside the term,
    "... stopped (<reason>)" or "... term ended by ..." after it.  A term
    cancelled because the worker leaves gets no line of the worker's: its end
    is the latch's "no longer leader of <root>/assigner as <id>: closed",
    logged once the term's body is out (the worker leaves the latch after
    its `leadership()` block).  Lines naming another worker are ignored.
    """

    LOGGERS = ("aiocoord.scheduler._worker", "aiocoord.recipes.leader_latch")

    def __init__(self, ctx: Context, root: str = JOBS_ROOT) -> None:
        super().__init__(logging.INFO)
        self.ctx = ctx
        self.worker = f"{ctx.name}.{ctx.inc}"
        self.latch = f"{root}/assigner"
        self.open: str | None = None

    def attach(self) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).addHandler(self)

    def detach(self) -> None:
        for name in self.LOGGERS:
            logging.getLogger(name).removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        ours = len(args) == 3 and args[1] == self.worker  # (root or path, id, token or reason)
        if msg.startswith("no longer leader of "):
            if ours and args[0] == self.latch and args[2] == "closed":
                self.finish("closed")
        elif not msg.startswith("assigner of "):
            return
        elif msg.endswith("(token 0x%x)") and ours and isinstance(args[2], int):
            self.finish("replaced")
            self.open = self.ctx.begin("assigner", "assigner", args[2])
        elif ("stopped" in msg and ours) or "term ended" in msg:  # the latter names no worker
            self.finish(record.getMessage()[:100])

    def finish(self, why: str) -> None:
        if self.open is not None:
            self.ctx.log.emit("end", id=self.open, why=why)
            self.open = None


async def jobs_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("jobs")
    sched = Scheduler(coord, JOBS_ROOT)

    @sched.job("work")
    async def work(tag: str, ms: int) -> str:
        ctx.log.emit("run", tag=tag, ms=ms)
        await anyio.sleep(ms / 1000)
        return tag

    async def wait_result(job_id: str, tag: str) -> None:
        try:
            value = await sched.result(job_id)
        except JobFailed as exc:
            ctx.log.emit("result", job=job_id, status="FAILED", msg=str(exc)[:200])
            return
        ctx.log.emit("result", job=job_id, status="DONE")
        if value != tag:
            ctx.log.emit("error", role="jobs", exc=f"{job_id} returned {value!r}, not {tag!r}")

    async def submit(n: int) -> None:
        tag = f"{ctx.name}.{ctx.inc}.{n}"
        try:
            job_id = await sched.submit("work", {"tag": tag, "ms": rng.randint(20, 300)})
        except CoordError as exc:  # outcome unknown: not counted as submitted
            ctx.log.emit("coord_error", role="jobs", exc=type(exc).__name__, msg=str(exc)[:200])
            return
        ctx.log.emit("submit", job=job_id, tag=tag)
        waits.start_soon(wait_result, job_id, tag)

    async def body() -> None:
        worker = sched.worker(capacity=4, worker_id=f"{ctx.name}.{ctx.inc}", drain_timeout=2.0)
        async with worker:
            n = 0
            while True:
                await anyio.sleep(rng.uniform(0.2, 0.6))
                if await ctx.store.may_submit():
                    n += 1
                    await submit(n)

    handler = AssignerTerms(ctx)
    handler.attach()
    try:
        async with anyio.create_task_group() as waits:
            await forever(ctx, "jobs", body)
    finally:
        handler.finish("exit")
        handler.detach()


def node_states(nodes: dict[str, aiocoord.Node]) -> dict[str, list[int]]:
    """``{path: [czxid, mzxid]}``: a cache's or the server's view, as logged."""
    return {path: [node.stat.czxid, node.stat.mzxid] for path, node in sorted(nodes.items())}


def _state(node: aiocoord.Node | None) -> list[int] | None:
    return None if node is None else [node.stat.czxid, node.stat.mzxid]


async def cache_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("cache")
    mine = f"{CACHE_ROOT}/{ctx.name}.{ctx.inc}"
    views = 0
    final: dict[str, Any] = {"cid": None, "fresh": False, "nodes": None}
    live: list[str] = []  # this writer's nodes, oldest first (kept when a write fails)
    made = 0

    async def watch() -> None:
        nonlocal views
        views += 1
        cid = f"{ctx.name}.{ctx.inc}.c{views}"
        async with tree_cache(coord, CACHE_ROOT) as tree:
            events = tree.events()  # subscribed before the view is taken: nothing between
            ctx.log.emit("cache_view", cid=cid, nodes=node_states(tree.nodes()))
            try:
                async for ev in events:
                    ctx.log.emit(
                        "cache_ev",
                        cid=cid,
                        ev=ev.type.value,
                        path=ev.path,
                        node=_state(ev.node),
                        prev=_state(ev.previous),
                    )
            except anyio.get_cancelled_exc_class():
                # The participant stops (writes stopped a calm phase ago): its last view.
                final.update(cid=cid, fresh=not tree.stale, nodes=node_states(tree.nodes()))
                raise

    async def write() -> None:
        nonlocal made
        for path in (CACHE_ROOT, mine):
            with contextlib.suppress(NodeExistsError):
                await coord.client.create(path)
        while True:
            await anyio.sleep(rng.uniform(0.05, 0.25))
            if not await ctx.store.may_submit():
                continue
            if len(live) < 2 or (len(live) < CACHE_POOL and rng.random() < 0.4):
                made += 1
                path = f"{mine}/n{made}"
                live.append(path)  # if its outcome is unknown, a set or delete finds out
                with contextlib.suppress(NodeExistsError):  # an earlier try landed after all
                    await coord.client.create(path, f"{ctx.name}.{ctx.inc}.0".encode())
            elif rng.random() < 0.6:
                path = rng.choice(live)
                try:
                    await coord.client.set(path, f"{ctx.name}.{ctx.inc}.{rng.random()}".encode())
                except NoNodeError:
                    live.remove(path)
            else:
                path = live.pop(0)
                with contextlib.suppress(NoNodeError):
                    await coord.client.delete(path)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(forever, ctx, "cache", watch)
            tg.start_soon(forever, ctx, "cache", write)
    finally:
        ctx.log.emit("cache_final", **final)


async def sem_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("sem")
    owner = f"{ctx.name}.{ctx.inc}"

    async def body() -> None:
        try:
            async with semaphore(coord, SEM, max_leases=SEM_LEASES, participant_id=owner) as lease:
                await ctx.hold("sem", "sem", lease.token, rng, duration=rng.uniform(0.1, 0.6))
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(0.02, 0.2))

    await forever(ctx, "sem", body)


async def rw_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("rw")
    rw = ReadWriteLock(coord, RW, participant_id=f"{ctx.name}.{ctx.inc}")
    turn = [0]

    async def body() -> None:
        turn[0] += 1
        write = turn[0] % 5 == 0
        try:
            async with rw.write() if write else rw.read() as held:
                role = "write" if write else "read"
                await ctx.hold(role, "rw", held.token, rng, duration=rng.uniform(0.05, 0.4))
        except LockLost:
            pass
        await anyio.sleep(rng.uniform(0.02, 0.2))

    await forever(ctx, "rw", body)


async def members_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    me = f"{ctx.name}.{ctx.inc}"

    async def views(kind: str, read: Callable[[], Awaitable[tuple[list[str], bool]]]) -> None:
        last: tuple[list[str], bool] | None = None
        while True:
            now = await read()
            if now != last:
                last = now
                ctx.log.emit("mview", kind=kind, members=now[0], fresh=now[1])
            await anyio.sleep(MEMBER_POLL)

    async def group() -> None:
        try:
            async with group_member(coord, GROUP, member_id=me, data=me.encode()) as g:
                ctx.log.emit("mjoin", kind="group")

                async def read() -> tuple[list[str], bool]:
                    return sorted(g.members()), not g.stale

                await views("group", read)
        finally:
            ctx.log.emit("mleave", kind="group")

    async def discovery() -> None:
        instance = ServiceInstance(name=SERVICE, id=me, address="127.0.0.1", port=1)
        try:
            async with service_discovery(coord, SERVICES) as sd:
                await sd.register(instance)
                ctx.log.emit("mjoin", kind="sd")

                async def read() -> tuple[list[str], bool]:
                    found = await sd.instances(SERVICE)
                    return sorted(i.id for i in found), not sd.stale

                await views("sd", read)
        finally:
            ctx.log.emit("mleave", kind="sd")

    async with anyio.create_task_group() as tg:
        tg.start_soon(forever, ctx, "members", group)
        tg.start_soon(forever, ctx, "members", discovery)


async def count_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("count")
    n = [0]

    async def bump(counter: str, add: Callable[[int], Awaitable[int]]) -> None:
        while True:
            await anyio.sleep(rng.uniform(0.05, 0.3))  # enough to collide, not to load the machine
            if not await ctx.store.may_submit():
                continue
            n[0] += 1
            key = f"{ctx.name}.{ctx.inc}.{n[0]}"
            t0 = time.monotonic()
            ctx.log.emit("cadd", c=counter, n=key)
            try:
                value = await add(1)
            except CoordError as exc:  # the outcome of its last write is unknown
                ctx.log.emit("cunk", c=counter, n=key, exc=type(exc).__name__)
                await anyio.sleep(0.1)
                continue
            ctx.log.emit("cack", c=counter, n=key, v=value, t0=t0, sid=coord.session_id)

    async def body() -> None:
        async with shared_count(coord, COUNT) as sc:
            along = atomic_long(coord, ALONG)

            async def reads() -> None:
                while True:
                    await anyio.sleep(rng.uniform(0.2, 0.5))
                    t0, sid = time.monotonic(), coord.session_id
                    if not sc.stale:
                        ctx.log.emit("cread", c="shared", v=sc.value, t0=t0, sid=sid)
                    t0, sid = time.monotonic(), coord.session_id
                    try:
                        value = await along.get()
                    except CoordError:
                        continue
                    if coord.session_id == sid:
                        ctx.log.emit("cread", c="long", v=value, t0=t0, sid=sid)

            async with anyio.create_task_group() as tg:
                tg.start_soon(bump, "shared", sc.add)
                tg.start_soon(bump, "long", along.add)
                tg.start_soon(reads)

    await forever(ctx, "count", body)


async def barrier_role(coord: aiocoord.Coordinator, ctx: Context) -> None:
    rng = ctx.rng("barrier")
    me = f"{ctx.name}.{ctx.inc}"

    async def one_round() -> None:
        now = time.time()
        k = math.floor(now / BARRIER_PERIOD)
        if now - k * BARRIER_PERIOD > BARRIER_JOIN * 0.9:
            k += 1  # too late for this one: the next
        start = k * BARRIER_PERIOD
        await anyio.sleep(max(0.0, start + rng.uniform(0.0, BARRIER_JOIN) - time.time()))
        path = f"{BARRIER_ROOT}/r{k}"
        barrier = double_barrier(coord, path, members=BARRIER_MEMBERS, participant_id=me)
        ctx.log.emit("bjoin", r=k)
        try:
            passed = await barrier.enter(timeout=max(0.1, start + BARRIER_ENTER - time.time()))
        except CoordError as exc:
            ctx.log.emit("bnot", r=k, why=type(exc).__name__)
            raise
        if not passed:
            ctx.log.emit("bnot", r=k, why="timeout")
            return
        ctx.log.emit("bin", r=k)
        await anyio.sleep(rng.uniform(0.05, 0.5))
        ctx.log.emit("bleave", r=k)
        try:
            out = await barrier.leave(timeout=max(0.1, start + BARRIER_LEAVE - time.time()))
        except CoordError as exc:
            ctx.log.emit("bstuck", r=k, why=type(exc).__name__)
            raise
        ctx.log.emit("bout" if out else "bstuck", r=k, why=None if out else "timeout")

    await forever(ctx, "barrier", one_round)


ROLE_FUNCS: dict[str, Callable[[aiocoord.Coordinator, Context], Coroutine[Any, Any, None]]] = {
    "latch": latch_role,
    "lock": lock_role,
    "mutex": mutex_role,
    "selector": selector_role,
    "cron": cron_role,
    "once": once_role,
    "tasks": tasks_role,
    "jobs": jobs_role,
    "cache": cache_role,
    "sem": sem_role,
    "rw": rw_role,
    "members": members_role,
    "count": count_role,
    "barrier": barrier_role,
}
