"""The embedded development ZooKeeper behind ``aiocoord zk start|stop|status``.

The server is the installed Debian ``zookeeper`` package run by ``java``, one
per user, in a per-user state folder (`default_dir()`; ``--dir`` overrides
it) holding ``zoo.cfg``, ``data/``, ``zk.log`` and ``server.json``, which
records the pid and the port so that `stop` and `status` find it from any
directory and process (`_zk_state` says how, and how a server of ours started
from another folder is found by its port, so it is never started twice).  It
listens on 127.0.0.1 only, on port 2181 (the default of `aiocoord.Settings`,
so a plain ``aiocoord.connect()`` reaches it) or `--port`.

A process is only ever signalled by the pid recorded for it, and only while
its command line still names its folder's ``zoo.cfg``, so a recycled pid is
never hit.

`local_zookeeper()` is what the demo and the examples use: the servers named by
``AIOCOORD_HOSTS`` if set, else the embedded server if it runs, else one started
for the duration of the block.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from ..settings import Settings
from ._port_holder import port_holder
from ._zk_state import (
    DEFAULT_PORT,
    DIR_VARIABLE,
    EmbeddedServer,
    default_dir,
    find_by_port,
    find_running,
    is_alive,
    is_embedded_default,
    read_state,
    state_path,
)

__all__ = (
    "DIR_VARIABLE",
    "EmbeddedServer",
    "UserError",
    "default_dir",
    "find_by_port",
    "find_running",
    "is_embedded_default",
    "local_zookeeper",
    "read_state",
    "resolve_hosts",
    "server_status",
    "start_server",
    "stop_server",
)

_JVM_ARGS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dzookeeper.root.logger=INFO,CONSOLE",
    "-Dznode.container.checkIntervalMs=1000",
)


class UserError(Exception):
    """A problem the user can fix; the command prints its message on one line and exits 1."""


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # As a server binds: a port left in TIME_WAIT by a stopped server is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _write_config(directory: Path, port: int) -> Path:
    data = directory / "data"
    data.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# aiocoord's embedded ZooKeeper: nothing here belongs in git\n*\n")
    config = {
        "tickTime": "200",
        "minSessionTimeout": "500",
        "maxSessionTimeout": "60000",
        "dataDir": str(data.resolve()),
        "clientPort": str(port),
        "clientPortAddress": "127.0.0.1",
        "admin.enableServer": "false",
        "4lw.commands.whitelist": "*",
        "extendedTypesEnabled": "true",
        "autopurge.snapRetainCount": "3",
        "autopurge.purgeInterval": "1",
    }
    path = directory / "zoo.cfg"
    path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
    return path


Started = tuple[EmbeddedServer, "subprocess.Popen[bytes] | None"]


def start_server(
    directory: Path | None = None,
    *,
    port: int | None = None,
    timeout: float = 30.0,
    any_port: bool = True,
) -> Started:
    """Start the embedded server in `directory` (None: the user's) unless it already runs.

    Returns the server and, when this call started it, its `Popen` handle.  The
    JVM runs in its own session, so it outlives this process.  Without `port`
    it listens on 2181, or (`any_port`) on a free port when 2181 is taken.
    Raises `UserError` when ZooKeeper is not installed, the port is taken, or
    the server does not answer within `timeout` seconds.
    """
    from ..testing._server import ZooKeeperNotInstalledError, classpath

    running = find_running(directory)
    if running is not None:
        if port is not None and port != running.port:
            raise UserError(
                f"the embedded ZooKeeper in {running.directory} already runs on port "
                f"{running.port}; 'aiocoord zk stop' it first"
            )
        return running, None
    directory = default_dir() if directory is None else directory
    try:
        cp = classpath()
    except ZooKeeperNotInstalledError as exc:
        raise UserError(str(exc)) from None
    if port is not None:
        if not 0 < port < 65536:
            raise UserError(f"--port {port} is out of range")
        if not _port_free(port):
            holder = port_holder(port)
            by = f" by {holder}" if holder else ""
            raise UserError(f"port {port} on 127.0.0.1 is already in use{by}")
        return _launch(directory, cp, port, timeout)
    # No port given: 2181 if free, else a free one; a port taken between the check
    # and the JVM's bind (another server starting at the same moment) means another try.
    candidates = [DEFAULT_PORT] if _port_free(DEFAULT_PORT) else []
    if not candidates and not any_port:
        raise UserError(_default_port_taken())
    for attempt in range(3):
        chosen = candidates[attempt] if attempt < len(candidates) else _free_port()
        try:
            return _launch(directory, cp, chosen, timeout)
        except _PortTaken:
            continue
    raise UserError("could not find a free port for ZooKeeper on 127.0.0.1 in 3 tries")


class _PortTaken(UserError):
    pass


def _default_port_taken() -> str:
    """Why the default port cannot be ours, and what to do instead."""
    other = find_by_port(DEFAULT_PORT)
    if other is not None:
        what = (
            f"the embedded ZooKeeper of {other.directory} (pid {other.pid}; "
            f"'aiocoord zk stop --dir {other.directory}' stops it)"
        )
    else:
        from ..testing._expire import server_mode

        mode = server_mode("127.0.0.1", DEFAULT_PORT)
        what = "a ZooKeeper started some other way" if mode else "another program"
        holder = port_holder(DEFAULT_PORT)
        if holder:
            what += f", {holder}"
    return (
        f"127.0.0.1:{DEFAULT_PORT}, where aiocoord.connect() goes by default, is taken by "
        f"{what}; give --port N to start one elsewhere (then export AIOCOORD_HOSTS=127.0.0.1:N)"
    )


def _launch(directory: Path, cp: str, port: int, timeout: float) -> Started:
    """Start the JVM on `port` and wait until it answers as this folder's server."""
    from ..testing._expire import four_letter_word, probe_handshake

    directory.mkdir(parents=True, exist_ok=True)
    config = _write_config(directory, port)
    data_dir = str((directory / "data").resolve())
    log_path = directory / "zk.log"
    start = log_path.stat().st_size if log_path.exists() else 0
    java = ["java", *_JVM_ARGS, "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain"]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [*java, str(config.resolve())],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            start_new_session=True,  # outlives this process; a Ctrl-C here does not reach it
        )
    server = EmbeddedServer(directory, proc.pid, port, time.time())
    state = {"pid": proc.pid, "port": port, "started": server.started}
    state_path(directory).write_text(json.dumps(state) + "\n")
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            state_path(directory).unlink(missing_ok=True)
            with log_path.open("rb") as f:
                f.seek(start)
                tail = f.read().decode("utf-8", "replace")
            if "Address already in use" in tail:
                raise _PortTaken(f"port {port} on 127.0.0.1 is already in use")
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            raise UserError(
                f"ZooKeeper exited with code {proc.returncode} while starting (log {log_path})"
                + (f": {last}" if last else "")
            )
        # Ours, not another server that took the port: `conf` names our data folder.
        try:
            ours = f"dataDir={data_dir}" in four_letter_word("127.0.0.1", port, "conf", 1.0)
        except OSError:
            ours = False
        if ours and probe_handshake("127.0.0.1", port, timeout=1.0):
            return server, proc
        if time.monotonic() >= deadline:
            proc.kill()
            proc.wait()
            state_path(directory).unlink(missing_ok=True)
            raise UserError(f"ZooKeeper did not answer within {timeout:g}s (log {log_path})")
        time.sleep(0.05)


