"""SASL DIGEST-MD5 against a real server that requires it (JAAS file, enforcement on)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import AuthFailedError, ConnectionState, NoAuthError
from aiocoord.testing import FaultProxy, ZooKeeperServer
from aiocoord.zk import ACL, CreateMode
from tests.helpers import recording

pytestmark = pytest.mark.anyio

ALICE_PASSWORD = "alice-Pa55-word"
BOB_PASSWORD = "bob-Pa55-word"
WRONG_PASSWORD = "not-alice-Pa55"


def sasl_server_options(directory: Path) -> dict[str, Any]:
    """`ZooKeeperServer` keywords for a server whose clients must log in with DIGEST-MD5."""
    jaas = directory / "jaas.conf"
    jaas.write_text(
        "Server {\n"
        "    org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'    user_alice="{ALICE_PASSWORD}"\n'
        f'    user_bob="{BOB_PASSWORD}";\n'
        "};\n"
    )
    return {
        "extra_config": {
            "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
            "sessionRequireClientSASLAuth": "true",
        },
        "jvm_args": [f"-Djava.security.auth.login.config={jaas}"],
    }


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(**sasl_server_options(tmp_path_factory.mktemp("sasl"))) as server:
        yield server


def login(user: str, password: str) -> dict[str, Any]:
    return {
        "sasl_mechanism": "DIGEST-MD5",
        "sasl_username": user,
        "sasl_password": password,
        "session_timeout": 4.0,
    }


async def test_digest_md5_login_gives_the_sasl_identity(
    sasl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = sasl_server.connect_string
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, **login("alice", ALICE_PASSWORD)) as alice,
            aiocoord.connect(hosts, namespace=zk_chroot, **login("bob", BOB_PASSWORD)) as bob,
        ):
            assert ("sasl", "alice") in await alice.client.whoami()
            # With a SASL login, nodes are creator-only by default, like with digest auth.
            await alice.client.create("/private", b"alice's")
            acl, _ = await alice.client.get_acl("/private")
            assert acl == [ACL(ACL.ALL, "sasl", "alice")]
            with pytest.raises(NoAuthError):
                await bob.client.get("/private")
            # The sasl scheme in an explicit ACL: bob may read, only alice may change.
            entries = [ACL(ACL.ALL, "sasl", "alice"), ACL(ACL.READ, "sasl", "bob")]
            await alice.client.create("/shared", b"v1", acl=entries)
            assert (await alice.client.get_acl("/shared"))[0] == entries
            assert (await bob.client.get("/shared")).data == b"v1"
            with pytest.raises(NoAuthError):
                await bob.client.set("/shared", b"v2")
            await alice.client.set("/shared", b"v2")


async def test_login_again_on_every_connection(
    sasl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with FaultProxy(*sasl_server.address) as proxy, anyio.fail_after(30):
        async with aiocoord.connect(
            proxy.connect_string, namespace=zk_chroot, **login("alice", ALICE_PASSWORD)
        ) as coord:
            await coord.client.create("/eph", mode=CreateMode.EPHEMERAL)
            async with recording(coord) as rec:
                assert proxy.cut() == 1
                event = await rec.wait_for(ConnectionState.RECONNECTED)
            assert event.session_id == coord.session_id
            assert ("sasl", "alice") in await coord.client.whoami()
            assert await coord.client.exists("/eph") is not None


async def test_latch_and_mutex_run_unchanged_under_sasl(
    sasl_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = sasl_server.connect_string
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, **login("alice", ALICE_PASSWORD)) as one,
            aiocoord.connect(hosts, namespace=zk_chroot, **login("alice", ALICE_PASSWORD)) as two,
        ):
            async with (
                aiocoord.leader_latch(one, "/leader", participant_id="one") as first,
                aiocoord.leader_latch(two, "/leader", participant_id="two") as second,
            ):
                assert await first.wait(timeout=10)
                assert not second.has_leadership
                assert [p.id for p in await second.participants()] == ["one", "two"]
            order: list[str] = []

            async def hold(coord: aiocoord.Coordinator, name: str) -> None:
                async with aiocoord.mutex(coord, "/lock", participant_id=name):
                    order.append(f"{name} in")
                    await anyio.sleep(0.2)
                    order.append(f"{name} out")

            async with anyio.create_task_group() as tg:
                tg.start_soon(hold, one, "one")
                await anyio.sleep(0.05)
                tg.start_soon(hold, two, "two")
            assert order == ["one in", "one out", "two in", "two out"]


@pytest.mark.parametrize(
    ("user", "password"),
    [("alice", WRONG_PASSWORD), ("mallory", WRONG_PASSWORD)],
    ids=["wrong-password", "unknown-user"],
)
async def test_a_refused_login_fails_at_once_and_shows_no_password(
    sasl_server: ZooKeeperServer, user: str, password: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    with anyio.fail_after(20), pytest.raises(AuthFailedError) as info:
        async with aiocoord.connect(sasl_server.connect_string, **login(user, password)) as coord:
            await coord.client.exists("/")
    # The first refusal ends it: no retrying until the connect timeout (15 s).
    assert time.monotonic() - started < 5.0
    message = str(info.value)
    assert "DIGEST-MD5" in message
    assert sasl_server.connect_string in message
    assert repr(user) in message
    assert WRONG_PASSWORD not in message
    assert WRONG_PASSWORD not in repr(info.value)
    assert WRONG_PASSWORD not in caplog.text
    assert "authentication failed" in caplog.text


async def test_no_login_on_a_server_that_requires_one_fails_at_connect(
    sasl_server: ZooKeeperServer,
) -> None:
    started = time.monotonic()
    with (
        anyio.fail_after(20),
        pytest.raises(AuthFailedError, match="requires a SASL login") as info,
    ):
        async with aiocoord.connect(sasl_server.connect_string, session_timeout=4.0):
            pass
    assert time.monotonic() - started < 5.0
    assert sasl_server.connect_string in str(info.value)


async def test_sasl_settings_from_the_environment(
    sasl_server: ZooKeeperServer, zk_chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOCOORD_HOSTS", sasl_server.connect_string + zk_chroot)
    monkeypatch.setenv("AIOCOORD_SASL_MECHANISM", "digest-md5")
    monkeypatch.setenv("AIOCOORD_SASL_USERNAME", "bob")
    monkeypatch.setenv("AIOCOORD_SASL_PASSWORD", BOB_PASSWORD)
    settings = aiocoord.Settings()
    assert settings.sasl_mechanism == "DIGEST-MD5"
    assert settings.sasl_service == "zookeeper"
    assert BOB_PASSWORD not in repr(settings)
    assert BOB_PASSWORD not in str(settings.model_dump())
    with anyio.fail_after(20):
        async with aiocoord.connect(settings) as coord:
            assert ("sasl", "bob") in await coord.client.whoami()
            assert BOB_PASSWORD not in repr(coord)


async def test_sasl_against_a_server_without_sasl_fails_clearly(zk_server: ZooKeeperServer) -> None:
    with anyio.fail_after(20), pytest.raises(AuthFailedError, match="no challenge") as info:
        async with aiocoord.connect(zk_server.connect_string, **login("alice", ALICE_PASSWORD)):
            pass
    assert "SASL DIGEST-MD5 login as 'alice'" in str(info.value)
    assert ALICE_PASSWORD not in str(info.value)
