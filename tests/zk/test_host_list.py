"""The host list on standalone servers: set_hosts, names resolved at each attempt, bad members named.

Names we control come from a resolver we control: ``socket.getaddrinfo`` is
replaced for two made-up names (``*.aiocoord.test``) and passes every other
name to the real one.  The event loop's resolver calls it on each lookup
under asyncio (uvloop resolves through libuv), so this module runs on asyncio
only.  Servers are real: the shared standalone one, through a door where an
outage is needed, and own ones started (and stopped) here.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

import aiocoord
from aiocoord import ConfigError, ConnectionState, CoordinatorClosedError
from aiocoord.server import free_ports
from aiocoord.testing import ZooKeeperServer
from tests.helpers import Door, recording

pytestmark = pytest.mark.anyio

S = ConnectionState
POD = "zk-0.aiocoord.test"  # resolves to what `Names.pod` says now
GONE = "zk-gone.aiocoord.test"  # never resolves


@pytest.fixture(scope="module")
def anyio_backend() -> object:
    return "asyncio"  # the resolver is replaced where asyncio's loop calls it


class Names:
    """``socket.getaddrinfo`` for our two names; every other name as the system resolves it."""

    def __init__(self) -> None:
        self.pod = "127.0.0.1"
        self.asked: list[str] = []
        self._real = socket.getaddrinfo

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name in (POD, GONE):
            self.asked.append(name)
            if name == GONE:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return self._real(self.pod, port, *args, **kwargs)
        return self._real(host, port, *args, **kwargs)


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> Names:
    fake = Names()
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


@pytest.fixture
def door(zk_server: ZooKeeperServer) -> Iterator[Door]:
    d = Door(zk_server)
    try:
        yield d
    finally:
        d.close()


async def test_set_hosts_is_used_from_the_next_attempt_and_keeps_the_connection(
    door: Door, zk_chroot: str
) -> None:
    """kazoo's set_hosts: a healthy connection stays; the next attempt goes to the new list."""
    with ZooKeeperServer() as other, anyio.fail_after(40):
        async with aiocoord.connect(
            door.connect_string, namespace=zk_chroot, session_timeout=4
        ) as coord:
            assert coord.hosts == door.connect_string
            await coord.set_hosts(f"{other.connect_string}{zk_chroot}")  # its own chroot is fine
            assert coord.hosts == other.connect_string
            assert coord.connected_address == ("127.0.0.1", door.port)  # kept
            await coord.client.create("/still-here")
            async with recording(coord) as rec:
                door.close()
                # The other server never saw the session: it is told so, then a new one opens.
                await rec.wait_for(S.RECONNECTED, timeout=20)
            assert coord.connected_address == other.address
            assert coord.hosts == other.connect_string
            await coord.client.create("/on-the-other")
        async with aiocoord.connect(other.connect_string, namespace=zk_chroot) as check:
            assert await check.client.exists("/on-the-other") is not None


@pytest.mark.parametrize(
    "hosts",
    ["", "   ", "h:0", "h:99999", "h:port", "h1:2181,,h2:2181", "[::1:2181", 42],
)
async def test_set_hosts_refuses_a_bad_host_string_naming_hosts(
    coordinator: aiocoord.Coordinator, hosts: object
) -> None:
    before = coordinator.hosts
    with pytest.raises(ConfigError) as info:
        await coordinator.set_hosts(hosts)  # type: ignore[arg-type]
    assert info.value.field == "hosts"
    assert coordinator.hosts == before


