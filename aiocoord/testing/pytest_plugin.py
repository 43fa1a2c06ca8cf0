"""pytest fixtures for code that coordinates through ZooKeeper (installed with aiocoord).

- ``zk_server``: one real standalone server for the whole test session.
- ``zk_ensemble``: one real three-member ensemble, started by the first test
  that asks for it.
- ``zk_chroot``: a fresh random path (``/t-<hex>``) for each test.
- ``coordinator``: a connected ``aiocoord`` coordinator on ``zk_server``, chrooted
  to ``zk_chroot``, with a 4 s session.
- ``anyio_backend``: every ``@pytest.mark.anyio`` test runs on asyncio and on uvloop.

When a test fails, the tail of every started server's log is attached to its
report (``--zk-log-lines``, default 200; 0 turns it off). With pytest-timeout
installed, tests with no timeout of their own get a 120 s ceiling.
"""

from __future__ import annotations

import importlib
import os
import secrets
import types
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import pytest

from ..server import ZooKeeperServer, started_processes
from ._ensemble import ZooKeeperEnsemble

DEFAULT_TIMEOUT = 120.0
_BACKEND_PLUGIN = "aiocoord-anyio-backend"
_BACKENDS = (
    pytest.param(("asyncio", {"use_uvloop": False}), id="asyncio"),
    pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aiocoord", "aiocoord ZooKeeper test servers")
    group.addoption(
        "--zk-log-lines",
        type=int,
        default=200,
        help="lines of each ZooKeeper server log to attach to a failed test (0: none)",
    )


@pytest.fixture(scope="module", params=_BACKENDS, name="anyio_backend")
def _anyio_backend(request: pytest.FixtureRequest) -> Any:
    return request.param


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ensemble: needs the 3-member ZooKeeper ensemble")
    config.addinivalue_line("markers", "slow: takes more than a few seconds")
    # pytest prefers the fixture of the plugin registered last. Entry-point plugins
    # (anyio's and this one) load in no fixed order, but pytest_configure runs after
    # all of them, so anyio_backend is registered from here. A conftest's own
    # anyio_backend still overrides it.
    if not config.pluginmanager.has_plugin(_BACKEND_PLUGIN):
        holder = types.ModuleType(_BACKEND_PLUGIN)
        holder.anyio_backend = _anyio_backend  # type: ignore[attr-defined]
        config.pluginmanager.register(holder, _BACKEND_PLUGIN)


def _timeout_configured(config: pytest.Config) -> bool:
    if config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT"):
        return True
    try:
        return bool(config.getini("timeout"))
    except ValueError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.has_plugin("timeout") or _timeout_configured(config):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT))


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
