"""The embedded development ZooKeeper behind ``aiocoord zk``: start, find, stop.

One server per user, on 127.0.0.1 only, on port 2181 (the default of
`aiocoord.Settings`, so a plain ``aiocoord.connect()`` reaches it) or another
port.  Its folder is `default_dir()` (``$AIOCOORD_ZK_DIR``, else
``$XDG_STATE_HOME/aiocoord/zk``, else ``~/.local/state/aiocoord/zk``) or one
given, holding ``zoo.cfg``, ``data/``, ``zk.log`` and ``server.json``, which
records the pid and port so that `stop` and `status` find it from any
directory and process.  The JVM runs detached: it outlives the process that
started it.  A server of ours started from another folder (``--dir``, or an
older aiocoord's ``./.aiocoord/zk``) is found by what it answers on its port:
its ``conf`` names its data folder, so it is never started twice.  A pid
counts as ours only while its command line names the folder's ``zoo.cfg``, so
a recycled pid is never signalled.  Every call here blocks the calling thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._embedded_record import DIR_VARIABLE, STATE_FILE, default_dir, is_alive
from ._host import ZooKeeperNotInstalledError, free_ports, port_free
from ._port_holder import port_holder
from ._probe import data_dir_of, server_mode
from ._process import ZooKeeperProcess

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = (
    "DEFAULT_PORT",
    "DIR_VARIABLE",
    "EmbeddedServer",
    "EmbeddedServerError",
    "default_dir",
    "embedded_status",
    "find_by_port",
    "find_running",
    "is_embedded_default",
    "read_state",
    "start_embedded",
    "stop_embedded",
)

"""Pins the per-user folder (tests point it at a temporary one)."""
DEFAULT_PORT = 2181
"""The embedded server's port unless another is given: `aiocoord.Settings`' default."""
_STATE = STATE_FILE
_CONFIG = {
    "maxSessionTimeout": "60000",
    "autopurge.snapRetainCount": "3",
    "autopurge.purgeInterval": "1",
}


class EmbeddedServerError(RuntimeError):
    """The embedded server cannot be started (not installed, port taken, exited or silent).

    The message says why, on one line, and what to do.
    """


class _PortTaken(EmbeddedServerError):
    pass


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """An embedded server as recorded in its folder's ``server.json``."""

    directory: Path
    pid: int
    port: int
    started: float

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zk.log"


def _state_path(directory: Path) -> Path:
    return directory / _STATE


def _is_alive(server: EmbeddedServer) -> bool:
    """Whether the recorded pid still runs this folder's server (not a recycled pid)."""
    return is_alive(server.pid, server.config_path)


def read_state(directory: Path, *, clean: bool = True) -> EmbeddedServer | None:
    """The server recorded in `directory` if it still runs, else None.

    A stale or unreadable record is removed unless `clean` is False.
    """
    path = _state_path(directory)
    try:
        raw = json.loads(path.read_text())
        server = EmbeddedServer(directory, int(raw["pid"]), int(raw["port"]), float(raw["started"]))
        alive = _is_alive(server)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        alive = False
    if not alive:
        if clean:
            with contextlib.suppress(OSError):
                path.unlink()
        return None
    return server


def find_by_port(port: int = DEFAULT_PORT) -> EmbeddedServer | None:
    """The embedded server answering on 127.0.0.1:`port`, whatever folder it was started in.

    Its ``conf`` answer names its data folder, whose parent holds its
    ``server.json``; None when nothing answers there or it is not one of ours.
    """
    data = data_dir_of("127.0.0.1", port)
    if data is None:
        return None
    # Only read: the folder belongs to whoever started that server.
    found = read_state(data.parent, clean=False)
    return found if found is not None and found.port == port else None


def find_running(directory: Path | None = None) -> EmbeddedServer | None:
    """The embedded server of `directory`; with None, the user's, from wherever it was started.

    None means the per-user folder (`default_dir()`); unless ``AIOCOORD_ZK_DIR``
    pins that folder, a server of ours answering on the default port is found
    too, from whichever folder it runs.
    """
    found = read_state(default_dir() if directory is None else directory)
    if found is None and directory is None and not os.environ.get(DIR_VARIABLE):
        found = find_by_port(DEFAULT_PORT)
    return found


def is_embedded_default(settings: Settings) -> bool:
    """Whether `settings` point at the embedded server's default address (127.0.0.1:2181)."""
    return settings.addresses in ([("127.0.0.1", DEFAULT_PORT)], [("localhost", DEFAULT_PORT)])