def stop_server(
    directory: Path | None = None,
    *,
    proc: subprocess.Popen[bytes] | None = None,
    timeout: float = 10.0,
) -> EmbeddedServer | None:
    """Stop the embedded server of `directory` (SIGTERM, then SIGKILL); None if none ran.

    None means the user's server, wherever it was started (`find_running`).
    `proc` is the handle `start_server` returned, if this process started it
    (so the exit is reaped).
    """
    server = find_running(directory)
    if server is None:
        return None
    _signal(server, signal.SIGTERM)
    if not _wait_gone(server, proc, timeout):
        _signal(server, signal.SIGKILL)
        _wait_gone(server, proc, 5.0)
    state_path(server.directory).unlink(missing_ok=True)
    return server


def _signal(server: EmbeddedServer, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, sig)


def _wait_gone(
    server: EmbeddedServer, proc: subprocess.Popen[bytes] | None, timeout: float
) -> bool:
    if proc is not None:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline = time.monotonic() + timeout
    while is_alive(server):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def server_status(
    directory: Path | None = None,
) -> tuple[EmbeddedServer | None, str | None]:
    """The running server (or None) and its ``srvr`` mode (None if it does not answer).

    None means the user's server, wherever it was started (`find_running`).
    """
    from ..testing._expire import server_mode

    server = find_running(directory)
    if server is None:
        return None, None
    return server, server_mode("127.0.0.1", server.port)


def resolve_hosts(hosts: str | None = None, directory: Path | None = None) -> Settings:
    """Settings for a command that needs a server: `hosts`, else ``AIOCOORD_*``, else embedded.

    ``AIOCOORD_HOSTS`` (or a ``.env`` file) wins over the embedded server; with
    neither, the embedded server's port is used when it runs, else Settings'
    default (127.0.0.1:2181).
    """
    if hosts is not None:
        return Settings.build(hosts)
    settings = Settings()
    if "hosts" in settings.model_fields_set:
        return settings
    # One of ours on another folder listens on 2181, which the default reaches anyway.
    running = read_state(default_dir() if directory is None else directory)
    if running is not None:
        return Settings.build(settings, hosts=running.connect_string)
    return settings


@contextlib.contextmanager
def local_zookeeper(directory: Path | None = None, *, quiet: bool = False) -> Iterator[Settings]:
    """Settings for a ZooKeeper to use now: ``AIOCOORD_HOSTS``, the embedded one, or a new one.

    When ``AIOCOORD_HOSTS`` is set (environment or ``.env``), those servers
    are used as they are.  Otherwise the user's embedded server (``aiocoord zk
    start``, in `directory` or the per-user folder) is used if it runs; if not,
    one is started there for the duration of the block, on 2181 or a free port,
    and stopped afterwards (a line on stderr says so unless `quiet`).  Raises
    `UserError` when it cannot be started.
    """
    settings = Settings()
    if "hosts" in settings.model_fields_set:
        yield settings
        return
    server, proc = start_server(directory)
    if proc is None:
        yield Settings.build(settings, hosts=server.connect_string)
        return
    if not quiet:
        print(
            f"aiocoord: started the embedded ZooKeeper at {server.connect_string} "
            f"(data in {server.directory}); it stops when this program ends",
            file=sys.stderr,
            flush=True,
        )
    try:
        yield Settings.build(settings, hosts=server.connect_string)
    finally:
        stop_server(server.directory, proc=proc)
