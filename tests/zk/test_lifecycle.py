"""Components left from another task than the one that entered them, and start()/aclose().

pytest-asyncio runs a yield fixture's set-up and its teardown in two different
tasks; `leftovers`, set up before (so torn down after) every component fixture,
checks from a third one that their teardown left no task and no node behind.
The anyio tests do the same by hand (enter in one task, leave in another, leave
under ``asyncio.wait_for``) on asyncio and uvloop.  `Lifecycle`'s own rules are
in test_lifecycle_rules.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.abc
import httpx
import pytest
import pytest_asyncio
from aiohttp import ClientSession, web
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

import aiocoord
from aiocoord import CoordinatorClosedError, JobStatus, LeadershipLost, Worker
from aiocoord.integrations.fastapi import Coordination, lifespan, router
from aiocoord.metrics import Metrics
from aiocoord.testing import FaultProxy, ZooKeeperServer
from aiocoord.zk.paths import parent
from tests.helpers import aiocoord_tasks, eventually

pytestmark = pytest.mark.timeout(60)

SUM = "sum"
COORD = web.AppKey("coord", aiocoord.Coordinator)
LATCH = web.AppKey("latch", aiocoord.LeaderLatch)


async def ephemerals(coord: aiocoord.Coordinator, path: str = "/") -> list[str]:
    """Every ephemeral node under `path`, whoever owns it."""
    try:
        names = await coord.client.children(path)
    except aiocoord.NoNodeError:
        return []
    found: list[str] = []
    for name in names:
        child = f"{path.rstrip('/')}/{name}"
        stat = await coord.client.exists(child)
        if stat is not None and stat.ephemeral_owner:
            found.append(child)
        found += await ephemerals(coord, child)
    return found


def in_task(call: Callable[[], Awaitable[Any]]) -> asyncio.Task[Any]:
    """`call` in a task of its own, as a supervisor or a framework hook would run it."""

    async def run() -> Any:
        return await call()

    return asyncio.get_running_loop().create_task(run())


def leaving(cm: AbstractAsyncContextManager[Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: cm.__aexit__(None, None, None)


async def add(a: int, b: int) -> int:
    return a + b


def scheduler(coord: aiocoord.Coordinator) -> aiocoord.Scheduler:
    sched = aiocoord.Scheduler(coord, "/pa/jobs")
    sched.job(SUM)(add)
    return sched


# --- pytest-asyncio yield fixtures ------------------------------------------------------------


@pytest_asyncio.fixture
async def leftovers(zk_server: ZooKeeperServer, zk_chroot: str) -> AsyncIterator[None]:
    yield
    with anyio.fail_after(10):
        assert aiocoord_tasks() == set()
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as check:
            assert await ephemerals(check) == []


@pytest_asyncio.fixture
async def coord(
    leftovers: None, zk_server: ZooKeeperServer, zk_chroot: str
) -> AsyncIterator[aiocoord.Coordinator]:
    async with aiocoord.connect(
        zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
    ) as c:
        yield c


@pytest_asyncio.fixture
async def latch(coord: aiocoord.Coordinator) -> AsyncIterator[aiocoord.LeaderLatch]:
    async with aiocoord.leader_latch(coord, "/pa/leader", participant_id="t") as l:  # noqa: E741
        yield l


@pytest_asyncio.fixture
async def tl(coord: aiocoord.Coordinator) -> AsyncIterator[aiocoord.TaskLeadership]:
    async with aiocoord.task_leadership(
        coord, "/pa/tasks", worker=Worker("1.0"), tasks=["report"]
    ) as t:
        yield t


@pytest_asyncio.fixture
async def sched(coord: aiocoord.Coordinator) -> AsyncIterator[aiocoord.Scheduler]:
    s = scheduler(coord)
    async with s.worker(capacity=2):
        yield s


@pytest_asyncio.fixture
async def app(
    leftovers: None, zk_server: ZooKeeperServer, zk_chroot: str
) -> AsyncIterator[FastAPI]:
    led = anyio.Event()

    async def cron() -> None:
        led.set()
        await anyio.sleep_forever()

    app = FastAPI()
    app.include_router(router)
    app.state.led = led
    run = lifespan(
        zk_server.connect_string,
        namespace=zk_chroot,
        session_timeout=4.0,
        leader_tasks={"/pa/cron": cron},
        metrics=Metrics(CollectorRegistry()),
    )
    async with run(app):
        yield app


@pytest.mark.asyncio
async def test_fixture_coordinator(coord: aiocoord.Coordinator) -> None:
    with anyio.fail_after(10):
        await coord.client.create("/eph", b"", mode=aiocoord.zk.CreateMode.EPHEMERAL)
        assert await ephemerals(coord) == ["/eph"]  # `leftovers` sees it gone


@pytest.mark.asyncio
async def test_fixture_leader_latch(latch: aiocoord.LeaderLatch) -> None:
    with anyio.fail_after(10):
        term = await latch.wait()
        assert latch.has_leadership and term.node == latch.node


@pytest.mark.asyncio
async def test_fixture_leadership_loss_cancels_the_body(
    coord: aiocoord.Coordinator, latch: aiocoord.LeaderLatch
) -> None:
    with anyio.fail_after(10):
        with pytest.raises(LeadershipLost, match="node deleted"):
            await lead_until_deleted(coord, latch)  # the latch runs in another task
        await latch.wait()  # it joins again


@pytest.mark.asyncio
async def test_fixture_task_leadership(tl: aiocoord.TaskLeadership) -> None:
    with anyio.fail_after(10):
        async with tl.lead("report") as term:
            assert tl.is_leader("report") and term.worker_id == tl.worker.id


@pytest.mark.asyncio
async def test_fixture_scheduler_worker(sched: aiocoord.Scheduler) -> None:
    with anyio.fail_after(10):
        assert await sched.result(await sched.submit(SUM, {"a": 1, "b": 2})) == 3


@pytest.mark.asyncio
async def test_fixture_fastapi_lifespan(app: FastAPI) -> None:
    with anyio.fail_after(10):
        await app.state.led.wait()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            health = await http.get("/coordination/health")
        assert health.status_code == 200 and health.json()["state"] == "CONNECTED"
        coordination: Coordination = app.state.aiocoord
        assert coordination.latches["/pa/cron"].has_leadership


@pytest_asyncio.fixture
async def web_url(
    leftovers: None, zk_server: ZooKeeperServer, zk_chroot: str
) -> AsyncIterator[str]:
    """An aiohttp app on a free port; its hooks start and stop a coordinator and two latches.

    `on_startup` / `on_cleanup` use start() / aclose(); the cleanup context holds
    its own coordinator and latch in ``async with`` across start-up and cleanup.
    """

    async def on_startup(app: web.Application) -> None:
        coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot, session_timeout=4)
        await coord.start()
        app[COORD] = coord
        app[LATCH] = aiocoord.leader_latch(coord, "/pa/web", participant_id="hooks")
        await app[LATCH].start()

    async def on_cleanup(app: web.Application) -> None:
        await app[LATCH].aclose()
        await app[COORD].aclose()

    async def held(app: web.Application) -> AsyncIterator[None]:
        async with (
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord,
            aiocoord.leader_latch(coord, "/pa/web", participant_id="ctx"),
        ):
            yield

    async def election(request: web.Request) -> web.Response:
        latch = request.app[LATCH]
        return web.json_response([p.id for p in await latch.participants()])

    app = web.Application()
    app.cleanup_ctx.append(held)  # starts first, is cleaned up first
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    app.router.add_get("/election", election)
    runner = web.AppRunner(app)
    with anyio.fail_after(10):
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        with anyio.fail_after(10):
            await runner.cleanup()


@pytest.mark.asyncio
async def test_aiohttp_hooks_start_and_stop_components(web_url: str) -> None:
    with anyio.fail_after(10):
        async with ClientSession() as http, http.get(f"{web_url}/election") as reply:
            assert reply.status == 200
            assert await reply.json() == ["ctx", "hooks"]  # election order: ctx joined first


# --- anyio: enter in one task, leave in another -----------------------------------------------


@pytest.mark.anyio
async def test_coordinator_left_from_another_task(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
        assert await in_task(coord.__aenter__) is coord
        await coord.client.create("/eph", b"", mode=aiocoord.zk.CreateMode.EPHEMERAL)
        await in_task(leaving(coord))
        assert coord.closed and coord.state is None
        assert aiocoord_tasks() == set()
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as check:
            assert await check.client.exists("/eph") is None


@pytest.mark.anyio
async def test_recipes_left_from_another_task(coordinator: aiocoord.Coordinator) -> None:
    with anyio.fail_after(20):
        before = aiocoord_tasks()
        latch = aiocoord.leader_latch(coordinator, "/pa/leader", participant_id="t")
        tl = aiocoord.task_leadership(coordinator, "/pa/tasks", worker=Worker("1.0"), tasks=["r"])
        worker = scheduler(coordinator).worker(capacity=1)
        for component in (latch, tl, worker):
            await in_task(component.__aenter__)
        await latch.wait()
        async with tl.lead("r"):
            pass
        owners = sorted(parent(p) for p in await ephemerals(coordinator))
        assert owners == [
            "/pa/jobs/assigner",
            "/pa/jobs/workers",
            "/pa/leader",
            "/pa/tasks/leaders",
            "/pa/tasks/workers",
        ]
        for component in (worker, tl, latch):
            await in_task(leaving(component))
        assert repr(latch).endswith("CLOSED>") and "closed" in repr(tl) and "CLOSED" in repr(worker)
        assert aiocoord_tasks() <= before
        assert await ephemerals(coordinator) == []


@pytest_asyncio.fixture
async def lock(coord: aiocoord.Coordinator) -> AsyncIterator[aiocoord.CasLock]:
    async with aiocoord.cas_lock(coord, "/pa/lock", owner="t", lease=5.0) as held:
        yield held


@pytest.mark.asyncio
async def test_fixture_cas_lock(lock: aiocoord.CasLock, coord: aiocoord.Coordinator) -> None:
    assert lock.held
    status = await aiocoord.CasLock(coord, "/pa/lock").status()
    assert status.held and status.owner == "t"


@pytest.mark.anyio
async def test_cas_lock_and_once_per_left_from_another_task(
    coordinator: aiocoord.Coordinator,
) -> None:
    """The renewer and the session watcher run in a task the hold owns."""
    with anyio.fail_after(20):
        before = aiocoord_tasks()
        hold = aiocoord.cas_lock(coordinator, "/pa/lock", owner="t", lease=5.0)
        lock = await in_task(hold.__aenter__)
        assert lock.held
        assert aiocoord_tasks() > before  # the keepers run
        await in_task(leaving(hold))
        assert not lock.held
        status = await aiocoord.CasLock(coordinator, "/pa/lock").status()
        assert not status.held
        assert aiocoord_tasks() <= before

        once = aiocoord.once_per(coordinator, "/pa/once", interval=3600.0, owner="t")
        slot = await in_task(once.__aenter__)
        assert slot.acquired
        await in_task(leaving(once))
        assert aiocoord_tasks() <= before
        async with aiocoord.once_per(coordinator, "/pa/once", interval=3600.0) as again:
            assert not again.acquired  # the run was recorded by the other task's exit
            assert again.last_run is not None


@pytest.mark.anyio
async def test_coordination_started_and_closed_from_other_tasks(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(20):
        before = aiocoord_tasks()
        ran = anyio.Event()

        async def job() -> None:
            ran.set()
            await anyio.sleep_forever()

        coordination = Coordination(coordinator, leader_tasks={"/pa/job": job}, latches=("/pa/x",))
        await in_task(coordination.start)
        await ran.wait()
        assert coordination.tasks["/pa/job"].running
        await in_task(coordination.aclose)
        assert not coordination.tasks["/pa/job"].running
        assert all(repr(latch).endswith("CLOSED>") for latch in coordination.latches.values())
        assert aiocoord_tasks() <= before
        assert await ephemerals(coordinator) == []


@pytest.mark.anyio
async def test_left_under_wait_for(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer
) -> None:
    with anyio.fail_after(20):
        before = aiocoord_tasks()
        other = aiocoord.connect(zk_server.connect_string, namespace="/pa-other")
        latch = aiocoord.leader_latch(coordinator, "/pa/leader")
        tl = aiocoord.task_leadership(coordinator, "/pa/tasks", worker=Worker("1.0"), tasks=["r"])
        worker = scheduler(coordinator).worker(capacity=1)
        for component in (other, latch, tl, worker):
            await component.__aenter__()
        for component in (worker, tl, latch, other):
            await asyncio.wait_for(component.__aexit__(None, None, None), timeout=10)
        assert other.closed
        assert aiocoord_tasks() <= before
        assert await ephemerals(coordinator) == []


@pytest.mark.anyio
async def test_wait_for_cuts_a_workers_drain_short(coordinator: aiocoord.Coordinator) -> None:
    with anyio.fail_after(20):
        sched = aiocoord.Scheduler(coordinator, "/pa/jobs")
        started = anyio.Event()

        @sched.job("hang")
        async def hang() -> None:
            started.set()
            await anyio.sleep_forever()

        worker = sched.worker(capacity=1, drain_timeout=30)
        await worker.start()
        job_id = await sched.submit("hang")
        await started.wait()
        with anyio.fail_after(10), pytest.raises(TimeoutError):
            await asyncio.wait_for(worker.aclose(), timeout=0.5)  # not the 30 s drain
        assert await sched.status(job_id) is JobStatus.PENDING  # handed back
        assert await ephemerals(coordinator) == []


# --- start() / aclose() --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_start_and_aclose_pairs(coordinator: aiocoord.Coordinator) -> None:
    with anyio.fail_after(20):
        before = aiocoord_tasks()
        latch = aiocoord.LeaderLatch(coordinator, "/pa/leader", participant_id="p")
        tl = aiocoord.TaskLeadership(coordinator, "/pa/tasks", worker=Worker("1.0"), tasks=["r"])
        worker = scheduler(coordinator).worker(capacity=1)
        await latch.start()
        await tl.start()
        await worker.start()
        assert (await latch.wait()).node == latch.node
        for component in (worker, tl, latch):
            await component.aclose()
            await component.aclose()  # idempotent
        with pytest.raises(CoordinatorClosedError):
            await latch.start()  # once only
        with pytest.raises(RuntimeError):
            await tl.start()
        assert aiocoord_tasks() <= before
        assert await ephemerals(coordinator) == []
        never = aiocoord.LeaderLatch(coordinator, "/pa/never")
        await never.aclose()  # before start(): nothing to stop, and no start after
        with pytest.raises(CoordinatorClosedError):
            await never.start()


@pytest.mark.anyio
async def test_coordinator_start_and_aclose(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(20):
        coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
        await coord.start()
        assert coord.state is aiocoord.ConnectionState.CONNECTED
        await coord.aclose()
        await coord.aclose()
        assert coord.closed and aiocoord_tasks() == set()
        with pytest.raises(CoordinatorClosedError):
            await coord.start()


@pytest.mark.anyio
async def test_cancelled_while_starting_leaves_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20), FaultProxy(*zk_server.address) as proxy:
        proxy.delay(0.4)  # every reply arrives after we gave up
        coord = aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=4)
        with anyio.move_on_after(0.1) as scope:
            await coord.start()
        assert scope.cancelled_caught and coord.closed
        assert aiocoord_tasks() == set()

        proxy.delay(0)
        async with aiocoord.connect(proxy.connect_string, namespace=zk_chroot) as slow:
            before = aiocoord_tasks()
            proxy.delay(0.4)  # the create reaches the server after we gave up
            latch = aiocoord.leader_latch(slow, "/pa/leader", participant_id="late")
            with anyio.move_on_after(0.1) as scope:
                await latch.start()
            assert scope.cancelled_caught and repr(latch).endswith("CLOSED>")
            assert aiocoord_tasks() <= before
            proxy.delay(0)
            await anyio.sleep(0.5)  # past the delay: a create still on its way has landed
            await eventually(lambda: _no_ephemerals(slow))


async def _no_ephemerals(coord: aiocoord.Coordinator) -> bool:
    return await ephemerals(coord) == []


@pytest.mark.anyio
async def test_leadership_loss_cancels_a_body_in_the_entering_task(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(10):
        async with aiocoord.leader_latch(coordinator, "/pa/leader") as latch:
            with pytest.raises(LeadershipLost, match="node deleted"):
                await lead_until_deleted(coordinator, latch)


async def lead_until_deleted(coord: aiocoord.Coordinator, latch: aiocoord.LeaderLatch) -> None:
    """Lead, delete our node, wait: the loss must cancel the body (else `fail_after` fires)."""
    async with latch.leadership():
        assert latch.node is not None
        await coord.client.delete(latch.node)
        await anyio.sleep_forever()
