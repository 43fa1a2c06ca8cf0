"""Membership and value recipes when their coordinator closes under them: leaving still works."""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.anyio


async def test_leaving_after_the_coordinator_closed(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
        await coord.start()
        node = aiocoord.persistent_node(coord, "/c/node")
        group = aiocoord.group_member(coord, "/c/group", member_id="m")
        sd = aiocoord.service_discovery(coord, "/c/sd")
        count = aiocoord.shared_count(coord, "/c/count")
        for thing in (node, group, sd, count):
            await thing.start()
        await sd.register(aiocoord.ServiceInstance(name="api", id="a"))
        await coord.aclose()
        for thing in (node, group, sd, count):
            await thing.aclose()  # neither hangs nor raises
        with pytest.raises(aiocoord.CoordinatorClosedError):
            await node.set_data(b"x")