async def test_set_hosts_keeps_the_chroot_and_refuses_another(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(f"{zk_server.connect_string}{zk_chroot}") as coord:
            with pytest.raises(ConfigError, match="chroot") as info:
                await coord.set_hosts(f"{zk_server.connect_string}/elsewhere")
            assert info.value.field == "hosts"
            await coord.set_hosts(f"localhost:{zk_server.port}")  # no chroot: ours stays
            assert coord.hosts == f"localhost:{zk_server.port}"
            await coord.client.create("/mine")
        async with aiocoord.connect(zk_server.connect_string) as plain:
            assert await plain.client.exists(f"{zk_chroot}/mine") is not None
    with pytest.raises(CoordinatorClosedError):
        await coord.set_hosts(zk_server.connect_string)


async def test_a_name_is_resolved_again_at_every_attempt(names: Names, zk_chroot: str) -> None:
    """A replaced pod keeps its name, not its address: the next attempt finds the new one."""
    [port] = free_ports(1)
    first = ZooKeeperServer(port=port)  # 127.0.0.1
    second = ZooKeeperServer(port=port, host="127.0.0.2")
    try:
        await anyio.to_thread.run_sync(first.start)
        with anyio.fail_after(60):
            async with aiocoord.connect(
                f"{POD}:{port}", namespace=zk_chroot, session_timeout=4
            ) as coord:
                assert names.asked == [POD]
                await coord.client.create("/on-the-first")
                async with recording(coord) as rec:
                    await anyio.to_thread.run_sync(first.stop)
                    await rec.wait_for(S.SUSPENDED)
                    names.pod = "127.0.0.2"  # the pod came back elsewhere
                    await anyio.to_thread.run_sync(second.start)
                    await rec.wait_for(S.RECONNECTED, timeout=30)
                assert coord.connected_address == (POD, port)
                assert len(names.asked) >= 2  # asked again, not cached
                # The only server that runs is the second: this session is on it.
                assert await coord.client.exists("/on-the-first") is None
                await coord.client.create("/on-the-second")
    finally:
        first.cleanup()
        second.cleanup()


def member_warnings(caplog: pytest.LogCaptureFixture, member: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING and f"ZooKeeper member {member} " in r.getMessage()
    ]


async def test_a_bad_member_gets_one_warning_per_outage_naming_it(
    names: Names, door: Door, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A dead port and a name that does not resolve: named once at start-up and once per outage.

    Not on every retry (those are DEBUG), and not in an outage's first
    second: a blip names nobody.
    """
    caplog.set_level(logging.DEBUG, logger="aiocoord")
    [dead] = free_ports(1)
    refused, unresolved, good = f"127.0.0.1:{dead}", f"{GONE}:2181", door.connect_string
    hosts = f"{refused},{unresolved},{good}"
    with anyio.fail_after(60):
        async with aiocoord.connect(
            hosts, namespace=zk_chroot, session_timeout=8, randomize_hosts=False
        ) as coord:
            # Start-up: both bad members failed before the good one answered.
            assert [len(member_warnings(caplog, m)) for m in (refused, unresolved)] == [1, 1]
            assert "refuses connections" in member_warnings(caplog, refused)[0].getMessage()
            assert "does not resolve" in member_warnings(caplog, unresolved)[0].getMessage()
            assert not member_warnings(caplog, good)
            # One outage: in a second one right after, the reconnect backoff has not been
            # reset (the connection was not up for `stable_after`), and whether the dead
            # member is tried again past the outage's first second is down to timing.
            for outage in (1,):
                async with recording(coord) as rec:
                    caplog.clear()
                    door.close()
                    await rec.wait_for(S.SUSPENDED)
                    await anyio.sleep(3.5)  # an outage past its first second, retrying meanwhile
                    door.open()
                    await rec.wait_for(S.RECONNECTED, timeout=20)
                for member in (refused, unresolved, good):
                    assert len(member_warnings(caplog, member)) == 1, (outage, member)
                retries = [
                    r
                    for r in caplog.records
                    if r.levelno == logging.DEBUG and refused in r.getMessage()
                ]
                assert retries, "the member was tried again"
                others = [
                    r.getMessage()
                    for r in caplog.records
                    if r.levelno >= logging.WARNING and "ZooKeeper member" not in r.getMessage()
                ]
                assert others == [], others
            # A blip (the door shut for less than a second) names nobody.
            async with recording(coord) as rec:
                caplog.clear()
                door.close()
                await rec.wait_for(S.SUSPENDED)
                door.open()
                await rec.wait_for(S.RECONNECTED, timeout=20)
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
