"""What one session holds through faults: flat, not one more entry per cut or per job.

One coordinator reaches the server through a fault proxy and carries a job
worker (not the assigner: that one runs straight to the server, and the
faulted worker follows its latch node and sees every job through its
self-claim watch), a `Cron` worker with an ``every=`` job, a mutex, once_per
and a leader latch that follows a leader which never leaves.  Jobs flow all
the time.  Its connection is cut, or paused for a quarter of the session
timeout, again and again; the session stays the same.  After a warm-up, the
interpreter's allocated blocks (`sys.getallocatedblocks`, after a collection)
and the client's one-shot watches must stay flat.

Before the fix each cut left the latch's predecessor watch and the task
leadership's worker-list watch in the watch registry (restored on every
reconnect), and each job a heap entry in the self-claimer of the faulted
worker once a deletion was missed while disconnected: about 40 blocks a
second here, until the session ended.

The session's other entries (`ZkClient.session_counts()`: requests in flight,
deadline timers, state followers and streams, chores) are checked the same
way, and one by one below, with the entries kept per session lost and a
latch's given-back nodes (docs/reliability.md, "What one session holds",
lists every registry and its bound).
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread
import pytest

import aiocoord
from aiocoord import ConnectionState, CoordError, Cron, Firing, Scheduler, Worker
from aiocoord.scheduler import _claimer
from aiocoord.scheduler._claimer import Claimer
from aiocoord.scheduler._lookup import bucketed
from aiocoord.scheduler._records import JobsLayout
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from aiocoord.zk import DeleteOp
from tests.helpers import eventually, recording

pytestmark = pytest.mark.anyio

SESSION = 4.0
WARMUP_FAULTS = 3
FAULTS = 10  # measured: cuts and pauses in turn
PAUSE = 1.0  # a quarter of the session timeout: the session lives
FLOW = 1.0  # jobs flow this long before each fault
SETTLE = 1.0  # after each fault is over, before measuring
JOB_RATE = 40.0
OPEN_JOBS = 40
# Blocks the process may gain over the measured faults, each measured with no job in
# flight: what is left is noise (timer handles, a cron firing), +-350 measured.
BLOCKS_BOUND = 600
CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    p = FaultProxy(*zk_server.address).start()
    try:
        yield p
    finally:
        p.stop()


def blocks() -> int:
    gc.collect()
    return sys.getallocatedblocks()


def scheduler(coord: aiocoord.Coordinator) -> Scheduler:
    sched = Scheduler(coord, "/jobs", result_ttl=5.0)

    @sched.job("square")
    async def square(n: int) -> int:
        return n * n

    return sched


async def until_connected(coord: aiocoord.Coordinator) -> None:
    async for event in coord.connection_events():
        if event.state in CONNECTED:
            return


async def retry(body: Any) -> None:
    """Run `body` again and again; what a fault makes it raise is expected."""
    while True:
        try:
            await body()
        except CoordError:
            await anyio.sleep(0.1)


class Flow:
    """Jobs at `JOB_RATE`, at most `OPEN_JOBS` awaiting their result, until held.

    `quiet` holds the flow and waits until no job is open, so that a
    measurement counts no job in flight; the next jobs go through a fresh
    client `Scheduler` (its bounded memo of the ids it submitted, 4096, is
    not what this test measures).
    """

    def __init__(self, coord: aiocoord.Coordinator) -> None:
        self.coord = coord
        self.done = 0
        self.first = anyio.Event()  # set once a job is done
        self.open = 0
        self._going = anyio.Event()
        self._going.set()
        self._idle = anyio.Event()

    async def run(self) -> None:
        slots = anyio.Semaphore(OPEN_JOBS)
        n = 0
        async with anyio.create_task_group() as tg:
            while True:
                if not self._going.is_set():
                    await self._going.wait()
                sched = scheduler(self.coord)
                while self._going.is_set():
                    await slots.acquire()
                    n += 1
                    self.open += 1
                    tg.start_soon(self._one, sched, n, slots)
                    await anyio.sleep(1 / JOB_RATE)

    async def _one(self, sched: Scheduler, n: int, slots: anyio.Semaphore) -> None:
        try:
            while True:
                try:
                    await sched.submit("square", {"n": n}, job_id=f"j{n}")
                    assert await sched.result(f"j{n}") == n * n
                    self.done += 1
                    self.first.set()
                    return
                except CoordError:
                    await anyio.sleep(0.1)
        finally:
            slots.release()
            self.open -= 1
            if self.open == 0:
                self._idle.set()

    async def quiet(self) -> None:
        self._going = anyio.Event()
        if self.open:
            self._idle = anyio.Event()
            await self._idle.wait()

    def resume(self) -> None:
        self._going.set()


async def measure(flow: Flow) -> int:
    """The allocated blocks with no job in flight, then the jobs flow again."""
    with anyio.fail_after(20):
        await flow.quiet()
    await anyio.sleep(0.3)  # the last results' watches and replies settle
    try:
        return blocks()
    finally:
        flow.resume()


def faulted_roles(tg: anyio.abc.TaskGroup, coord: aiocoord.Coordinator, fired: list[str]) -> None:
    sched = scheduler(coord)

    async def worker() -> None:
        async with sched.worker(capacity=8):
            await anyio.sleep_forever()

    async def cron() -> None:
        c = Cron(coord, "/cron", worker=Worker(version="1", id="w1"), history=2, settle=0.5)

        @c.job(every=1.0, name="tick")
        async def tick(firing: Firing) -> None:
            fired.append(firing.job)

        async with c:
            await anyio.sleep_forever()

    async def mutex() -> None:
        async with aiocoord.mutex(coord, "/mutex", participant_id="m1"):
            await anyio.sleep(0.05)
        await anyio.sleep(0.1)

    async def once() -> None:
        async with aiocoord.once_per(coord, "/once", 1.0, owner="o1", lease=5.0):
            await anyio.sleep(0.05)
        await anyio.sleep(0.2)

    async def follower() -> None:
        async with aiocoord.leader_latch(coord, "/latch", participant_id="follower"):
            await anyio.sleep_forever()

    for role in (worker, cron, mutex, once, follower):
        tg.start_soon(retry, role)


async def test_one_session_through_cuts_and_pauses_holds_no_more(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    fired: list[str] = []
    with anyio.fail_after(120):
        async with (
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=SESSION
            ) as direct,
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=SESSION
            ) as coord,
            anyio.create_task_group() as tg,
        ):
            # The direct side leads first: the assigner, and the latch's leader for good.
            async with aiocoord.leader_latch(direct, "/latch", participant_id="leader") as latch:
                await latch.wait()
                assigner = scheduler(direct)

                async def assigning() -> None:
                    async with assigner.worker(capacity=8):
                        await anyio.sleep_forever()

                tg.start_soon(assigning)
                flow = Flow(direct)
                tg.start_soon(flow.run)
                with anyio.fail_after(30):
                    await flow.first.wait()
                faulted_roles(tg, coord, fired)
                session = coord.session_id

                async def fault(k: int) -> None:
                    await anyio.sleep(FLOW)  # jobs in flight when it comes
                    if k % 2 == 0:
                        await anyio.to_thread.run_sync(proxy.cut)
                    else:
                        await anyio.to_thread.run_sync(proxy.pause)
                        await anyio.sleep(PAUSE)
                        await anyio.to_thread.run_sync(proxy.resume)
                    with anyio.fail_after(15):
                        await anyio.sleep(0.2)
                        await until_connected(coord)
                    await anyio.sleep(SETTLE)

                for k in range(WARMUP_FAULTS):
                    await fault(k)
                base, watches = await measure(flow), coord.client.watch_counts()
                held = coord.client.session_counts()
                jobs_before, fired_before = flow.done, len(fired)
                trail = []
                for k in range(FAULTS):
                    await fault(k)
                    trail.append(await measure(flow) - base)
                after = coord.client.watch_counts()
                still = coord.client.session_counts()
                assert coord.session_id == session  # one session all along
                tg.cancel_scope.cancel()

    # It really ran: jobs and cron firings all along, through the faults.
    assert flow.done - jobs_before > 10 * FAULTS, (flow.done, jobs_before)
    assert len(fired) - fired_before >= FAULTS, (len(fired), fired_before)
    # The owner's entries: no watch more than after the warm-up (one may be in flight).
    assert after["one_shot"] <= watches["one_shot"] + 1, (watches, after)
    assert after["kept"] <= watches["kept"] + 1, (watches, after)
    assert after["persistent"] == watches["persistent"], (watches, after)
    # The session's other entries: none more per fault (a mutex or once_per held right
    # then follows the states, a timer is armed only while suspended).
    for key in ("timers", "state_followers", "state_streams", "chores"):
        assert still[key] <= held[key] + 2, (key, held, still)
    # And the heap: flat within the bound (each of the last three), whatever held it.
    assert max(trail[-3:]) <= BLOCKS_BOUND, trail


# --- the self-claimer's own entries --------------------------------------------------------------


async def busy_claimer(
    coord: aiocoord.Coordinator, tg: anyio.abc.TaskGroup, layout: JobsLayout
) -> Claimer:
    """A worker's self-claimer, running, that never claims (no free slot), as while an
    assigner gives it work; returns once its watch is set."""
    await coord.client.ensure_path(layout.jobs)
    claimer = Claimer(coord, layout, "w1", {"square"}, free=lambda: 0, active=lambda: True)
    tg.start_soon(claimer.run)
    probe = layout.job("probe")
    with anyio.fail_after(10):
        while True:  # the watch is set once it tells of a node made now
            await coord.client.create(probe, make_parents=True)
            await coord.client.delete(probe)
            await coord.client.exists("/")  # the events came before this reply
            await anyio.sleep(0.05)
            if claimer.sizes()["heap"]:
                return claimer


async def test_a_job_left_pending_holds_no_heap_entries_behind_it(coordinator: Any) -> None:
    """Each job seen went into the timer's heap, and a gone one left it only from the top:
    behind a job left due and unclaimed, one entry more per job seen, for good."""
    layout = JobsLayout("/jobs")
    client = coordinator.client
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            claimer = await busy_claimer(coordinator, tg, layout)
            await client.create(layout.job("stuck"), make_parents=True)
            for n in range(600):  # each one pending a moment, then taken (by an assigner)
                await client.create(layout.job(f"j{n}"), make_parents=True)
                await client.delete(layout.job(f"j{n}"))
            await client.exists("/")
            await anyio.sleep(0.2)
            sizes = claimer.sizes()
            tg.cancel_scope.cancel()
    assert sizes["when"] == 1, sizes  # the stuck job alone
    assert sizes["heap"] <= 2 + _claimer._HEAP_SLACK, sizes  # before: 600 and more


async def test_a_listing_does_not_bring_back_a_job_deleted_while_it_was_in_flight(
    coordinator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch told of the deletion before the listing's replies were all in: the listing
    brought the job back, claimable for good (no DELETED event comes again)."""
    layout = JobsLayout("/jobs")
    client = coordinator.client

    async def late_listing(c: Any, parent: str) -> dict[str, str]:
        paths = await bucketed(c, parent)
        await client.delete(layout.job("gone"))  # while the other buckets' replies come
        await client.exists("/")
        await anyio.sleep(0.1)  # the claimer's task has seen the event
        return paths

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            claimer = await busy_claimer(coordinator, tg, layout)
            claimer.relist()  # forget what the probe left
            await client.create(layout.job("gone"), make_parents=True)
            await client.exists("/")
            await anyio.sleep(0.1)
            claimer.relist()  # as after a reconnect: "gone" known from the listing only
            monkeypatch.setattr(_claimer, "bucketed", late_listing)
            await claimer._list()
            sizes = claimer.sizes()
            tg.cancel_scope.cancel()
    assert sizes["when"] == 0, sizes


