"""pytest fixtures for code that coordinates through ZooKeeper (installed with aiocoord).

Installing aiocoord adds these fixtures, two markers (``ensemble``, ``slow``)
and one option; it changes none of a project's own tests until the project
asks for more in its pytest configuration (see docs/contributing.md):

- ``zk_server``: one real standalone server for the whole test session.
- ``zk_ensemble``: one real three-member ensemble, started by the first test
  that asks for it.
- ``zk_chroot``: a fresh random path (``/t-<hex>``) for each test.
- ``coordinator``: a connected ``aiocoord`` coordinator on ``zk_server``, chrooted
  to ``zk_chroot``, with a 4 s session.

When a test fails, the tail of every server it started has its log attached
to the report (``--zk-log-lines``, default 200; 0 turns it off).

Opting in, in the ini file (``[tool.pytest.ini_options]`` of pyproject.toml):

- ``aiocoord_loops = asyncio uvloop``: every ``@pytest.mark.anyio`` test runs
  on each of these event loops (asyncio, and asyncio with uvloop's loop).
  Unset, anyio's own ``anyio_backend`` (asyncio) is left alone.
- ``aiocoord_timeout = 120``: with pytest-timeout installed and no timeout of
  its own configured, each test without a ``timeout`` marker gets this
  ceiling in seconds.
"""

from __future__ import annotations

import importlib
import math
import os
import secrets
import types
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest

from ..server import ZooKeeperServer, started_processes
from ._ensemble import ZooKeeperEnsemble

_BACKEND_PLUGIN = "aiocoord-anyio-backend"
LOOPS: dict[str, tuple[str, dict[str, bool]]] = {
    "asyncio": ("asyncio", {"use_uvloop": False}),
    "uvloop": ("asyncio", {"use_uvloop": True}),
}
"""The event loops ``aiocoord_loops`` may name, as anyio backends."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiocoord", "aiocoord ZooKeeper test servers")
    group.addoption(
        "--zk-log-lines",
        type=int,
        default=200,
        help="lines of each ZooKeeper server log to attach to a failed test (0: none)",
    )
    parser.addini(
        "aiocoord_loops",
        type="args",
        default=[],
        help="event loops every @pytest.mark.anyio test runs on: asyncio, uvloop "
        "(default: leave anyio_backend alone)",
    )
    parser.addini(
        "aiocoord_timeout",
        default="",
        help="seconds: a ceiling for each test without a timeout of its own "
        "(needs pytest-timeout; default: none)",
    )


def loops_of(config: pytest.Config) -> list[str]:
    """The event loops ``aiocoord_loops`` names, checked: `pytest.UsageError` for an unknown one."""
    names = [str(name) for name in config.getini("aiocoord_loops")]
    unknown = [name for name in names if name not in LOOPS]
    if unknown:
        raise pytest.UsageError(
            f"aiocoord_loops: unknown event loop {unknown[0]!r} (known: {', '.join(LOOPS)})"
        )
    return list(dict.fromkeys(names))


def timeout_of(config: pytest.Config) -> float | None:
    """The ceiling ``aiocoord_timeout`` asks for, or None; `pytest.UsageError` if it is no number."""
    text = str(config.getini("aiocoord_timeout")).strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise pytest.UsageError(f"aiocoord_timeout: must be a number of seconds > 0, not {text!r}")
    return seconds


def _backend_fixture(loops: list[str]) -> Any:
    params = [pytest.param(LOOPS[name], id=name) for name in loops]

    @pytest.fixture(scope="module", params=params, name="anyio_backend")
    def anyio_backend(request: pytest.FixtureRequest) -> Any:
        return request.param

    return anyio_backend


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ensemble: needs the 3-member ZooKeeper ensemble")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    # A bad value fails the run now, not after collection.
    if timeout_of(config) is not None and not config.pluginmanager.has_plugin("timeout"):
        config.issue_config_time_warning(
            pytest.PytestConfigWarning("aiocoord_timeout needs pytest-timeout, not installed"), 2
        )
    loops = loops_of(config)
    # pytest prefers the fixture of the plugin registered last. Entry-point plugins
    # (anyio's and this one) load in no fixed order, but pytest_configure runs after
    # all of them, so anyio_backend is registered from here. A conftest's own
    # anyio_backend still overrides it.
    if loops and not config.pluginmanager.has_plugin(_BACKEND_PLUGIN):
        holder = types.ModuleType(_BACKEND_PLUGIN)
        holder.anyio_backend = _backend_fixture(loops)  # type: ignore[attr-defined]
        config.pluginmanager.register(holder, _BACKEND_PLUGIN)


def _timeout_configured(config: pytest.Config) -> bool:
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return True
    try:
        return bool(config.getini("timeout"))
    except ValueError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ceiling = timeout_of(config)
    if ceiling is None or not config.pluginmanager.has_plugin("timeout"):
        return
    if _timeout_configured(config):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(ceiling))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    lines = int(item.config.getoption("zk_log_lines"))
    if report.failed and lines > 0:
        for proc in started_processes():
            tail = proc.log_tail(lines)
            if tail:
                title = f"{proc.name} log ({proc.log_path}), last {lines} lines"
                report.sections.append((title, tail))
    return report


@pytest.fixture(scope="session")
def zk_server() -> Iterator[ZooKeeperServer]:
    """A real standalone ZooKeeper server, started once per test session."""
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture(scope="session")
def zk_ensemble() -> Iterator[ZooKeeperEnsemble]:
    """A real three-member ensemble, started by the first test that asks for it.

    Shared by the whole session: a test that kills or pauses members must bring
    them back (``member.start()``) before it ends.
    """
    with ZooKeeperEnsemble(3) as ensemble:
        yield ensemble


@pytest.fixture
def zk_chroot() -> str:
    """A fresh random path for one test, such as ``/t-3f9c2a1b7d4e``."""
    return f"/t-{secrets.token_hex(6)}"


@pytest.fixture
async def coordinator(zk_server: ZooKeeperServer, zk_chroot: str) -> AsyncIterator[Any]:
    """A connected coordinator on ``zk_server`` under ``zk_chroot`` (4 s session)."""
    aiocoord: Any = importlib.import_module("aiocoord")
    async with aiocoord.connect(
        zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
    ) as coord:
        yield coord