def start_embedded(
    directory: Path | None = None,
    *,
    port: int | None = None,
    timeout: float = 30.0,
    any_port: bool = True,
) -> tuple[EmbeddedServer, ZooKeeperProcess | None]:
    """Start the embedded server in `directory` (None: the user's) unless it already runs.

    Blocks until the server answers.  Returns the server and, when this call
    started it, its process (which `stop_embedded` takes to reap it).  Without
    `port` it listens on 2181, or (`any_port`) on a free port when 2181 is
    taken.  Raises `EmbeddedServerError` when ZooKeeper is not installed, the
    port is taken, or the server does not answer within `timeout` seconds.
    """
    running = find_running(directory)
    if running is not None:
        if port is not None and port != running.port:
            raise EmbeddedServerError(
                f"the embedded ZooKeeper in {running.directory} already runs on port "
                f"{running.port}; 'aiocoord zk stop' it first"
            )
        return running, None
    directory = default_dir() if directory is None else directory
    if port is not None:
        if not 0 < port < 65536:
            raise EmbeddedServerError(f"--port {port} is out of range")
        if not port_free(port):
            holder = port_holder(port)
            by = f" by {holder}" if holder else ""
            raise EmbeddedServerError(f"port {port} on 127.0.0.1 is already in use{by}")
        return _launch(directory, port, timeout)
    # No port given: 2181 if free, else a free one; a port taken between the check
    # and the JVM's bind (another server starting at the same moment) means another try.
    candidates = [DEFAULT_PORT] if port_free(DEFAULT_PORT) else []
    if not candidates and not any_port:
        raise EmbeddedServerError(_default_port_taken())
    for attempt in range(3):
        chosen = candidates[attempt] if attempt < len(candidates) else free_ports(1)[0]
        try:
            return _launch(directory, chosen, timeout)
        except _PortTaken:
            continue
    raise EmbeddedServerError("could not find a free port for ZooKeeper on 127.0.0.1 in 3 tries")


def _default_port_taken() -> str:
    """Why the default port cannot be ours, and what to do instead."""
    other = find_by_port(DEFAULT_PORT)
    if other is not None:
        what = (
            f"the embedded ZooKeeper of {other.directory} (pid {other.pid}; "
            f"'aiocoord zk stop --dir {other.directory}' stops it)"
        )
    else:
        mode = server_mode("127.0.0.1", DEFAULT_PORT)
        what = "a ZooKeeper started some other way" if mode else "another program"
        holder = port_holder(DEFAULT_PORT)
        if holder:
            what += f", {holder}"
    return (
        f"127.0.0.1:{DEFAULT_PORT}, where aiocoord.connect() goes by default, is taken by "
        f"{what}; give --port N to start one elsewhere (then export AIOCOORD_HOSTS=127.0.0.1:N)"
    )


def _launch(directory: Path, port: int, timeout: float) -> tuple[EmbeddedServer, ZooKeeperProcess]:
    """Start the JVM on `port`, record it, and wait until it answers as this folder's server."""
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# aiocoord's embedded ZooKeeper: nothing here belongs in git\n*\n")
    proc = ZooKeeperProcess(directory, port=port, extra_config=_CONFIG, detached=True)
    try:
        pid = proc.spawn()
    except ZooKeeperNotInstalledError as exc:
        raise EmbeddedServerError(str(exc)) from None
    server = EmbeddedServer(directory, pid, port, time.time())
    state = {"pid": server.pid, "port": port, "started": server.started}
    _state_path(directory).write_text(json.dumps(state) + "\n")
    try:
        proc.wait_ready(timeout)
    except TimeoutError:  # it has been killed
        _state_path(directory).unlink(missing_ok=True)
        raise EmbeddedServerError(
            f"ZooKeeper did not answer within {timeout:g}s (log {proc.log_path})"
        ) from None
    except RuntimeError:  # it exited
        _state_path(directory).unlink(missing_ok=True)
        if proc.port_taken():
            raise _PortTaken(f"port {port} on 127.0.0.1 is already in use") from None
        last = proc.log_tail(1).strip()
        raise EmbeddedServerError(
            f"ZooKeeper exited while starting (log {proc.log_path})" + (f": {last}" if last else "")
        ) from None
    return server, proc


def stop_embedded(
    directory: Path | None = None,
    *,
    proc: ZooKeeperProcess | None = None,
    timeout: float = 10.0,
) -> EmbeddedServer | None:
    """Stop the embedded server of `directory` (SIGTERM, then SIGKILL); None if none ran.

    Blocks until it has exited.  None means the user's server, wherever it was
    started (`find_running`).  `proc` is the process `start_embedded`
    returned, if this process started it (so that its exit is reaped).
    """
    server = find_running(directory)
    if server is None:
        return None
    if proc is not None and proc.pid == server.pid:
        proc.stop(timeout)
    else:
        _signal(server, signal.SIGTERM)
        if not _wait_gone(server, timeout):
            _signal(server, signal.SIGKILL)
            _wait_gone(server, 5.0)
    _state_path(server.directory).unlink(missing_ok=True)
    return server


def _signal(server: EmbeddedServer, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(server.pid, sig)


def _wait_gone(server: EmbeddedServer, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _is_alive(server):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def embedded_status(directory: Path | None = None) -> tuple[EmbeddedServer | None, str | None]:
    """The running server (or None) and its ``srvr`` mode (None if it does not answer).

    None means the user's server, wherever it was started (`find_running`).
    """
    server = find_running(directory)
    if server is None:
        return None, None
    return server, server_mode("127.0.0.1", server.port)