# --- the session's other entries (`ZkClient.session_counts()`) -----------------------------------


async def suspended(coord: aiocoord.Coordinator, proxy: FaultProxy) -> None:
    """Cut `coord`'s connection and refuse new ones; returns once SUSPENDED is seen."""
    await anyio.to_thread.run_sync(proxy.reject_new)
    async with recording(coord) as events:
        mark = events.mark()
        await anyio.to_thread.run_sync(proxy.cut)
        await events.wait_for(ConnectionState.SUSPENDED, after=mark)


@pytest.mark.parametrize("end", ["leave", "step_down"])
async def test_a_term_ended_while_suspended_leaves_no_timer(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy, end: str
) -> None:
    """The latch let go of a term's loss rule without stopping its deadline timer: armed at
    SUSPENDED, it rang once the connection was back and armed itself again, at each ring,
    for as long as the session lived (one timer, and the latch with it, per such term)."""
    with anyio.fail_after(40):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=SESSION
        ) as coord:
            client = coord.client
            base = client.session_counts()
            latch = aiocoord.LeaderLatch(coord, "/latch", participant_id="a")
            await latch.start()
            await latch.wait()
            await client.exists("/")  # answered now: the deadline is a full 2/3 T away
            await suspended(coord, proxy)
            assert client.session_counts()["timers"] == base["timers"] + 1  # the term's deadline
            async with anyio.create_task_group() as tg:
                tg.start_soon(latch.aclose if end == "leave" else latch.step_down)
                await anyio.lowlevel.checkpoint()  # the term ends in the call's first step
                assert not latch.has_leadership
                await anyio.to_thread.run_sync(functools.partial(proxy.reject_new, False))
            await until_connected(coord)
            ended = client.session_counts()
            await anyio.sleep(SESSION)  # past the deadline the timer was armed for
            later = client.session_counts()
            if end == "step_down":
                assert latch.has_leadership  # alone: leads again, connected (no timer)
                await latch.aclose()
            left = client.session_counts()
    assert ended["timers"] == later["timers"] == left["timers"] == base["timers"], (
        base,
        ended,
        later,
    )
    assert left["state_followers"] == base["state_followers"], (base, left)
    assert left["chores"] == 0, left


