"""`lifespan(..., register=ServiceInstance(...))`: the app is discoverable while it serves."""

from __future__ import annotations

import anyio
import pytest
from fastapi import FastAPI

import aiocoord
from aiocoord import ServiceInstance
from aiocoord.integrations.fastapi import lifespan
from aiocoord.testing import ZooKeeperServer

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
