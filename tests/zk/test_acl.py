"""Runtime auth, ACL administration and the ACL provider, against a real server."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Sequence

import anyio
import anyio.lowlevel
import pytest

import aiocoord
from aiocoord import AuthFailedError, BadVersionError, ConnectionState, NoAuthError, NoNodeError
from aiocoord.testing import FaultProxy, ZooKeeperServer
from aiocoord.zk import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, CreateMode, CreateOp
from tests.helpers import recording

pytestmark = pytest.mark.anyio


def digest_id(user: str, password: str) -> str:
    """ZooKeeper's digest identity: ``user:base64(sha1(user:password))``."""
    hashed = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(hashed).decode()}"


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    with FaultProxy(*zk_server.address) as p:
        yield p


async def test_add_auth_at_runtime_is_replayed_on_reconnect(
    proxy: FaultProxy, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot) as coord,
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as stranger,
        ):
            client = coord.client
            assert ("digest", "alice") not in await client.whoami()
            await client.add_auth("digest", "alice:wonderland")
            await client.add_auth("digest", b"alice:wonderland")  # twice is harmless
            assert ("digest", "alice") in await client.whoami()
            await client.create("/mine", b"x", acl=CREATOR_ALL_ACL)
            acl, _ = await client.get_acl("/mine")
            assert acl == [ACL(ACL.ALL, "digest", digest_id("alice", "wonderland"))]
            with pytest.raises(NoAuthError):
                await stranger.client.get("/mine")
            async with recording(coord) as rec:
                assert proxy.cut() == 1
                await rec.wait_for(ConnectionState.RECONNECTED)
            # The new connection logged in again: the node is still ours.
            assert ("digest", "alice") in await client.whoami()
            assert (await client.get("/mine")).data == b"x"