async def test_state_followers_and_streams_given_up_leave_none(
    coordinator: aiocoord.Coordinator,
) -> None:
    """Connection-state streams whose readers went away (left with ``break``, dropped
    unread, cancelled) and followers of latches, mutexes and locks left: none stays."""
    client = coordinator.client
    with anyio.fail_after(30):
        base = client.session_counts()
        async for _ in coordinator.connection_events():
            break
        stream = coordinator.connection_events()
        await stream.__anext__()
        del stream
        async with anyio.create_task_group() as tg:

            async def reader(*, task_status: anyio.abc.TaskStatus[None]) -> None:
                stream = coordinator.connection_events()
                await stream.__anext__()  # subscribed
                task_status.started()
                async for _ in stream:
                    pass

            await tg.start(reader)
            tg.cancel_scope.cancel()
        for n in range(20):
            async with aiocoord.leader_latch(coordinator, "/latch", participant_id=f"l{n}"):
                pass
            async with aiocoord.mutex(coordinator, "/mutex", participant_id=f"m{n}"):
                pass
            async with aiocoord.cas_lock(coordinator, "/cas", owner=f"c{n}", lease=5.0):
                pass
        gc.collect()  # a stream dropped unread is closed when it is collected
        await anyio.sleep(0.1)  # its finalizer (an asyncio task) has run
        after = client.session_counts()
    del base["in_flight"], after["in_flight"]  # the ensemble tracker's read, say
    assert after == base, (base, after)


