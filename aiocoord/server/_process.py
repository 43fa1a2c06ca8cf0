"""A real ZooKeeper server in a child process: configure, start, wait, signal, stop.

The server is the Debian ``zookeeper`` package's jars run by ``java``, in a
directory (``zoo.cfg``, ``data/``, ``zk.log``; a temporary one by default) on a
loopback port (a free one by default). A process is only ever signalled
through its own recorded ``Popen`` handle, never by name; an ``atexit`` hook
kills whatever is still running, unless it was started ``detached`` to outlive
this process. Readiness means the server really answers as ours: ``conf``
names our data folder (not another server's that took the port) and a real
handshake gets a session (ZooKeeper 3.8.0 opens its port before its database
is loaded, and a client that connects then is never answered). Every call
here blocks the calling thread.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from ._host import DEFAULT_CONF_DIR, DEFAULT_JAR_DIR, classpath, free_ports
from ._probe import data_dir_of, probe_handshake, server_mode

__all__ = (
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "make_temp_dir",
    "remove_temp_dir",
    "started_processes",
)

logger = logging.getLogger(__name__)

_JVM_ARGS = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dzookeeper.root.logger=INFO,CONSOLE",
    "-Dznode.container.checkIntervalMs=500",
)
_ADDRESS_IN_USE = b"Address already in use"
_PORT_ATTEMPTS = 3


# Every process this package started and has not yet reaped, for the atexit hook.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()
# Every server object started and not cleaned up, for the pytest log-tail hook.
_STARTED: weakref.WeakSet[ZooKeeperProcess] = weakref.WeakSet()
# Temporary directories made here and not removed yet, for the atexit hook.
_TEMP_DIRS: set[Path] = set()


def make_temp_dir(prefix: str) -> Path:
    """A new temporary directory that the atexit hook removes if nobody else does."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _TEMP_DIRS.add(path)
    return path


def remove_temp_dir(path: Path) -> None:
    """Remove a directory made by ``make_temp_dir`` and everything in it."""
    shutil.rmtree(path, ignore_errors=True)
    _TEMP_DIRS.discard(path)


def started_processes() -> list[ZooKeeperProcess]:
    """Servers and ensemble members started and not cleaned up yet, oldest first."""
    return sorted(_STARTED, key=lambda p: p.started_at)


@atexit.register
def _kill_leftovers() -> None:
    """Kill every server still running and remove temporary directories at exit."""
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
        _LIVE.clear()
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
    for path in list(_TEMP_DIRS):
        remove_temp_dir(path)