async def test_add_auth_with_requests_in_flight_keeps_the_connection(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """ZooKeeper answers auth at once, ahead of reads still in its pipeline.

    The reply overtook them and was taken for a reply out of order: the
    connection dropped (SUSPENDED) and the auth was tried again.
    """
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            client = coord.client
            await client.create("/n", b"x" * 4096)
            async with recording(coord) as rec, anyio.create_task_group() as tg:
                for _ in range(3):
                    for _ in range(50):
                        tg.start_soon(client.get, "/n")
                    tg.start_soon(client.add_auth, "digest", "alice:wonderland")
                    await anyio.lowlevel.checkpoint()
            assert rec.states == [ConnectionState.CONNECTED]
            assert ("digest", "alice") in await client.whoami()


async def test_refused_runtime_auth_is_auth_failed(coordinator: aiocoord.Coordinator) -> None:
    with anyio.fail_after(20):
        with pytest.raises(AuthFailedError, match="'nonesuch'") as info:
            await coordinator.client.add_auth("nonesuch", "alice:secret-word")
        assert "secret-word" not in str(info.value)
        # The server dropped the connection; the session carries on without them.
        await coordinator.wait_connected()
        assert await coordinator.client.exists("/") is not None


async def test_add_auth_checks_its_arguments(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with pytest.raises(ValueError, match="scheme"):
        await client.add_auth("", "a:b")
    with pytest.raises(TypeError, match="credentials"):
        await client.add_auth("digest", 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="user:password"):
        await client.add_auth("digest", "no-colon")


async def test_get_and_set_acl(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        await client.create("/node", b"v")
        acl, stat = await client.get_acl("/node")
        assert acl == list(OPEN_ACL_UNSAFE)
        assert stat.aversion == 0
        restricted = [ACL(ACL.READ, "world", "anyone"), ACL(ACL.ALL, "ip", "127.0.0.1")]
        new = await client.set_acl("/node", restricted, version=0)
        assert new.aversion == 1
        assert (await client.get_acl("/node")) == (restricted, new)
        with pytest.raises(BadVersionError):
            await client.set_acl("/node", OPEN_ACL_UNSAFE, version=0)  # stale
        await client.set_acl("/node", OPEN_ACL_UNSAFE)  # -1: any version
        with pytest.raises(NoNodeError):
            await client.get_acl("/missing")
        with pytest.raises(NoNodeError):
            await client.set_acl("/missing", OPEN_ACL_UNSAFE)
        with pytest.raises(TypeError, match="acl"):
            await client.set_acl("/node", [])
        with pytest.raises(ValueError, match="version"):
            await client.set_acl("/node", OPEN_ACL_UNSAFE, version=-2)


async def test_set_acl_needs_admin_and_repairs_a_private_node(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A node created creator-only can be opened up (repaired) by its owner, not by others."""
    hosts = zk_server.connect_string
    with anyio.fail_after(20):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, auth="alice:wonderland") as alice,
            aiocoord.connect(hosts, namespace=zk_chroot) as anonymous,
        ):
            await alice.client.create("/private", b"alice's")
            acl, _ = await alice.client.get_acl("/private")
            assert acl == [ACL(ACL.ALL, "digest", digest_id("alice", "wonderland"))]
            with pytest.raises(NoAuthError):  # reading an ACL needs READ or ADMIN
                await anonymous.client.get_acl("/private")
            with pytest.raises(NoAuthError):
                await anonymous.client.set_acl("/private", OPEN_ACL_UNSAFE)
            await alice.client.set_acl("/private", OPEN_ACL_UNSAFE)
            assert (await anonymous.client.get("/private")).data == b"alice's"


async def test_acl_provider_chooses_the_acl_of_every_created_node(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    seen: list[str] = []
    readable = (ACL(ACL.READ, "world", "anyone"), ACL(ACL.ALL, "auth", ""))

    def provider(path: str) -> Sequence[ACL] | None:
        seen.append(path)
        return readable if "/public" in path else None

    hosts = zk_server.connect_string
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(
                hosts, namespace=zk_chroot, auth="alice:wonderland", acl_provider=provider
            ) as alice,
            aiocoord.connect(hosts, namespace=zk_chroot) as anonymous,
        ):
            client = alice.client
            owner = ACL(ACL.ALL, "digest", digest_id("alice", "wonderland"))
            await client.create("/public", b"p")
            await client.create("/private", b"q")
            await client.create("/public/explicit", acl=OPEN_ACL_UNSAFE)  # its own ACL wins
            await client.multi([CreateOp("/public/multi"), CreateOp("/private/multi")])
            await client.create("/public/a/b/c", make_parents=True)
            async with aiocoord.mutex(alice, "/public/lock") as held:
                assert held.token is not None
                children = await anonymous.client.children("/public/lock")
                assert len(children) == 1  # a recipe's nodes get the provider's ACL too
            assert (await client.get_acl("/public"))[0] == [readable[0], owner]
            assert (await client.get_acl("/private"))[0] == [owner]
            assert (await client.get_acl("/public/explicit"))[0] == list(OPEN_ACL_UNSAFE)
            assert (await client.get_acl("/public/multi"))[0] == [readable[0], owner]
            assert (await client.get_acl("/private/multi"))[0] == [owner]
            assert (await client.get_acl("/public/a/b"))[0] == [readable[0], owner]
            assert (await anonymous.client.get("/public")).data == b"p"
            with pytest.raises(NoAuthError):
                await anonymous.client.get("/private")
            # Curator's ACLProvider sees the full path: the namespace nodes too.
            assert zk_chroot in seen
            assert f"{zk_chroot}/public/multi" in seen


async def test_acl_provider_is_checked(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with pytest.raises(TypeError, match="acl_provider"):
        aiocoord.connect(zk_server.connect_string, acl_provider="world:anyone")  # type: ignore[arg-type]

    def bad(path: str) -> Sequence[ACL] | None:
        return [] if path.endswith("/bad") else None

    with anyio.fail_after(20):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, acl_provider=bad
        ) as coord:
            with pytest.raises(TypeError, match=r"acl_provider returned \[\] for '.*/bad'"):
                await coord.client.create("/bad")
            await coord.client.create("/good", mode=CreateMode.EPHEMERAL)
