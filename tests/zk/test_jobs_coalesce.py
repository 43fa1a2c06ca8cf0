"""The worker's shared transactions (`aiocoord.scheduler._coalesce`), on a real server."""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord.scheduler._coalesce import Coalescer
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk.types import CreateOp, SetDataOp

pytestmark = pytest.mark.anyio


async def test_callers_of_one_step_share_one_transaction(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            client = coord.client
            await client.ensure_path("/c", mode=aiocoord.zk.CreateMode.PERSISTENT)
            batch = Coalescer(client)
            told: dict[int, bool] = {}

            async def create(n: int) -> None:
                told[n] = await batch.apply([CreateOp(f"/c/{n}", b"x")], 1)

            async with anyio.create_task_group() as tg:
                for n in range(5):
                    tg.start_soon(create, n)
            assert told == dict.fromkeys(range(5), True)
            assert batch.shared == 1
            assert sorted(await client.children("/c")) == [str(n) for n in range(5)]

            # One refused operation refuses them all: each caller is told to go alone.
            async def touch(n: int) -> None:
                told[n] = await batch.apply([SetDataOp(f"/c/{n}", b"y")], 1)

            async with anyio.create_task_group() as tg:
                for n in (0, 1, 9):  # /c/9 does not exist
                    tg.start_soon(touch, n)
            assert told[0] is told[1] is told[9] is False
            assert batch.shared == 1
            assert (await client.get("/c/0")).data == b"x"  # nothing was applied

            # A lone caller is told to go alone at once: it costs no shared transaction.
            assert await batch.apply([SetDataOp("/c/0", b"z")], 1) is False
            assert (await client.get("/c/0")).data == b"x"