async def test_requests_in_flight_on_a_cut_all_fail_at_once(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    """The connection's table of requests awaiting a reply is emptied when it ends: each
    caller learns `ConnectionLostError` at the cut, none waits for its own deadline."""
    with anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, session_timeout=SESSION
        ) as coord:
            client = coord.client
            await client.create("/n")
            await anyio.to_thread.run_sync(proxy.pause)
            sent = [client.delete_now("/missing") for _ in range(50)]
            assert client.session_counts()["in_flight"] >= 50
            failed = 0
            with anyio.fail_after(2):  # the cut, not the read timeout
                await anyio.to_thread.run_sync(proxy.cut)
                for result in sent:
                    with pytest.raises(aiocoord.ConnectionLostError):
                        await result()
                    failed += 1
            await anyio.to_thread.run_sync(proxy.resume)
            await until_connected(coord)
            await client.exists("/n")
            assert client.session_counts()["in_flight"] == 0
    assert failed == 50


# --- a latch's given-back nodes ------------------------------------------------------------------


async def test_a_name_given_back_can_lead_when_it_comes_back(
    coordinator: aiocoord.Coordinator,
) -> None:
    """The latch kept the path of every node it gave back (one more per step down, for good)
    and never led on that path again; ZooKeeper's layout names restart at 0 under a new
    parent, so after a step down and the parent's removal the latch, alone, never led."""
    client = coordinator.client
    with anyio.fail_after(30):
        async with aiocoord.leader_latch(
            coordinator, "/zl", participant_id="a", layout="zookeeper"
        ) as latch:
            first = await latch.wait()
            assert await latch.step_down()
            second = await latch.wait()
            assert (first.node, second.node) == ("/zl/n_0000000000", "/zl/n_0000000001")
            # Our node and its parent go at once: the next node is named as the first.
            with pytest.raises(aiocoord.LeadershipLost):
                await lead_until_gone(latch, client, [DeleteOp(second.node), DeleteOp("/zl")])
            assert await latch.wait(timeout=10), "never led on the recurring name"
            third = await latch.wait()
    assert third.node == first.node and third.token > second.token


