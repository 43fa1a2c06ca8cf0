"""The FastAPI integration over a real ZooKeeper: lifespan, leader-only tasks, health, status.

Apps are served in-process through httpx's ASGI transport with the lifespan run
around it (each app a separate participant, as separate pods would be); one
test drives the ASGI lifespan protocol itself, as a server does, so the
lifespan state reaches the requests the way it does under uvicorn.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any

import anyio
import anyio.abc
import httpx
import pytest
from fastapi import Depends, FastAPI, Request
from prometheus_client import CollectorRegistry

import aiocoord
from aiocoord import ConfigError, ConnectionState, InvalidPathError
from aiocoord.integrations.fastapi import (
    Coordination,
    coordinator,
    lifespan,
    require_leader,
    router,
)
from aiocoord.metrics import Metrics
from aiocoord.recipes.leader_latch._election import LeadershipTerm
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually

CRON = "/app/cron-leader"

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[dict[str, Any]]]


class Cron:
    """A leader task that records its runs: started, cancelled, tokens."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.cancelled = 0
        self.started = anyio.Event()

    async def __call__(self, term: LeadershipTerm) -> None:
        self.tokens.append(term.token)
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            self.started = anyio.Event()
            raise


def make_app(ls: Lifespan) -> FastAPI:
    app = FastAPI(lifespan=ls)
    app.include_router(router)

    @app.post("/admin/rebuild")
    async def rebuild(
        term: Annotated[LeadershipTerm, Depends(require_leader(CRON))],
        coord: Annotated[aiocoord.Coordinator, Depends(coordinator)],
    ) -> dict[str, Any]:
        created = await coord.client.create(
            "/rebuilt-", b"", mode=aiocoord.zk.CreateMode.PERSISTENT_SEQUENTIAL
        )
        return {"token": term.token, "node": created.path}

    return app


class Pod:
    """One app instance, served in a task of its own until `stop()` (as a pod would be)."""

    def __init__(self, ls: Lifespan) -> None:
        self.ls = ls
        self.app = make_app(ls)
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://app"
        )
        self._stop = anyio.Event()
        self._stopped = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with self.ls(self.app), self.http:
                task_status.started()
                await self._stop.wait()
        finally:
            self._stopped.set()

    async def stop(self) -> None:
        self._stop.set()
        await self._stopped.wait()

    @property
    def coordination(self) -> Coordination:
        found = self.app.state.aiocoord
        assert isinstance(found, Coordination)
        return found


def zk(server: ZooKeeperServer, chroot: str, **more: Any) -> dict[str, Any]:
    return {"namespace": chroot, "session_timeout": 4.0, **more}


# --- two instances, one leader task -------------------------------------------------------------


