"""`group_member` against a real server, and against Curator's own ``GroupMember``.

The Java side is Apache Curator 5.4 (Debian ``libcurator-recipes-java``;
``tests/interop/CuratorGroup.java``, compiled with ``javac`` at test time).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import ConfigError, group_member
from aiocoord.testing import ZooKeeperServer, expire_session
from benchmarks.mutex_peers import JARS
from tests.helpers import compile_java

pytestmark = pytest.mark.anyio


async def next_view(
    changes: AsyncIterator[dict[str, bytes]], wanted: dict[str, bytes]
) -> dict[str, bytes]:
    """The first view from `changes` equal to `wanted`."""
    async for view in changes:
        if view == wanted:
            return view
    raise AssertionError("the stream ended")


async def test_members_and_changes(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            async with group_member(coordinator, "/g/api", member_id="a", data=b"1") as a:
                assert a.members() == {"a": b"1"}
                changes = a.changes()
                async with group_member(other, "/g/api", member_id="b", data=b"2") as b:
                    await next_view(changes, {"a": b"1", "b": b"2"})
                    await b.set_data(b"3")
                    await next_view(changes, {"a": b"1", "b": b"3"})
                    # A lost session: b sees a go and come back on a's new session.
                    theirs = b.changes()
                    first = coordinator.session_id
                    await expire_session(coordinator)
                    await next_view(theirs, {"b": b"3"})
                    await next_view(theirs, {"a": b"1", "b": b"3"})
                    stat = await other.client.exists("/g/api/a")
                    assert stat is not None and stat.ephemeral_owner not in (0, first)
                await next_view(changes, {"a": b"1"})
                assert "members=1" in repr(a)


async def test_bad_arguments_name_themselves(coordinator: aiocoord.Coordinator) -> None:
    with pytest.raises(ConfigError, match="member_id"):
        group_member(coordinator, "/g", member_id="a/b")
    with pytest.raises(TypeError, match="member_id"):
        group_member(coordinator, "/g", member_id=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="data"):
        group_member(coordinator, "/g", member_id="a", data="x")  # type: ignore[arg-type]


# --- with Curator -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def group_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return compile_java("CuratorGroup", list(JARS), tmp_path_factory.mktemp("curator-group"))


@asynccontextmanager
async def java_member(
    classpath: str, hosts: str, member_id: str, payload: str
) -> AsyncIterator[anyio.abc.Process]:
    process = await anyio.open_process(
        [
            "java",
            "-Xmx64m",
            "-cp",
            classpath,
            "CuratorGroup",
            hosts,
            "/g/mixed",
            member_id,
            payload,
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            with suppress(ProcessLookupError):  # it may have ended by itself
                process.kill()
            await process.wait()


async def test_curator_and_python_members_see_each_other(
    coordinator: aiocoord.Coordinator,
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    group_classpath: str,
) -> None:
    hosts = zk_server.connect_string + zk_chroot
    with anyio.fail_after(60):
        async with (
            group_member(coordinator, "/g/mixed", member_id="py-1", data=b"python") as group,
            java_member(group_classpath, hosts, "java-1", "java") as java,
        ):
            assert java.stdout is not None and java.stdin is not None
            lines = BufferedByteReceiveStream(java.stdout)
            assert (await lines.receive_until(b"\n", 1 << 16)).strip() == b"READY"
            changes = group.changes()
            if group.members() != {"py-1": b"python", "java-1": b"java"}:
                await next_view(changes, {"py-1": b"python", "java-1": b"java"})
            while True:
                await java.stdin.send(b"members\n")
                line = (await lines.receive_until(b"\n", 1 << 16)).decode().strip()
                if line == "MEMBERS java-1=java,py-1=python":
                    break
                await anyio.sleep(0.1)  # the Java cache may not have read us yet
