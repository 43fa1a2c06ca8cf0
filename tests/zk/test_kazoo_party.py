"""Mixed fleets, for real: kazoo's ``Party`` and ``group_member(..., layout="kazoo")``.

kazoo 2.x members (each with its own ``KazooClient``) and aiocoord members
(each with its own session) join one party and list each other; a member of
one kind leaving is seen by the other.  Then an aiocoord member's session
expires: kazoo lists it again, once, under the same node name on the new session.
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import ConfigError, group_member
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import coordinator, kazoo_client

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


def kazoo_sees(party: Any) -> list[str]:
    return sorted(party)


async def test_kazoo_and_aiocoord_members_list_each_other(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/party"
    hosts = zk_server.connect_string
    everyone = ["aiocoord-0", "aiocoord-1", "kazoo-0", "kazoo-1"]
    with anyio.fail_after(60), ExitStack() as stack:
        parties = [
            stack.enter_context(kazoo_client(hosts)).Party(path, f"kazoo-{i}") for i in (0, 1)
        ]
        for party in parties:
            await anyio.to_thread.run_sync(party.join)
        async with (
            coordinator(hosts) as c0,
            coordinator(hosts) as c1,
            group_member(c0, path, member_id="aiocoord-0", layout="kazoo") as g0,
            group_member(c1, path, member_id="aiocoord-1", layout="kazoo") as g1,
        ):
            for g in (g0, g1):

                async def all_in(g: Any = g) -> bool:
                    return sorted(g.members()) == everyone

                await eventually(all_in)
                assert set(g.members().values()) == {b""}  # no data of their own
            assert await anyio.to_thread.run_sync(kazoo_sees, parties[0]) == everyone
            assert await anyio.to_thread.run_sync(len, parties[1]) == 4
            names = await c0.client.children(path)
            assert all(re.fullmatch(r"[0-9a-f]{32}__party__", n) for n in names)

            await anyio.to_thread.run_sync(parties[1].leave)

            async def kazoo_left() -> bool:
                return "kazoo-1" not in g0.members()

            await eventually(kazoo_left)
        assert await anyio.to_thread.run_sync(kazoo_sees, parties[0]) == ["kazoo-0"]


async def test_an_expired_member_comes_back_once_for_kazoo(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    with anyio.fail_after(60), kazoo_client(hosts) as zk:
        party = zk.Party(path, "kazoo-a")
        await anyio.to_thread.run_sync(party.join)
        async with (
            coordinator(hosts) as coord,
            group_member(coord, path, member_id="aiocoord-b", layout="kazoo") as member,
        ):
            assert await anyio.to_thread.run_sync(kazoo_sees, party) == ["aiocoord-b", "kazoo-a"]
            (before,) = [n for n in await coord.client.children(path) if n != party.node]
            first = coord.session_id
            assert await expire_session(coord)

            async def back_once() -> bool:
                if coord.session_id in (None, first):
                    return False
                return await anyio.to_thread.run_sync(kazoo_sees, party) == [
                    "aiocoord-b",
                    "kazoo-a",
                ]

            await eventually(back_once, timeout=20)
            (after,) = [n for n in await coord.client.children(path) if n != party.node]
            stat = await coord.client.exists(f"{path}/{after}")
            assert after == before and stat is not None
            assert stat.ephemeral_owner == coord.session_id  # the same name, on the new session
            assert sorted(member.members()) == ["aiocoord-b", "kazoo-a"]
        assert await anyio.to_thread.run_sync(kazoo_sees, party) == ["kazoo-a"]
        await anyio.to_thread.run_sync(party.leave)


async def test_a_kazoo_member_has_no_data(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    async with coordinator(zk_server.connect_string) as coord:
        with pytest.raises(ConfigError, match=r"^data: "):
            group_member(coord, f"{zk_chroot}/g", member_id="m", data=b"x", layout="kazoo")
        with pytest.raises(ConfigError, match=r"^layout: "):
            group_member(coord, f"{zk_chroot}/g", member_id="m", layout="Party")
        async with group_member(coord, f"{zk_chroot}/g", member_id="a/b", layout="kazoo") as m:
            assert m.members() == {"a/b": b""}  # an identifier is data: any text
            with pytest.raises(ConfigError, match=r"^data: "):
                await m.set_data(b"x")
