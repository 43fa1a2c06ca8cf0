"""TLS to ZooKeeper's secure client port, and ACLs from digest credentials (real servers)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, ConnectionLostError, NoAuthError
from aiocoord.server import free_ports
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode

pytestmark = pytest.mark.anyio


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}-key.pem", directory / f"{name}-cert.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", f"/CN={name}", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return key, cert


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ZooKeeperServer, int, Path, Path]]:
    """A server with a TLS-only secure port; yields (server, secure port, CA file, another CA)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    directory = tmp_path_factory.mktemp("tls")
    key, cert = _self_signed(directory, "server")
    _, stranger = _self_signed(directory, "stranger")
    bundle = directory / "server.pem"
    bundle.write_bytes(key.read_bytes() + cert.read_bytes())
    (secure_port,) = free_ports(1)
    server = ZooKeeperServer(
        extra_config={
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "secureClientPort": str(secure_port),
            "secureClientPortAddress": "127.0.0.1",
            "ssl.keyStore.location": str(bundle),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(cert),
            "ssl.trustStore.type": "PEM",
            "ssl.clientAuth": "none",
        }
    )
    with server:
        yield server, secure_port, cert, stranger


async def test_tls_session(
    tls_server: tuple[ZooKeeperServer, int, Path, Path], zk_chroot: str
) -> None:
    _, port, ca, _ = tls_server
    with anyio.fail_after(20):
        async with aiocoord.connect(
            f"127.0.0.1:{port}", namespace=zk_chroot, tls_ca_file=str(ca)
        ) as coord:
            assert coord.state is aiocoord.ConnectionState.CONNECTED
            await coord.client.create("/secret", b"over tls", mode=CreateMode.EPHEMERAL)
            assert (await coord.client.get("/secret")).data == b"over tls"


async def test_tls_wrong_ca_is_refused_clearly(
    tls_server: tuple[ZooKeeperServer, int, Path, Path],
) -> None:
    _, port, _, stranger = tls_server
    with (
        anyio.fail_after(20),
        pytest.raises(
            ConnectionLostError, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"
        ),
    ):
        async with aiocoord.connect(
            f"127.0.0.1:{port}", tls_ca_file=str(stranger), connect_timeout=2
        ):
            pass


async def test_plain_client_on_the_tls_port_fails_cleanly(
    tls_server: tuple[ZooKeeperServer, int, Path, Path],
) -> None:
    _, port, _, _ = tls_server
    with anyio.fail_after(20), pytest.raises(ConnectionLostError, match=r"within 2\.0s"):
        async with aiocoord.connect(f"127.0.0.1:{port}", connect_timeout=2, session_timeout=2):
            pass


def test_tls_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        aiocoord.Settings.build("h:1", tls_ca_file=str(tmp_path / "missing.pem"))
    assert info.value.field == "tls_ca_file"
    (tmp_path / "c.pem").write_text("x")
    with pytest.raises(ConfigError, match="go together"):
        aiocoord.Settings.build("h:1", tls_cert_file=str(tmp_path / "c.pem"))


@pytest.mark.parametrize("world_readable", [False, True], ids=["private", "world-readable"])
async def test_nodes_of_an_authenticated_session_resist_other_identities(
    zk_server: ZooKeeperServer, zk_chroot: str, world_readable: bool
) -> None:
    """Creator-only by default: another identity, or none, can neither read nor change
    a lock record, a latch's participant ids or a job; with world_readable, it may read."""
    hosts = zk_server.connect_string
    option: dict[str, Any] = {"world_readable": True} if world_readable else {}  # default: private
    with anyio.fail_after(20):
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, auth="alice:wonderland", **option
        ) as alice:
            await alice.client.create("/lock", b'{"owner": "alice"}')
            async with (
                aiocoord.leader_latch(alice, "/leader", participant_id="alice-pod") as latch,
                aiocoord.connect(hosts, namespace=zk_chroot, auth="mallory:evil") as mallory,
                aiocoord.connect(hosts, namespace=zk_chroot) as anonymous,
            ):
                assert latch.node is not None
                for intruder in (mallory, anonymous):
                    client = intruder.client
                    if world_readable:
                        assert (await client.get("/lock")).data == b'{"owner": "alice"}'
                        assert (await client.get(latch.node)).data == b"alice-pod"
                        assert len(await client.children("/leader")) == 1
                    else:
                        with pytest.raises(NoAuthError):
                            await client.get("/lock")
                        with pytest.raises(NoAuthError):
                            await client.get(latch.node)
                        with pytest.raises(NoAuthError):
                            await client.children("/leader")
                        with pytest.raises(NoAuthError):
                            await aiocoord.LeaderLatch(intruder, "/leader").participants()
                    # Either way, no one else may overwrite the record or remove a node.
                    with pytest.raises(NoAuthError):
                        await client.set("/lock", b'{"owner": "mallory"}')
                    with pytest.raises(NoAuthError):
                        await client.delete(latch.node)
                    with pytest.raises(NoAuthError):
                        await client.delete("/lock")
                    with pytest.raises(NoAuthError):
                        await client.create("/leader/intruder", b"")
                assert (await alice.client.get("/lock")).data == b'{"owner": "alice"}'
                await alice.client.set("/lock", b'{"owner": "alice", "v": 2}')
                assert latch.has_leadership


def test_world_readable_needs_auth() -> None:
    with pytest.raises(ConfigError) as info:
        aiocoord.Settings.build("h:1", world_readable=True)
    assert info.value.field == "world_readable" and "auth" in str(info.value)


async def test_inspect_shows_a_private_node_as_unreadable(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    from aiocoord.cli.inspect import render
    from aiocoord.inspection import inspect_path
    from aiocoord.zk import OPEN_ACL_UNSAFE

    hosts = zk_server.connect_string
    with anyio.fail_after(20):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, auth="alice:wonderland") as alice,
            aiocoord.connect(hosts, namespace=zk_chroot) as anonymous,
        ):
            await alice.client.create("/app", acl=OPEN_ACL_UNSAFE)
            await alice.client.create("/app/open", b"hello", acl=OPEN_ACL_UNSAFE)
            await alice.client.create("/app/private", b"alice's")
            info = await inspect_path(anonymous, "/app")
            shown = {child["path"]: child for child in info["children"]}
            assert shown["/app/open"]["data"] == "hello"
            assert shown["/app/private"]["error"].startswith("no access")
            assert "private  [node] no access: with these credentials" in "\n".join(render(info))
            with pytest.raises(NoAuthError):
                await inspect_path(anonymous, "/app/private")
