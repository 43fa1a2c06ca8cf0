"""The test harness itself, against real ZooKeeper processes.

kazoo serves as the independent client here: these tests check the harness,
not aiocoord's own session manager.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState

from aiocoord.server import probe_handshake, started_processes
from aiocoord.testing import (
    FaultProxy,
    GarbageListener,
    SilentListener,
    ZooKeeperEnsemble,
    ZooKeeperNotInstalledError,
    ZooKeeperServer,
    expire_session,
    four_letter_word,
    kill_session,
    zookeeper_installed,
)
from aiocoord.testing.pytest_plugin import _timeout_configured, timeout_of


@contextmanager
def kazoo(hosts: str, timeout: float = 10.0) -> Iterator[Any]:
    """A started kazoo client that is always stopped and closed."""
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


class StateLog:
    """Records kazoo's connection states and lets a test wait for one."""

    def __init__(self, client: Any) -> None:
        self.states: list[str] = []
        self._cond = threading.Condition()
        client.add_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        with self._cond:
            self.states.append(state)
            self._cond.notify_all()

    def wait_for(self, state: str, timeout: float = 10.0, after: int = 0) -> None:
        """Wait until ``state`` is recorded at index ``after`` or later."""
        with self._cond:
            if not self._cond.wait_for(lambda: state in self.states[after:], timeout):
                raise AssertionError(f"no {state} within {timeout}s; saw {self.states}")


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``predicate`` until true, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def port_refuses(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def peer_port(client: Any) -> int:
    return int(client._connection._socket.getpeername()[1])


# -- standalone server -----------------------------------------------------------------


def test_server_answers(zk_server: ZooKeeperServer) -> None:
    assert zk_server.running
    assert zk_server.connect_string == f"127.0.0.1:{zk_server.port}"
    assert zk_server.address == ("127.0.0.1", zk_server.port)
    assert "Mode: standalone" in four_letter_word(*zk_server.address, "srvr")
    assert zk_server.role() == "standalone"
    assert probe_handshake(*zk_server.address)
    assert zk_server in started_processes()
    assert "binding to port" in zk_server.log_tail(10_000)


def test_server_lifecycle(tmp_path: Path) -> None:
    """pause/resume, restart (graceful and hard) keeps data, stop frees port and pid."""
    server = ZooKeeperServer(tmp_path / "zk", extra_config={"globalOutstandingLimit": "500"})
    with server:
        assert "globalOutstandingLimit=500" in server.config_path.read_text()
        port, first_pid = server.port, server.pid
        assert first_pid is not None
        with kazoo(server.connect_string) as client:
            client.create("/kept", b"data")

        server.pause()
        with pytest.raises(TimeoutError):  # the kernel accepts; the JVM never answers
            four_letter_word(*server.address, "srvr", timeout=0.3)
        server.resume()
        assert server.role() == "standalone"

        server.restart()
        assert server.port == port
        assert server.pid != first_pid
        assert not pid_alive(first_pid)
        server.restart(hard=True)
        with kazoo(server.connect_string) as client:
            assert client.get("/kept")[0] == b"data"

        pid = server.pid
        assert pid is not None
        server.stop()
        assert not server.running
        assert server.pid is None
        assert not pid_alive(pid)
        assert port_refuses(port)
    # A given directory is kept (only a temporary one is removed).
    assert (tmp_path / "zk" / "zk.log").is_file()


def test_temporary_directory_removed() -> None:
    server = ZooKeeperServer()
    directory = server.directory
    server.start()
    pid = server.pid
    assert pid is not None
    server.cleanup()
    assert not directory.exists()
    assert not pid_alive(pid)


def test_atexit_kills_what_a_dying_process_left(tmp_path: Path) -> None:
    """A test process that exits without stopping its server leaves no JVM behind."""
    script = (
        "from aiocoord.testing import ZooKeeperServer\n"
        "server = ZooKeeperServer().start()\n"
        "print(server.pid, server.directory, flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    pid, directory = done.stdout.split()
    assert not pid_alive(int(pid))
    assert not Path(directory).exists()


def test_missing_jars_say_what_to_do(tmp_path: Path) -> None:
    assert zookeeper_installed()
    assert not zookeeper_installed(tmp_path)
    with pytest.raises(ZooKeeperNotInstalledError, match="scripts/setup"):
        ZooKeeperServer(tmp_path / "zk", jar_dir=tmp_path).start()


# -- session expiry ----------------------------------------------------------------------


def test_kill_session_expires_kazoo(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with kazoo(zk_server.connect_string) as victim, kazoo(zk_server.connect_string) as watcher:
        log = StateLog(victim)
        path = f"{zk_chroot}-eph"
        victim.create(path, ephemeral=True)
        session_id, password = victim.client_id

        assert kill_session(*zk_server.address, session_id, password) is True
        assert watcher.exists(path) is None  # closeSession is answered after it commits
        log.wait_for(KazooState.LOST)
        assert kill_session(*zk_server.address, session_id, password) is False


def connect_request(session_id: int, password: bytes) -> bytes:
    """A framed ConnectRequest (4 s session) for a raw-socket client."""
    body = struct.pack("!iqiq", 0, 0, 4000, session_id)
    body += struct.pack("!i", len(password)) + password + b"\x00"
    return struct.pack("!i", len(body)) + body


class GreedyVictim(threading.Thread):
    """A raw client that takes its session back the moment it loses it."""

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(daemon=True)
        self.address = address
        with socket.create_connection(address, timeout=5) as sock:
            sock.sendall(connect_request(0, bytes(16)))
            answer = sock.recv(4096)
        _, _, _, self.session_id, length = struct.unpack_from("!iiiqi", answer)
        self.password = answer[24 : 24 + length]
        self.reattached = 0
        self.expired = threading.Event()
        self.stopping = False

    def run(self) -> None:
        while not self.stopping:
            with socket.create_connection(self.address, timeout=5) as sock:
                sock.sendall(connect_request(self.session_id, self.password))
                answer = sock.recv(4096)
                if len(answer) < 20 or struct.unpack_from("!iiiq", answer)[3] == 0:
                    self.expired.set()
                    return
                self.reattached += 1
                sock.settimeout(0.5)
                with contextlib.suppress(OSError):
                    while sock.recv(4096):  # until the server moves the session away
                        pass


def test_kill_session_beats_a_client_that_reconnects_at_once(zk_server: ZooKeeperServer) -> None:
    victim = GreedyVictim(zk_server.address)
    victim.start()
    try:
        wait_until(lambda: victim.reattached >= 1, 5, "the victim to attach")
        assert kill_session(*zk_server.address, victim.session_id, victim.password, timeout=5)
        assert victim.expired.wait(5)
    finally:
        victim.stopping = True
        victim.join(5)


@dataclass
class FakeCoordinator:
    """The three attributes ``expire_session`` reads from a coordinator."""

    session_id: int | None
    session_password: bytes | None
    connected_address: tuple[str, int] | None


def session_of(client: Any) -> FakeCoordinator:
    """A kazoo client's session, seen the way ``expire_session`` sees a coordinator."""
    session_id, password = client.client_id
    host, port = client._connection._socket.getpeername()
    return FakeCoordinator(int(session_id), bytes(password), (str(host), int(port)))


@pytest.mark.anyio
async def test_expire_session(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with kazoo(zk_server.connect_string) as victim, kazoo(zk_server.connect_string) as watcher:
        path = f"{zk_chroot}-eph"
        victim.create(path, ephemeral=True)
        session = session_of(victim)
        assert await expire_session(session, timeout=5.0) is True
        assert watcher.exists(path) is None
        assert await expire_session(session) is False


@pytest.mark.anyio
async def test_expire_session_needs_a_session(zk_server: ZooKeeperServer) -> None:
    with pytest.raises(ValueError, match="no session"):
        await expire_session(FakeCoordinator(None, None, None))
    with pytest.raises(ValueError, match="not connected"):
        await expire_session(FakeCoordinator(1, bytes(16), None))


@pytest.mark.anyio
async def test_both_event_loops(anyio_backend: Any) -> None:
    """Opted in (``aiocoord_loops`` in pyproject.toml), every async test runs on asyncio and uvloop."""
    name, options = anyio_backend
    loop = asyncio.get_running_loop()
    assert name == "asyncio"
    assert ("uvloop" in type(loop).__module__) == options["use_uvloop"]


# -- fault proxy -------------------------------------------------------------------------


def test_proxy_forwards_and_pauses(zk_server: ZooKeeperServer) -> None:
    with FaultProxy(*zk_server.address) as proxy, kazoo(proxy.connect_string) as client:
        assert client.get("/")[1].version == 0
        assert proxy.connections == 1

        proxy.pause()
        pending = client.exists_async("/")
        assert not pending.wait(0.5)  # silence: no answer while paused
        assert proxy.connections == 1  # but the connection is kept
        proxy.resume()
        assert pending.get(timeout=5) is not None


def test_proxy_cut_drops_connections(zk_server: ZooKeeperServer) -> None:
    with FaultProxy(*zk_server.address) as proxy, kazoo(proxy.connect_string) as client:
        log = StateLog(client)
        assert proxy.cut() == 1
        log.wait_for(KazooState.SUSPENDED)
        log.wait_for(KazooState.CONNECTED)  # new connections are still forwarded
        assert proxy.accepted == 2
        assert client.exists("/") is not None


def test_proxy_reject_delay_retarget(zk_server: ZooKeeperServer) -> None:
    with FaultProxy(*zk_server.address) as proxy, GarbageListener() as garbage:
        proxy.reject_new(True)
        with socket.create_connection(proxy.address, timeout=2) as sock:
            assert sock.recv(10) == b""  # closed at once
        proxy.reject_new(False)

        proxy.delay(0.3)
        started = time.monotonic()
        assert "Mode:" in four_letter_word(*proxy.address, "srvr", timeout=5)
        assert time.monotonic() - started >= 0.3
        proxy.delay(0)

        proxy.retarget(*garbage.address)
        assert proxy.target == garbage.address
        with socket.create_connection(proxy.address, timeout=2) as sock:
            assert sock.recv(4) == b"\xde\xad\xbe\xef"


def test_proxy_stop_leaks_nothing(zk_server: ZooKeeperServer) -> None:
    threads = threading.active_count()
    proxy = FaultProxy(*zk_server.address).start()
    with socket.create_connection(proxy.address, timeout=2) as sock:
        wait_until(lambda: proxy.connections == 1, 5, "the proxied connection")
        proxy.stop()
        assert sock.recv(10) == b""  # the proxied connection was closed
    assert threading.active_count() == threads
    assert port_refuses(proxy.port)


def test_proxy_to_dead_target_closes_client() -> None:
    with SilentListener() as silent:
        dead_port = silent.port
    with FaultProxy("127.0.0.1", dead_port) as proxy:
        with socket.create_connection(proxy.address, timeout=2) as sock:
            assert sock.recv(10) == b""


# -- misbehaving listeners ---------------------------------------------------------------


def test_silent_listener_never_answers() -> None:
    with SilentListener() as silent:
        with socket.create_connection(silent.address, timeout=2) as sock:
            sock.sendall(b"srvr")
            sock.settimeout(0.3)
            with pytest.raises(TimeoutError):
                sock.recv(10)
        assert silent.accepted == 1
        wait_until(lambda: silent.received == 4, 5, "the request to be read")
        assert not probe_handshake(*silent.address, timeout=0.3)


def test_garbage_listener_answers_junk() -> None:
    with GarbageListener(b"nonsense") as garbage:
        with socket.create_connection(garbage.address, timeout=2) as sock:
            assert sock.recv(100) == b"nonsense"
            sock.sendall(b"more")
        assert not probe_handshake(*garbage.address, timeout=1)


# -- ensemble ----------------------------------------------------------------------------


@pytest.mark.ensemble
def test_ensemble_survives_a_member(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> None:
    roles = zk_ensemble.roles()
    assert sorted(r or "" for r in roles) == ["follower", "follower", "leader"]
    assert zk_ensemble.leader() is zk_ensemble.members[roles.index("leader")]
    assert zk_ensemble.connect_string == ",".join(
        f"127.0.0.1:{m.port}" for m in zk_ensemble.members
    )

    with kazoo(zk_ensemble.connect_string) as client:
        log = StateLog(client)
        client.create(zk_chroot, b"before")
        victim = zk_ensemble.member_for_port(peer_port(client))
        pid = victim.pid
        assert pid is not None
        try:
            assert zk_ensemble.kill(victim) is victim
            assert not pid_alive(pid)
            log.wait_for(KazooState.SUSPENDED)
            log.wait_for(KazooState.CONNECTED, timeout=20, after=1)
            assert zk_ensemble.member_for_port(peer_port(client)) is not victim
            client.set(zk_chroot, b"after")
            zk_ensemble.wait_formed(20)
            for member in zk_ensemble.members:
                if member is not victim:
                    with kazoo(member.connect_string) as direct:
                        direct.sync(zk_chroot)
                        assert direct.get(zk_chroot)[0] == b"after"
        finally:
            victim.start()  # the ensemble is shared: leave it whole
        zk_ensemble.wait_formed(20)
        assert zk_ensemble.roles().count("leader") == 1


# -- pytest plugin -----------------------------------------------------------------------


def test_failed_test_report_shows_server_log(
    zk_server: ZooKeeperServer, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile("def test_fails():\n    assert False\n")
    result = pytester.runpytest_inprocess("--zk-log-lines=3")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{zk_server.name} log (*), last 3 lines*"])


def test_default_timeout_ceiling(request: pytest.FixtureRequest) -> None:
    if not request.config.pluginmanager.has_plugin("timeout"):
        pytest.skip("pytest-timeout is not installed")
    if _timeout_configured(request.config):
        pytest.skip("a timeout is configured for this run")
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None
    assert marker.args == (timeout_of(request.config),) == (120.0,)  # pyproject.toml opts in
