"""`lifespan(..., cron=cron)` over a real ZooKeeper: the cron fires with the app, shows in
status (redacted by default), is measured, and stops with the app."""

from __future__ import annotations

from datetime import timedelta

import anyio
import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

import aiocoord
from aiocoord import ConfigError, Cron, Firing, Worker
from aiocoord.integrations.fastapi import Coordination, lifespan, router
from aiocoord.metrics import Metrics
from aiocoord.testing import ZooKeeperServer

ROOT = "/app/cron"


def _cron(hosts: str, chroot: str, fired: anyio.Event) -> Cron:
    coord = aiocoord.connect(hosts, namespace=chroot, session_timeout=4.0)
    cron = Cron(coord, ROOT, worker=Worker("1.0", id="w-app"))

    @cron.job(every=timedelta(seconds=0.25))
    async def tick(firing: Firing) -> None:
        fired.set()

    @cron.job(every=timedelta(seconds=0.25))
    async def boom(firing: Firing) -> None:
        raise ValueError("secret text")

    return cron


@pytest.mark.anyio
async def test_the_lifespan_runs_the_cron_shows_it_and_stops_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = zk_server.connect_string
    fired = anyio.Event()
    cron = _cron(hosts, zk_chroot, fired)
    outcomes = cron.outcomes()
    registry = CollectorRegistry()
    app = FastAPI(lifespan=lifespan(cron=cron, metrics=Metrics(registry), participant_id="pod-a"))
    app.include_router(router)
    transport = httpx.ASGITransport(app=app)
    with anyio.fail_after(20):
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://app") as http,
        ):
            coordination = app.state.aiocoord
            assert isinstance(coordination, Coordination) and coordination.coord is cron.coord
            assert cron.coord.session_id is not None  # connected by the lifespan
            await fired.wait()
            seen: set[str] = set()
            async for outcome in outcomes:  # until each job has recorded one outcome
                seen.add(outcome.status)
                if {"ok", "failed"} <= seen:
                    break
            status = (await http.get("/coordination/status")).json()
            detailed = await coordination.status(detail=True)
            await anyio.wait_all_tasks_blocked()  # the metrics watcher has counted it
            ok = registry.get_sample_value(
                "aiocoord_cron_firings_total", {"path": ROOT, "job": "tick", "outcome": "ok"}
            )
            failed = registry.get_sample_value(
                "aiocoord_cron_firings_total", {"path": ROOT, "job": "boom", "outcome": "failed"}
            )
    entry = status["cron"]
    assert entry["root"] == ROOT and entry["leading"] == ["boom", "tick"]
    assert "worker" not in entry  # redacted by default
    jobs = {job["name"]: job for job in entry["jobs"]}
    assert jobs["tick"]["leading"] is True
    assert jobs["tick"]["schedule"] == "every 0:00:00.250000" and jobs["tick"]["next"]
    assert jobs["tick"]["last"]["status"] == "ok" and "worker" not in jobs["tick"]["last"]
    assert jobs["boom"]["last"]["status"] == "failed"
    assert jobs["boom"]["last"]["error"] == "ValueError"  # the kind, not the text
    shown = {job["name"]: job for job in detailed["cron"]["jobs"]}
    assert detailed["cron"]["worker"] == "w-app" and detailed["cron"]["version"] == "1.0"
    assert shown["boom"]["last"]["error"] == "ValueError: secret text"
    assert shown["boom"]["last"]["worker"] == "w-app"
    assert ok is not None and ok >= 1 and failed is not None and failed >= 1
    # Stopped with the app: the stream ended, the session closed, the worker gone.
    with anyio.fail_after(5):
        async for _ in outcomes:
            pass
    assert cron.coord.closed and cron.leading == frozenset()
    async with aiocoord.connect(hosts, namespace=zk_chroot) as coord:
        assert await coord.client.children(f"{ROOT}/workers") == []
        assert len(await Cron(coord, ROOT, worker=Worker("1.0")).history("tick")) >= 1


@pytest.mark.anyio
async def test_a_cron_on_a_coordinator_already_open_is_used_as_it_is(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    fired = anyio.Event()
    cron = _cron(zk_server.connect_string, zk_chroot, fired)
    app = FastAPI(lifespan=lifespan(cron=cron, retire_on_signal=False))
    with anyio.fail_after(20):
        async with cron.coord:
            async with app.router.lifespan_context(app):
                await fired.wait()
            assert not cron.coord.closed  # its owner closes it
            assert await cron.coord.client.children(f"{ROOT}/workers") == []


def test_cron_is_checked_when_the_app_is_built() -> None:
    cron = Cron(aiocoord.connect("127.0.0.1:1"), ROOT, worker=Worker("1.0"))
    with pytest.raises(ConfigError) as info:
        lifespan("127.0.0.1:1", cron=cron)
    assert info.value.field == "cron"
    with pytest.raises(ConfigError):
        lifespan(cron=cron, session_timeout=5.0)
    with pytest.raises(TypeError, match="cron must be an aiocoord"):
        lifespan(cron=42)  # type: ignore[arg-type]