async def lead_until_gone(
    latch: aiocoord.LeaderLatch, client: aiocoord.ZkClient, ops: list[Any]
) -> None:
    """Run `ops` as leader, then lead until the term ends (raises `LeadershipLost`)."""
    async with latch.leadership():
        await client.multi(ops)
        await anyio.sleep_forever()


# --- entries per session lost --------------------------------------------------------------------

EXPIRIES = 3


async def test_a_persistent_node_forgets_sessions_long_expired(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A persistent node remembered every session it sent a create in (one more per expiry,
    for the node's whole life); those expired past twice the session timeout go."""
    timeout = 1.5
    with anyio.fail_after(60):
        async with (
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=timeout
            ) as coord,
            aiocoord.persistent_node(coord, "/reg/pod", data=b"p") as node,
        ):
            for _ in range(EXPIRIES - 1):
                old = coord.session_id
                await expire_session(coord)
                await eventually(functools.partial(_created_in_new, node, old), timeout=20)
                await anyio.sleep(2.2 * timeout)  # the old session is long gone on the server
            # The next session's create forgets every earlier one but the last.
            old = coord.session_id
            await expire_session(coord)
            await eventually(functools.partial(_created_in_new, node, old), timeout=20)
            remembered = len(node._sessions)
    assert remembered <= 2, remembered  # before: EXPIRIES + 1


async def _created_in_new(node: aiocoord.PersistentNode, old: int | None) -> bool:
    return node.created_in not in (None, old)


async def test_coordination_keeps_lost_sessions_only_while_named(
    coordinator: aiocoord.Coordinator,
) -> None:
    """`Coordination` noted when each session was lost (one more entry per expiry, for the
    process's life); only sessions a leader task or a hold still names are kept."""
    from aiocoord.integrations.fastapi import Coordination

    async def job() -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(60):
        coordination = Coordination(coordinator, leader_tasks={"/ct/job": job})
        async with coordination.running():
            await eventually(lambda: _true(coordination.tasks["/ct/job"].running), timeout=10)
            for _ in range(EXPIRIES):
                old = coordinator.session_id
                await expire_session(coordinator)
                await eventually(functools.partial(_runs_anew, coordination, old), timeout=20)
            kept = dict(coordination._lost_at)
    # The task's last session before this one, at most (it may have run on it still).
    assert len(kept) <= 1, kept


async def _true(value: bool) -> bool:
    return value


async def _runs_anew(coordination: Any, old: int | None) -> bool:
    task = coordination.tasks["/ct/job"]
    return bool(task.running and task.session not in (None, old))
