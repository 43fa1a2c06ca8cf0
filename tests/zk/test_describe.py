"""The read-only describe API of each recipe, read against live recipes on a real server.

Each view is checked against what the recipe itself says (the latch's term, the
lock's token, the leaders task leadership reports, the scheduler's job ids),
and a corrupt node is shown as an error next to the others, never raised.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import Coordinator, NodeDataError
from aiocoord.recipes.cas_lock import CasLock, describe_lock, is_lock_record, lock_view, once_per
from aiocoord.recipes.leader_latch import describe_latch, latch_layout
from aiocoord.recipes.task_leadership import (
    choose_leaders,
    describe_task_leadership,
    is_task_leadership,
    read_task_leader,
    read_task_worker,
)
from aiocoord.scheduler import Scheduler, describe_scheduler, is_scheduler
from aiocoord.scheduler._layout import JobsLayout
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sessions(
    server: ZooKeeperServer, chroot: str, n: int
) -> AsyncIterator[list[Coordinator]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                aiocoord.connect(server.connect_string, namespace=chroot, session_timeout=4.0)
            )
            for _ in range(n)
        ]


def test_recognisers() -> None:
    curator = ["_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-latch-0000000003", "x-latch-0000000001"]
    assert latch_layout(curator) == "curator"
    assert latch_layout(["n_0000000001", "n_0000000000"]) == "zookeeper"
    assert latch_layout([]) is None
    assert latch_layout(["n_0000000001", "config"]) is None
    assert is_task_leadership(["leaders", "workers", "extra"])
    assert not is_task_leadership(["workers"])
    assert is_scheduler(["jobs", "assignments", "results"])
    assert not is_scheduler(["jobs"])
    assert is_lock_record(b'{"format":"aiocoord.cas-lock/1","state":"free"}')
    assert not is_lock_record(b'{"format":"other"}')


async def test_describe_latch(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    async with sessions(zk_server, zk_chroot, 2) as coords, AsyncExitStack() as stack:
        assert (await describe_latch(coords[0], "/none")).participants == ()
        first = await stack.enter_async_context(
            aiocoord.leader_latch(coords[0], "/leader", participant_id="pod-0")
        )
        async with aiocoord.leader_latch(coords[1], "/leader", participant_id="pod-1") as second:
            with anyio.fail_after(10):
                term = await first.wait()
            view = await describe_latch(coords[1].client, "/leader")
            assert view.layout == "curator"
            assert (view.leader, view.leader_token) == ("pod-0", term.token)
            assert [p.id for p in view.participants] == ["pod-0", "pod-1"]
            assert [p.session for p in view.participants] == [c.session_id for c in coords]
            assert [p.node for p in view.participants] == [
                first.node.rsplit("/", 1)[1] if first.node else None,
                second.node.rsplit("/", 1)[1] if second.node else None,
            ]
        view = await describe_latch(coords[0], "/leader")
        assert [p.id for p in view.participants] == ["pod-0"]
        # ZooKeeper's own layout, with an id that is not UTF-8: shown, not raised.
        await coords[0].client.create("/zk", b"")
        for data in (b"b", b"\xff-a"):
            await coords[0].client.create("/zk/n_", data, mode=CreateMode.EPHEMERAL_SEQUENTIAL)
        view = await describe_latch(coords[0], "/zk")
        assert view.layout == "zookeeper"
        assert [p.id for p in view.participants] == ["b", "\ufffd-a"]


async def test_describe_lock(coordinator: Coordinator) -> None:
    view = await describe_lock(coordinator, "/locks/none")
    assert (view.held, view.owner, view.token, view.lease_left) == (False, None, None, None)
    lock = CasLock(coordinator, "/locks/a", owner="pod-0", lease=30)
    assert await lock.try_acquire()
    view = await describe_lock(coordinator, "/locks/a")
    assert (view.held, view.owner, view.token) == (True, "pod-0", lock.token)
    assert view.lease_left is not None and 25 < view.lease_left <= 30
    assert view.lease_expires is not None
    node = await coordinator.client.get("/locks/a")
    later = time.time() + 60  # the lease has run out by then, the record still says held
    stale = lock_view("/locks/a", node.data, node.stat.mzxid, now=later)
    assert (stale.held, stale.owner, stale.lease_left) == (False, "pod-0", 0.0)
    await lock.release()
    view = await describe_lock(coordinator, "/locks/a")
    assert (view.held, view.owner, view.token, view.lease_left) == (
        False,
        "pod-0",
        lock.token,
        None,
    )

    with pytest.raises(RuntimeError):
        async with once_per(coordinator, "/once", 3600, owner="pod-1"):
            raise RuntimeError("report failed")
    async with once_per(coordinator, "/once", 3600, owner="pod-2") as slot:
        assert slot.acquired
    view = await describe_lock(coordinator, "/once")
    assert view.last_run is not None and view.last_failure is not None
    assert (view.last_run.owner, view.last_run.error) == ("pod-2", None)
    assert view.last_run.window.timestamp() % 3600 == 0
    assert view.last_failure.owner == "pod-1"
    assert view.last_failure.error == "RuntimeError: report failed"

    await coordinator.client.create("/locks/foreign", b'{"format":"aiocoord.cas-lock/9"}')
    with pytest.raises(NodeDataError, match="newer"):
        await describe_lock(coordinator, "/locks/foreign")


async def test_describe_task_leadership(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    async with sessions(zk_server, zk_chroot, 2) as coords, AsyncExitStack() as stack:
        workers = [aiocoord.Worker("1.0", id="w-old"), aiocoord.Worker("1.1", id="w-new")]
        tls = [
            await stack.enter_async_context(
                aiocoord.task_leadership(c, "/tasks", worker=w, tasks=["a", "b", "c"])
            )
            for c, w in zip(coords, workers, strict=True)
        ]
        want = choose_leaders(["a", "b", "c"], {"w-old": "1.0", "w-new": "1.1"})
        assert want == {"a": "w-new", "b": "w-new", "c": "w-new"}
        assert choose_leaders(["a"], {"w-old": "1.0", "w-new": "1.1"}, prefer="oldest") == {
            "a": "w-old"
        }
        with anyio.fail_after(10):
            while await tls[0].leaders() != want:  # noqa: ASYNC110 - server state
                await anyio.sleep(0.05)
        await coords[0].client.create("/tasks/workers/junk", b"not json")
        await coords[0].client.create("/tasks/leaders/d", b"[]")
        view = await describe_task_leadership(coords[0], "/tasks")
        assert [(w.id, w.version) for w in view.workers] == [("w-new", "1.1"), ("w-old", "1.0")]
        assert {t: lead.worker for t, lead in view.leaders.items()} == want
        for task, lead in view.leaders.items():
            node = await coords[0].client.get(f"/tasks/leaders/{task}")
            assert (lead.task, lead.version, lead.token) == (task, "1.1", node.stat.czxid)
        assert set(view.invalid_workers) == {"junk"}
        assert view.invalid_workers["junk"].path == "/tasks/workers/junk"
        assert set(view.invalid_leaders) == {"d"}
        assert await read_task_leader(coords[1], "/tasks", "zzz") is None
        worker = await read_task_worker(coords[1], "/tasks", "w-old")
        assert worker is not None and worker.version == "1.0"
        with pytest.raises(NodeDataError):
            await read_task_leader(coords[1], "/tasks", "d")


async def test_describe_scheduler(coordinator: Coordinator) -> None:
    sched = Scheduler(coordinator, "/jobs")
    started, release = anyio.Event(), anyio.Event()

    @sched.job("slow")
    async def slow() -> None:
        started.set()
        await release.wait()

    @sched.job("bad")
    async def bad() -> None:
        raise ValueError("no")

    pending = await sched.submit("slow", {})  # no worker yet: stays pending
    view = await describe_scheduler(coordinator, "/jobs")
    assert [(j.id, j.name) for j in view.pending] == [(pending, "slow")]
    assert (view.pending_count, view.assigner, view.workers, view.assigned) == (1, None, (), {})
    async with sched.worker(capacity=2, worker_id="w1"):
        failed = await sched.submit("bad", {})
        with anyio.fail_after(10), pytest.raises(aiocoord.JobFailed):
            await sched.result(failed)
        with anyio.fail_after(10):
            await started.wait()  # so the slow job sits in the worker's queue
        view = await describe_scheduler(coordinator, "/jobs")
        assert view.assigner == "w1"
        [worker] = view.workers
        assert worker.id.startswith("w1-")  # its node name: the id and the session
        assert (worker.node, worker.capacity, worker.jobs, worker.draining) == (
            worker.id,
            2,
            ("bad", "slow"),
            False,
        )
        assert view.assigned == {worker.node: (pending,)}
        assert (view.pending, view.pending_count) == ((), 0)
        assert (view.results.count, view.results.failed, view.results.failed_jobs) == (
            1,
            1,
            (failed,),
        )
        release.set()
        with anyio.fail_after(10):
            await sched.result(pending)
    junk = JobsLayout("/jobs").job("junk")
    await coordinator.client.ensure_path(JobsLayout("/jobs").job_bucket("junk"))
    await coordinator.client.create(junk, b"{}")
    view = await describe_scheduler(coordinator, "/jobs", max_reads=1)
    assert (view.results.count, view.results.read) == (2, 1)
    assert (view.pending, view.pending_count, view.assigner, view.workers) == ((), 1, None, ())
    assert view.invalid_jobs["junk"].path == junk