@pytest.mark.anyio
async def test_two_apps_only_the_leader_runs_the_task(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Pod A leads and alone runs the cron; B answers 503 naming A; when A shuts down,
    its task is cancelled and B's starts with a larger token."""
    hosts = zk_server.connect_string
    cron_a, cron_b = Cron(), Cron()
    registry = CollectorRegistry()
    a = Pod(
        lifespan(
            hosts,
            participant_id="pod-a",
            leader_tasks={CRON: cron_a},
            metrics=Metrics(registry),
            status_detail=True,
            **zk(zk_server, zk_chroot),
        )
    )
    b = Pod(
        lifespan(
            hosts,
            participant_id="pod-b",
            leader_tasks={CRON: cron_b},
            status_detail=True,
            **zk(zk_server, zk_chroot),
        )
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await cron_a.started.wait()
            await tg.start(b.run)
            status_a = (await a.http.get("/coordination/status")).json()
            status_b = (await b.http.get("/coordination/status")).json()
            for status in (status_a, status_b):
                [latch] = status["latches"]
                assert latch["leader"] == "pod-a"
                assert latch["participants"] == ["pod-a", "pod-b"]
            assert status_a["latches"][0]["is_leader"] is True
            assert status_a["latches"][0]["task"]["running"] is True
            assert status_a["latches"][0]["task"]["token"] == f"0x{cron_a.tokens[0]:x}"
            assert status_b["latches"][0]["is_leader"] is False
            assert status_b["latches"][0]["task"]["starts"] == 0
            assert cron_b.tokens == []
            assert "pod-a CONNECTED leading=1/1 locks=0" in repr(a.coordination)
            # The hosts shown are those the next attempt uses (`coord.hosts`), which follow
            # set_hosts and reconfigs, not the settings' first list.
            assert status_a["session"]["hosts"] == hosts
            await a.coordination.coord.set_hosts(f"{hosts},127.0.0.1:1")
            status_a = (await a.http.get("/coordination/status")).json()
            assert status_a["session"]["hosts"] == f"{hosts},127.0.0.1:1"

            ok = await a.http.post("/admin/rebuild")
            assert ok.status_code == 200 and ok.json()["token"] == cron_a.tokens[0]
            refused = await b.http.post("/admin/rebuild")
            assert refused.status_code == 503
            assert refused.json()["detail"] == {
                "error": "not the leader",
                "path": CRON,
                "leader": "pod-a",
            }
            assert refused.headers["retry-after"] == "1"
            rebuilt = await a.coordination.coord.client.children("/")
            assert len([n for n in rebuilt if n.startswith("rebuilt-")]) == 1

            assert registry.get_sample_value("aiocoord_leader", {"path": CRON}) == 1
            assert registry.get_sample_value("aiocoord_session_state", {"state": "CONNECTED"}) == 1
            elected = {"path": CRON, "transition": "elected"}
            assert registry.get_sample_value("aiocoord_leadership_transitions_total", elected) == 1

            async with a.coordination.lock("/locks/report", lease=5) as lock:
                held = (await a.http.get("/coordination/status")).json()["locks"]
                assert held == [
                    {
                        "path": "/locks/report",
                        "owner": "pod-a",
                        "token": f"0x{lock.token:x}",
                        "held_for": held[0]["held_for"],
                    }
                ]
            acquired = {"path": "/locks/report", "result": "acquired"}
            assert registry.get_sample_value("aiocoord_lock_acquire_total", acquired) == 1
            held_count = {"path": "/locks/report"}
            assert registry.get_sample_value("aiocoord_lock_held_seconds_count", held_count) == 1

            await a.stop()  # pod A shuts down: its task is cancelled, its latch node deleted
            assert cron_a.cancelled == 1
            await cron_b.started.wait()
            assert cron_b.tokens[0] > cron_a.tokens[0]
            assert (await b.http.post("/admin/rebuild")).json()["token"] == cron_b.tokens[0]
            status_b = (await b.http.get("/coordination/status")).json()
            assert status_b["latches"][0]["participants"] == ["pod-b"]
            assert status_b["latches"][0]["task"]["starts"] == 1
            await b.stop()
        assert await _left_behind(hosts, zk_chroot) == []


async def _left_behind(hosts: str, chroot: str) -> list[str]:
    """Latch nodes still under the cron path once every pod is gone."""
    async with aiocoord.connect(hosts, namespace=chroot) as coord:
        try:
            return await coord.client.children(CRON)
        except aiocoord.NoNodeError:
            return []


# --- session loss: cancelled, restarted; liveness ----------------------------------------------


@pytest.mark.anyio
async def test_session_loss_cancels_the_task_and_a_new_term_restarts_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """LOST cancels the leader task (health stays live: it stopped); on the new session
    the latch wins again and the task restarts with a larger token; status counts it."""
    cron = Cron()
    pod = Pod(
        lifespan(zk_server.connect_string, leader_tasks={CRON: cron}, **zk(zk_server, zk_chroot))
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(pod.run)
            await cron.started.wait()
            coord = pod.coordination.coord
            await expire_session(coord)
            await eventually(lambda: _true(cron.cancelled == 1 and len(cron.tokens) == 2))
            assert cron.tokens[1] > cron.tokens[0]
            health = await pod.http.get("/coordination/health")
            assert health.status_code == 200 and health.json()["live"] is True
            ready = await pod.http.get("/coordination/health/ready")
            assert ready.status_code == 200 and ready.json()["state"] == "RECONNECTED"
            status = (await pod.http.get("/coordination/status")).json()
            assert status["session"]["transitions"]["LOST"] == 1
            task = status["latches"][0]["task"]
            # The expiry first drops the connection: SUSPENDED already ends the term.
            assert (task["starts"], task["losses"]) == (2, 1)
            assert task["last_loss"] in ("suspended", "session lost")
            assert status["participant_id"] == _default_id()
            await pod.stop()


@pytest.mark.anyio
async def test_liveness_fails_while_a_task_outlives_its_lost_session(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A leader task that shields itself from cancellation keeps running after LOST: the
    liveness probe answers 503 naming it until it ends, then 200 again."""
    release, running = anyio.Event(), anyio.Event()

    async def stubborn() -> None:
        with anyio.CancelScope(shield=True):
            running.set()
            await release.wait()

    pod = Pod(
        lifespan(
            zk_server.connect_string,
            leader_tasks={CRON: stubborn},
            liveness_grace=0.2,
            **zk(zk_server, zk_chroot),
        )
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(pod.run)
            await running.wait()
            assert (await pod.http.get("/coordination/health")).status_code == 200
            await expire_session(pod.coordination.coord)

            async def not_live() -> bool:
                return (await pod.http.get("/coordination/health/live")).status_code == 503

            await eventually(not_live)
            body = (await pod.http.get("/coordination/health")).json()
            assert body["live"] is False and body["stuck"] == [f"leader task {CRON}"]
            release.set()

            async def live() -> bool:
                return (await pod.http.get("/coordination/health")).status_code == 200

            await eventually(live)
            await pod.stop()


# --- the ASGI lifespan protocol, the app's own lifespan, bad arguments --------------------------


@pytest.mark.anyio
async def test_wraps_the_apps_own_lifespan_through_the_asgi_protocol(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The app's lifespan runs inside ours (connected on entry, still on exit), its state
    merges with ours into every request, and a no-argument leader task runs."""
    seen: dict[str, Any] = {}
    ticked = anyio.Event()

    async def tick() -> None:
        ticked.set()
        await anyio.sleep_forever()

    @asynccontextmanager
    async def own(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        coord = app.state.aiocoord.coord
        seen["entry"] = coord.state
        await coord.client.create("/own", b"startup")
        yield {"greeting": "hello"}
        seen["exit"] = coord.state

    ls = lifespan(
        zk_server.connect_string,
        leader_tasks={CRON: tick},
        app_lifespan=own,
        **zk(zk_server, zk_chroot),
    )
    app = FastAPI(lifespan=ls)
    app.include_router(router)

    @app.get("/hello")
    async def hello(
        request: Request, coord: Annotated[aiocoord.Coordinator, Depends(coordinator)]
    ) -> dict[str, Any]:
        node = await coord.client.get("/own")
        return {"greeting": request.state.greeting, "data": node.data.decode()}

    with anyio.fail_after(20):
        async with asgi_lifespan(app) as http:
            await ticked.wait()
            answer = await http.get("/hello")
            assert answer.json() == {"greeting": "hello", "data": "startup"}
            status = (await http.get("/coordination/status")).json()
            assert status["latches"][0]["task"]["running"] is True
    assert seen == {"entry": ConnectionState.CONNECTED, "exit": ConnectionState.CONNECTED}


@asynccontextmanager
async def asgi_lifespan(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Run `app`'s lifespan over the ASGI protocol, and pass its state to each request
    as a server does."""
    state: dict[str, Any] = {}
    to_app, app_in = anyio.create_memory_object_stream[dict[str, Any]](4)
    app_out, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)

    async def receive() -> dict[str, Any]:
        return await app_in.receive()

    async def send(message: dict[str, Any]) -> None:
        await app_out.send(message)

    async def with_state(scope: Any, receive: Any, send: Any) -> None:
        await app({**scope, "state": dict(state)}, receive, send)

    async def run_app() -> None:
        await app(scope, receive, send)  # type: ignore[arg-type]

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": state}
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_app)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            yield http
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


def test_bad_arguments_are_refused_when_the_app_is_built() -> None:
    async def job() -> None: ...

    async def two(a: int, b: int) -> None: ...

    with pytest.raises(InvalidPathError):
        lifespan("127.0.0.1:1", leader_tasks={"no-slash": job})
    with pytest.raises(TypeError, match="leader_tasks"):
        lifespan("127.0.0.1:1", leader_tasks={"/x": 42})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="no argument or the LeadershipTerm"):
        lifespan("127.0.0.1:1", leader_tasks={"/x": two})
    with pytest.raises(ConfigError) as info:
        lifespan("127.0.0.1:1", session_timeout=-1)
    assert info.value.field == "session_timeout"
    with pytest.raises(ConfigError) as info:
        lifespan("127.0.0.1:1", participant_id="")
    assert info.value.field == "participant_id"
    with pytest.raises(TypeError, match="latches"):
        lifespan("127.0.0.1:1", latches="/x")
    with pytest.raises(InvalidPathError):
        require_leader("relative/path")


async def _true(value: bool) -> bool:
    return value


def _default_id() -> str:
    import os
    import socket

    return f"{socket.gethostname()}-{os.getpid()}"


def test_metrics_job_decorator_counts_and_times_runs() -> None:
    """`Metrics.job` keeps the handler's signature (the scheduler reads its hints) and
    counts each run by outcome."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)

    @metrics.job("add")
    async def add(a: int, b: int = 0) -> int:
        if a < 0:
            raise ValueError("negative")
        return a + b

    assert anyio.run(add, 1, 2) == 3
    with pytest.raises(ValueError, match="negative"):
        anyio.run(add, -1)
    assert list(inspect.signature(add).parameters) == ["a", "b"]
    done = {"job": "add", "outcome": "done"}
    failed = {"job": "add", "outcome": "failed"}
    assert registry.get_sample_value("aiocoord_jobs_total", done) == 1
    assert registry.get_sample_value("aiocoord_jobs_total", failed) == 1
    count = registry.get_sample_value("aiocoord_job_duration_seconds_count", {"job": "add"})
    assert count == 2
    with pytest.raises(ValueError, match="outcome"):
        metrics.observe_job("add", "maybe", 1.0)
