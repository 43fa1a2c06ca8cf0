"""`lifespan(..., register=..., recipes=[...])`: the app is discoverable while it serves, and
``/coordination/status`` lists every recipe the app runs (its ``status_view()``)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

import aiocoord
from aiocoord import ConfigError, ServiceInstance
from aiocoord.integrations.fastapi import Coordination, lifespan, router
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def test_registered_while_serving_and_unregistered_on_shutdown(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    me = ServiceInstance(name="api", id="pod-a", address="10.0.0.5", port=8080)
    ls = lifespan(zk_server.connect_string, namespace=zk_chroot, register=me, discovery_base="/sd")
    app = FastAPI(lifespan=ls)
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as watcher:
            async with ls(app):
                stat = await watcher.client.exists("/sd/api/pod-a")
                assert stat is not None and stat.ephemeral_owner != 0
                async with aiocoord.service_discovery(watcher, "/sd") as sd:
                    assert await sd.instance("api", "pod-a") == me
            assert await watcher.client.exists("/sd/api/pod-a") is None


def test_bad_register_arguments_fail_when_the_app_is_built() -> None:
    with pytest.raises(TypeError, match="register"):
        lifespan("127.0.0.1:1", register={"name": "api"})  # type: ignore[arg-type]
    with pytest.raises(aiocoord.InvalidPathError, match="discovery_base"):
        lifespan("127.0.0.1:1", discovery_base="services")


def _settled(recipes: list[dict[str, Any]]) -> bool:
    """Every cache read, every node seen there (a node's own cache may lag its create), the
    registration seen by the discovery's cache, the worker elected assigner."""
    states = {"FRESH", "PRESENT", "REGISTERED"}
    seen = all(r.get("registered") is not False and r.get("services", 1) for r in recipes)
    registrations = [
        e["present"] for r in recipes if r["kind"] == "service_discovery" for e in r["registered"]
    ]
    assigner = all(r.get("assigner", True) for r in recipes)
    return all(r["state"] in states for r in recipes) and seen and all(registrations) and assigner


async def test_status_lists_every_recipe_the_app_runs_and_the_worker_follows_its_id(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Caches, a group membership, persistent and TTL nodes, the discovery registration and
    the job worker each describe themselves; ids, addresses and sessions only with detail;
    the worker's node (the job's ``worker``) is named after its ``participant_id``."""
    coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot, session_timeout=4)
    sched = aiocoord.Scheduler(coord, "/jobs")
    started, release = anyio.Event(), anyio.Event()

    @sched.job("slow", concurrency=2)
    async def slow() -> str:
        started.set()
        await release.wait()
        return "done"

    @sched.job("quick")
    async def quick() -> None: ...

    me = ServiceInstance(name="api", id="pod-a", address="10.0.0.5", port=8080)
    ls = lifespan(
        coord,
        participant_id="pod-a",
        register=me,
        discovery_base="/sd",
        recipes=[
            aiocoord.tree_cache(coord, "/config"),
            aiocoord.node_cache(coord, "/config/flags"),
            aiocoord.group_member(coord, "/groups/api", member_id="pod-a"),
            aiocoord.persistent_node(coord, "/registry/pod-a", data=b"up"),
            aiocoord.persistent_ttl_node(coord, "/batch/pod-a", ttl=60_000),
            sched.worker(capacity=3, participant_id="pod-a"),
        ],
        status_detail=True,
    )
    app = FastAPI(lifespan=ls)
    app.include_router(router)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as setup:
            await setup.client.create("/config", b"")
            await setup.client.create("/config/flags", b"on")
        async with ls(app), http:
            c = app.state.aiocoord
            assert isinstance(c, Coordination)
            job_id = await sched.submit("slow")
            await started.wait()

            async def settled() -> bool:
                return _settled((await http.get("/coordination/status")).json()["recipes"])

            await eventually(settled)
            status = (await http.get("/coordination/status")).json()
            worker = (await sched.info(job_id)).worker
            sid = f"{coord.client.session.session_id:x}"
            assert worker == f"pod-a-{sid}"  # <participant_id>-<session id>
            assert status["recipes"] == [
                {"kind": "tree_cache", "path": "/config", "state": "FRESH", "nodes": 2},
                {
                    "kind": "node_cache",
                    "path": "/config/flags",
                    "state": "FRESH",
                    "exists": True,
                    "version": 0,
                },
                {
                    "kind": "group_member",
                    "path": "/groups/api",
                    "state": "FRESH",
                    "layout": "curator",
                    "members": 1,
                    "registered": True,
                    "member_id": "pod-a",
                },
                {
                    "kind": "persistent_node",
                    "path": "/registry/pod-a",
                    "state": "PRESENT",
                    "mode": "EPHEMERAL",
                    "actual_path": "/registry/pod-a",
                    "session": f"0x{sid}",
                },
                {
                    "kind": "persistent_ttl_node",
                    "path": "/batch/pod-a",
                    "state": "PRESENT",
                    "ttl_ms": 60_000,
                },
                {
                    "kind": "job_worker",
                    "path": "/jobs",
                    "state": "REGISTERED",
                    "capacity": 3,
                    "running": 1,
                    "assigner": True,
                    "jobs": ["quick", "slow"],
                    "concurrency": {"slow": 2},
                    "participant_id": "pod-a",
                    "worker": worker,
                },
                {
                    "kind": "service_discovery",
                    "path": "/sd",
                    "state": "FRESH",
                    "registered": [{"name": "api", "present": True}],
                    "services": 1,
                    "instances": [
                        {"name": "api", "id": "pod-a", "address": "10.0.0.5", "port": 8080}
                    ],
                },
            ]
            redacted = (await c.status(detail=False))["recipes"]
            private = {"member_id", "session", "participant_id", "worker", "instances"}
            for shown, full in zip(redacted, status["recipes"], strict=True):
                assert shown == {k: v for k, v in full.items() if k not in private}
            release.set()
            assert await sched.result(job_id) == "done"
            # Left with the app: a recipe left is no longer listed.
            async with c.run(aiocoord.node_cache(coord, "/config")):
                assert len((await c.status())["recipes"]) == 8
            assert len((await c.status())["recipes"]) == 7
        assert c.recipes == []


def test_bad_recipes_fail_when_the_app_is_built() -> None:
    coord = aiocoord.connect("127.0.0.1:1")
    cache = aiocoord.tree_cache(coord, "/config")
    with pytest.raises(TypeError, match=r"recipes\[1\] must be a recipe"):
        lifespan(coord, recipes=[cache, object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="recipes must be an iterable"):
        lifespan(coord, recipes=cache)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="given twice"):
        lifespan(coord, recipes=[cache, cache])
    with pytest.raises(ConfigError, match="recipes"):  # the lifespan would make its own
        lifespan("127.0.0.1:1", recipes=[cache])


async def test_a_draining_worker_stays_listed_until_it_has_left(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """`Coordination.run` lists a recipe until its exit returns: a draining worker shows DRAINING."""
    coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot, session_timeout=4)
    sched = aiocoord.Scheduler(coord, "/jobs")
    started, release = anyio.Event(), anyio.Event()

    @sched.job("slow")
    async def slow() -> str:
        started.set()
        await release.wait()
        return "done"

    ls = lifespan(coord, participant_id="pod-a")
    app = FastAPI(lifespan=ls)
    app.include_router(router)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app")
    with anyio.fail_after(30):
        async with ls(app), http:
            c = app.state.aiocoord
            states: list[str] = []

            async def run_worker() -> None:
                async with c.run(sched.worker(capacity=1, participant_id="pod-a")):
                    await sched.submit("slow")
                    await started.wait()
                # Left: no longer listed.
                recipes = (await http.get("/coordination/status")).json()["recipes"]
                states.append("gone" if not recipes else recipes[0]["state"])

            async with anyio.create_task_group() as tg:
                tg.start_soon(run_worker)
                await started.wait()

                async def draining() -> bool:
                    recipes = (await http.get("/coordination/status")).json()["recipes"]
                    return bool(recipes) and recipes[0]["state"] == "DRAINING"

                await eventually(draining)  # the worker's exit waits for the running job
                release.set()
            assert states == ["gone"]
