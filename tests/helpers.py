"""Small test helpers: record a coordinator's connection events, wait for one, list our tasks,
take ZooKeeper away, compile the Java programs of the interop tests, read a server's
transaction log."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.abc
import pytest

from aiocoord import ConnectionEvent, ConnectionState, Coordinator
from aiocoord.testing import FaultProxy, ZooKeeperServer


class _Stated(Protocol):
    @property
    def state(self) -> Any: ...


E = TypeVar("E", bound=_Stated)
S = TypeVar("S")


class EventLog(Generic[E, S]):
    """Events of one source, in order as they arrive, and waiting for one in a given state."""

    def __init__(self) -> None:
        self.events: list[E] = []
        self._changed = anyio.Event()

    @property
    def states(self) -> list[S]:
        return [e.state for e in self.events]

    def _add(self, event: E) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, state: S, *, after: int = 0, timeout: float = 10.0) -> E:
        """The first event in `state` at index >= `after`; fails after `timeout` seconds."""
        with anyio.fail_after(timeout):
            while True:
                for event in self.events[after:]:
                    if event.state is state:
                        return event
                await self._changed.wait()

    def mark(self) -> int:
        return len(self.events)


class EventRecorder(EventLog[ConnectionEvent, ConnectionState]):
    """Every connection event of one coordinator, in order, as they arrive."""

    def __init__(self, coord: Coordinator) -> None:
        super().__init__()
        self.coord = coord

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        stream = self.coord.connection_events()
        self._add(await stream.__anext__())
        task_status.started()
        async for event in stream:
            self._add(event)


@asynccontextmanager
async def recording(coord: Coordinator) -> AsyncIterator[EventRecorder]:
    """Record `coord`'s events for the duration of the block."""
    recorder = EventRecorder(coord)
    async with anyio.create_task_group() as tg:
        await tg.start(recorder._run)
        yield recorder
        tg.cancel_scope.cancel()


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, every: float = 0.05
) -> None:
    """Poll an async condition until true (for state only visible by asking the server)."""
    with anyio.fail_after(timeout):
        while not await check():  # noqa: ASYNC110 - server state has no local event
            await anyio.sleep(every)


def aiocoord_tasks() -> set[asyncio.Task[Any]]:
    """The running tasks of aiocoord: owners ("aiocoord: ...") and their background tasks."""
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("aiocoord") and not t.done()}


class Door:
    """A way to ZooKeeper that can be closed (connections refused) and opened again."""

    def __init__(self, server: ZooKeeperServer) -> None:
        self._target = server.address
        self._proxy = FaultProxy(*self._target).start()
        self.port = self._proxy.port
        self.connect_string = self._proxy.connect_string

    def close(self) -> None:
        self._proxy.stop()

    def open(self) -> None:
        self._proxy.stop()
        self._proxy = FaultProxy(*self._target, port=self.port).start()


JAVA_DIR = Path("/usr/share/java")
JAVA_SOURCES = Path(__file__).parent / "interop"


def java_missing(jars: list[str]) -> str | None:
    """Why Java programs needing `jars` (in /usr/share/java) cannot be built here, or None."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH: install a JDK (openjdk-17-jdk-headless)"
    missing = [str(JAVA_DIR / name) for name in jars if not (JAVA_DIR / name).exists()]
    if missing:
        return f"needs {', '.join(missing)}: install libcurator-recipes-java and zookeeper"
    return None


def build_java(program: str, jars: list[str], out: Path, sources: Path = JAVA_SOURCES) -> str:
    """Compile ``<sources>/<program>.java`` into `out` against `jars` (in /usr/share/java);
    its class path.  Raises `subprocess.CalledProcessError` if javac fails (see `java_missing`)."""
    classpath = ":".join(str(JAVA_DIR / name) for name in jars)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", classpath, str(sources / f"{program}.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return f"{classpath}:{out}"


def compile_java(program: str, jars: list[str], out: Path) -> str:
    """Compile ``interop/<program>.java`` into `out` against `jars` (in /usr/share/java);
    its class path, or skip saying what is missing."""
    missing = java_missing(jars)
    if missing is not None:
        pytest.skip(f"{program} {missing}" if missing.startswith("needs") else missing)
    return build_java(program, jars, out)


async def bucketed_ids(client: Any, parent: str) -> list[str]:
    """The sorted names two levels under `parent` (a scheduler's ``jobs/`` or ``results/``)."""
    from aiocoord.errors import NoNodeError
    from aiocoord.scheduler._lookup import bucketed

    try:
        return sorted(await bucketed(client, parent))
    except NoNodeError:
        return []


_CREATE = re.compile(
    rb"(create2|createContainer|createTtl|create)(?: |:....)(/[\x21-\x2b\x2d-\x7e]*)", re.S
)
_TXN_JARS = ["zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-nop.jar"]


async def created_kinds(server: ZooKeeperServer) -> dict[str, str]:
    """The kind of request that last created each path, read from `server`'s transaction log.

    ``createContainer``, ``createTtl``, ``create2`` or ``create`` (a client
    sees a container's or a TTL node's stat as a plain node's): ZooKeeper's
    own ``TxnLogToolkit`` dumps the log, the creates inside a multi included.
    Paths are the server's (the chroot included).
    """
    if shutil.which("java") is None:
        pytest.skip("java not on PATH: install a JRE (openjdk-17-jre-headless)")
    classpath = ":".join(str(JAVA_DIR / jar) for jar in _TXN_JARS)
    kinds: dict[str, str] = {}
    logs = (server.data_dir / "version-2").glob("log.*")
    for log in sorted(logs, key=lambda log: int(log.suffix[1:], 16)):
        tool = "org.apache.zookeeper.server.persistence.TxnLogToolkit"
        done = await anyio.run_process(["java", "-cp", classpath, tool, "-d", str(log)])
        for kind, path in _CREATE.findall(done.stdout):
            kinds[path.decode()] = kind.decode()
    return kinds