class ZooKeeperProcess:
    """One ZooKeeper JVM: configuration, life cycle and fault signals.

    Shared by ``ZooKeeperServer``, the embedded server and the test ensemble's
    members; subclasses say which main class runs and when the process counts
    as ready. A ``detached`` process is left running at exit, to outlive this one.
    ``extra_config`` adds or overrides ``zoo.cfg`` entries, ``jvm_args`` adds JVM
    flags (``-Djava.security.auth.login.config=jaas.conf`` for SASL, say) and
    ``environment`` adds variables (``KRB5_CONFIG``) to the server's.
    """

    main_class = "org.apache.zookeeper.server.ZooKeeperServerMain"

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        tick_time: int = 200,
        extra_config: dict[str, str] | None = None,
        jvm_args: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
        jar_dir: str | os.PathLike[str] = DEFAULT_JAR_DIR,
        conf_dir: str | os.PathLike[str] = DEFAULT_CONF_DIR,
        detached: bool = False,
    ) -> None:
        self._own_dir = directory is None
        self.directory = (
            make_temp_dir("aiocoord-zk-") if directory is None else Path(directory).resolve()
        )
        self._fixed_port = port is not None
        self._port = port if port is not None else free_ports(1)[0]
        self.tick_time = tick_time
        self.extra_config = dict(extra_config or {})
        if isinstance(jvm_args, str) or not all(isinstance(a, str) for a in jvm_args):
            raise TypeError("jvm_args must be a sequence of strings such as ['-Dname=value']")
        self.jvm_args = tuple(jvm_args)
        self.environment = dict(environment or {})
        self.jar_dir = Path(jar_dir)
        self.conf_dir = Path(conf_dir)
        self.detached = detached
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0
        self._paused = False
        self.started_at = 0.0

    # -- configuration -----------------------------------------------------------------

    @property
    def name(self) -> str:
        """A short label for logs and reports."""
        return f"zookeeper:{self._port}"

    def config(self) -> dict[str, str]:
        """The ``zoo.cfg`` entries; subclasses add theirs."""
        cfg = {
            "tickTime": str(self.tick_time),
            "minSessionTimeout": "500",
            "maxSessionTimeout": "30000",
            "dataDir": str(self.data_dir),
            "clientPort": str(self._port),
            "clientPortAddress": "127.0.0.1",
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
            "extendedTypesEnabled": "true",
        }
        cfg.update(self.extra_config)
        return cfg

    def _prepare(self) -> None:
        """Write ``zoo.cfg`` and create ``data/``; subclasses add files such as ``myid``."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.config().items())
        self.config_path.write_text(text)

    def _is_ready(self) -> bool:
        ours = data_dir_of(self.host, self._port) == self.data_dir
        return ours and probe_handshake(self.host, self._port, timeout=1.0)

    # -- properties --------------------------------------------------------------------

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def port(self) -> int:
        return self._port

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self._port)

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self._port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zk.log"

    @property
    def pid(self) -> int | None:
        """The JVM's pid while it runs (or is paused), else None."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        """Whether the process exists (a paused process is still running)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self.running and self._paused

    def role(self, timeout: float = 1.0) -> str | None:
        """The server's ``srvr`` mode (standalone, leader, follower), or None."""
        return server_mode(self.host, self._port, timeout) if self.running else None

    def log_tail(self, lines: int = 200) -> str:
        """The last ``lines`` lines of the server log ('' if there is none)."""
        try:
            with self.log_path.open("rb") as f:
                tail = deque(f, maxlen=lines)
        except OSError:
            return ""
        return b"".join(tail).decode("utf-8", "replace")

    def port_taken(self) -> bool:
        """Whether the log since the last ``spawn`` says the port was already in use."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_start)
                return _ADDRESS_IN_USE in f.read()
        except OSError:
            return False

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> Self:
        """Start the JVM and return once it answers clients (idempotent while running).

        Raises ``TimeoutError`` (after killing it) if it does not answer within
        ``timeout`` seconds, ``RuntimeError`` if it exits, with the log's tail.
        """
        if self.running:
            return self
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self.spawn()
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                if self._fixed_port or not self.port_taken() or attempt == _PORT_ATTEMPTS:
                    raise
                logger.info("port %d was taken; retrying on another", self._port)
                self._port = free_ports(1)[0]
        raise AssertionError("unreachable")

    def spawn(self) -> int:
        """Start the JVM without waiting for it to answer; returns its pid."""
        if self._proc is not None and self.running:
            return self._proc.pid
        cp = classpath(self.jar_dir, self.conf_dir)
        self._prepare()
        self._close_log()
        self._log = self.log_path.open("ab")
        self._log_start = self._log.tell()
        cmd = [
            "java",
            *_JVM_ARGS,
            *self.jvm_args,
            "-cp",
            cp,
            self.main_class,
            str(self.config_path),
        ]
        # A new session keeps a Ctrl-C at the terminal from reaching the JVM first.
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.directory,
            env={**os.environ, **self.environment} if self.environment else None,
            start_new_session=True,
        )
        self._paused = False
        self.started_at = time.monotonic()
        if not self.detached:
            with _LIVE_LOCK:
                _LIVE[self._proc.pid] = self._proc
            _STARTED.add(self)
        logger.info("started %s (pid %d) in %s", self.name, self._proc.pid, self.directory)
        return self._proc.pid

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll until the server answers as ours; see ``start`` for the errors."""
        deadline = time.monotonic() + timeout
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                code = None if proc is None else proc.returncode
                self._reap()
                raise RuntimeError(
                    f"{self.name} exited with code {code} while starting; "
                    f"log {self.log_path}:\n{self.log_tail(40)}"
                )
            if self._is_ready():
                logger.info("%s ready after %.2fs", self.name, time.monotonic() - self.started_at)
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise TimeoutError(
                    f"{self.name} did not answer within {timeout}s; "
                    f"log {self.log_path}:\n{self.log_tail(40)}"
                )
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server with SIGTERM, falling back to SIGKILL after ``timeout``."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            if self._paused:
                proc.send_signal(signal.SIGCONT)  # a stopped JVM cannot act on SIGTERM
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                logger.warning("%s ignored SIGTERM for %ss; killing it", self.name, timeout)
                proc.kill()
                proc.wait()
        logger.info("stopped %s", self.name)
        self._reap()

    def terminate(self) -> None:
        """Send SIGTERM and return at once (``stop`` then waits for the exit)."""
        if self.running:
            self._signal(signal.SIGTERM)
            if self._paused:
                self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """Crash the server with SIGKILL (its clients see the connection reset)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        logger.info("killed %s", self.name)
        self._reap()

    def pause(self) -> None:
        """Freeze the server with SIGSTOP: connections stay open, nothing answers."""
        self._signal(signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Thaw a paused server with SIGCONT."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def restart(self, timeout: float = 30.0, *, hard: bool = False) -> Self:
        """Stop (or with ``hard``, kill) and start again on the same port and data."""
        if hard:
            self.kill()
        else:
            self.stop()
        fixed, self._fixed_port = self._fixed_port, True
        try:
            return self.start(timeout)
        finally:
            self._fixed_port = fixed

    def cleanup(self) -> None:
        """Stop the server and remove its directory if this object created it."""
        self.stop()
        self._close_log()
        _STARTED.discard(self)
        if self._own_dir:
            remove_temp_dir(self.directory)

    close = cleanup

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise RuntimeError(f"{self.name} is not running")
        self._proc.send_signal(sig)

    def _reap(self) -> None:
        if self._proc is not None:
            with _LIVE_LOCK:
                _LIVE.pop(self._proc.pid, None)
        self._proc = None
        self._paused = False
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        return f"<{type(self).__name__} {self.connect_string} {state} pid={self.pid}>"


class ZooKeeperServer(ZooKeeperProcess):
    """A standalone ZooKeeper server on a free loopback port.

    ``with ZooKeeperServer() as zk:`` starts it and, on exit, stops it and removes
    its temporary directory. ``tick_time`` (ms) is 200 so that session timeouts
    of 0.5–30 s are negotiable; ``extra_config`` adds or overrides ``zoo.cfg``
    entries. Raises ``ZooKeeperNotInstalledError`` on start if jars are missing.
    """

    @property
    def name(self) -> str:
        return f"zookeeper-standalone:{self.port}"
