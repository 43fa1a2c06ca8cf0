"""Mixed fleets, for real: kazoo's ``Counter`` and ``shared_count(..., layout="kazoo")``.

kazoo 2.x writers (threads, each with its own ``KazooClient``, ``counter +=
1``) and aiocoord writers (each with its own session, ``add(1)``) increment
one count at once: no increment is lost, and both read the same value.  kazoo's
``Counter(support_curator=True)`` shares the DEFAULT layout (Curator's 4-byte
int) the same way.  Then the aiocoord side's session expires between its
increments while kazoo goes on incrementing: still none lost.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import ConfigError, NodeDataError, shared_count
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import coordinator, kazoo_client

pytestmark = pytest.mark.anyio

M = 40  # increments per writer


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


def kazoo_writer(hosts: str, path: str, n: int, support_curator: bool) -> None:
    with kazoo_client(hosts) as zk:
        counter = zk.Counter(path, support_curator=support_curator)
        for _ in range(n):
            counter += 1


async def aiocoord_writer(hosts: str, path: str, n: int, layout: str) -> None:
    async with coordinator(hosts) as coord, shared_count(coord, path, layout=layout) as count:
        for _ in range(n):
            await count.add(1)


@pytest.mark.parametrize(
    ("layout", "support_curator", "stored"),
    [("kazoo", False, b"240"), ("curator", True, (240).to_bytes(4, "big"))],
    ids=["kazoo-text", "support_curator-int32"],
)
async def test_concurrent_increments_none_lost(
    zk_server: ZooKeeperServer, zk_chroot: str, layout: str, support_curator: bool, stored: bytes
) -> None:
    path = f"{zk_chroot}/count"
    hosts = zk_server.connect_string
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(
                    anyio.to_thread.run_sync, kazoo_writer, hosts, path, M, support_curator
                )
                tg.start_soon(aiocoord_writer, hosts, path, M, layout)
        with kazoo_client(hosts) as zk:
            kazoo_value = zk.Counter(path, support_curator=support_curator).value
            assert zk.get(path)[0] == stored
        async with coordinator(hosts) as coord, shared_count(coord, path, layout=layout) as count:
            assert count.value == kazoo_value == 6 * M


async def test_the_value_as_kazoo_writes_and_reads_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/text"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        counter = zk.Counter(path)
        assert counter.value == 0  # kazoo made the node, without data
        async with coordinator(hosts) as coord:
            async with shared_count(coord, path, initial=7, layout="kazoo") as count:
                assert count.value == 7  # no data reads as the default, as in kazoo
                assert await count.add(2**40) == 7 + 2**40  # no 32-bit bound in kazoo's text
                assert zk.get(path)[0] == repr(7 + 2**40).encode("ascii")
                assert counter.value == 7 + 2**40
                counter -= 2**40
                assert await count.add(0) == 7
            async with shared_count(coord, f"{zk_chroot}/new", initial=3, layout="kazoo"):
                assert zk.Counter(f"{zk_chroot}/new").value == 3  # created as repr(3)
                assert zk.get(f"{zk_chroot}/new")[0] == b"3"
            zk.Counter(f"{zk_chroot}/float", default=0.5).__add__(1.0)
            async with shared_count(coord, f"{zk_chroot}/float", layout="kazoo") as floating:
                with pytest.raises(NodeDataError):
                    _ = floating.value
            with pytest.raises(ConfigError, match=r"^layout: "):
                shared_count(coord, path, layout="java")


async def test_an_empty_node_made_by_kazoo_support_curator_reads_as_initial(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/empty"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        counter = zk.Counter(path, support_curator=True)
        assert counter.value == 0  # kazoo made the node, without data
        async with coordinator(hosts) as coord, shared_count(coord, path) as count:
            assert count.value == 0
            assert await count.add(1) == 1
            assert counter.value == 1 and zk.get(path)[0] == b"\x00\x00\x00\x01"


async def test_an_expired_session_between_increments_loses_none(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    with anyio.fail_after(90):
        async with coordinator(hosts) as coord, shared_count(coord, path, layout="kazoo") as count:
            async with anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, kazoo_writer, hosts, path, 3 * M, False)
                for _ in range(M):
                    await count.add(1)
                first = coord.session_id
                assert await expire_session(coord)  # no add of ours in flight

                async def new_session() -> bool:
                    return coord.session_id not in (None, first)

                await eventually(new_session, timeout=20)
                for _ in range(M):
                    await count.add(1)
        with kazoo_client(hosts) as zk:
            assert zk.Counter(path).value == 5 * M
