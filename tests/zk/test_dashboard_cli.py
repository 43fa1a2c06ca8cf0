"""``aiocoord dashboard``: it serves the page until interrupted, and its errors are one line."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.testing import ZooKeeperServer
from tests.browser import ROOT, Page, chromium, needs_chromium, value

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    return env | extra


@needs_chromium
@pytest.mark.anyio
async def test_command_serves_the_dashboard_until_interrupted(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str, driver: Any
) -> None:
    page = Page(driver)
    hosts = f"{zk_server.connect_string}{zk_chroot}"
    command = [sys.executable, "-m", "aiocoord", "--loop", "asyncio", "dashboard", "/app"]
    with anyio.fail_after(30):
        async with aiocoord.leader_latch(coordinator, "/app/leader", participant_id="pod-cli"):
            proc = await anyio.open_process(
                [*command, "--hosts", hosts, "--port", "0"], env=_env(PYTHONPATH=str(ROOT))
            )
            async with proc:
                assert proc.stdout is not None
                first = b""
                async for chunk in proc.stdout:
                    first += chunk
                    if b"\n" in first:
                        break
                line = first.decode().splitlines()[0]
                assert line.startswith(f"dashboard of /app on {hosts}: http://127.0.0.1:")
                url = line.split(": ", 1)[1].split()[0]
                await page.open(url)
                await page.wait_text(value("/app/leader", "leader"), "pod-cli")
                proc.send_signal(signal.SIGINT)
                assert await proc.wait() == 130


def test_command_errors_are_one_line(zk_server: ZooKeeperServer) -> None:
    busy = socket.create_server(("127.0.0.1", 0))
    with busy:
        port = busy.getsockname()[1]
        done = _run("dashboard", "/", "--hosts", zk_server.connect_string, "--port", str(port))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"aiocoord dashboard: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    done = _run("dashboard", "nope")
    assert done.stderr.strip() == "aiocoord dashboard: invalid path 'nope': must start with '/'"
    no_fastapi = (
        "import sys; sys.modules['fastapi'] = None; from aiocoord.cli import main; "
        "sys.exit(main(['dashboard', '/']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", no_fastapi], env=_env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "needs the fastapi extra" in done.stderr and "aiocoord[fastapi]" in done.stderr


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aiocoord", *args],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
