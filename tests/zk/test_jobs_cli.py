"""``aiocoord jobs submit|info|result|cancel|retry|list`` against a real ZooKeeper.

Each command runs as a subprocess (``python -m aiocoord``), as a user runs it,
while this test's event loop runs the scheduler's worker (the handlers live
there, not in the command).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import pytest

import aiocoord
from aiocoord.cli.jobs_command import NOT_FINISHED
from aiocoord.scheduler import Scheduler
from aiocoord.server import free_ports
from aiocoord.testing import ZooKeeperServer

ROOT = "/cli/jobs"


@dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Cli:
    env: dict[str, str]

    async def __call__(self, *args: str) -> Done:
        with anyio.fail_after(60):
            done = await anyio.run_process(
                [sys.executable, "-m", "aiocoord", "jobs", *args], env=self.env, check=False
            )
        err = done.stderr.decode()
        assert "Traceback" not in err, err
        return Done(done.returncode, done.stdout.decode(), err)


def register(sched: Scheduler) -> None:
    @sched.job("add")
    async def add(a: int, b: int = 0) -> int:
        return a + b

    @sched.job("boom")
    async def boom() -> None:
        raise RuntimeError("no disk")


@asynccontextmanager
async def worker(zk_server: ZooKeeperServer, zk_chroot: str) -> AsyncIterator[Cli]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env.update(AIOCOORD_HOSTS=zk_server.connect_string, AIOCOORD_NAMESPACE=zk_chroot)
    async with aiocoord.connect(
        zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
    ) as coord:
        sched = Scheduler(coord, ROOT)
        register(sched)
        async with sched.worker(capacity=4):
            yield Cli(env)


def one_line(done: Done) -> str:
    lines = done.err.strip().splitlines()
    assert done.code != 0 and len(lines) == 1, done
    return lines[0]


@pytest.mark.anyio
async def test_submit_wait_info_and_list(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(90):
        async with worker(zk_server, zk_chroot) as cli:
            done = await cli("submit", "add", '{"a": 1, "b": 2}', "--root", ROOT, "--wait", "10")
            assert done.code == 0, done
            job_id, result = done.out.splitlines()
            assert json.loads(result) == 3

            done = await cli("info", job_id, "--root", ROOT, "--json")
            assert done.code == 0, done
            info = json.loads(done.out)
            assert info["id"] == job_id and info["status"] == "done" and info["attempts"] == 1

            done = await cli("info", job_id, "--root", ROOT)
            assert "status:" in done.out and "done" in done.out

            done = await cli("result", job_id, "--root", ROOT, "--json")
            assert done.code == 0 and json.loads(done.out)["result"] == 3

            done = await cli(
                "submit", "add", '{"a": 5}', "--root", ROOT, "--id", "later", "--delay", "60"
            )
            assert (done.code, done.out.strip()) == (0, "later"), done
            done = await cli("list", "--root", ROOT, "--json")
            listed = {j["id"]: j["status"] for j in json.loads(done.out)}
            assert listed == {job_id: "done", "later": "scheduled"}
            done = await cli("list", "--root", ROOT, "--status", "scheduled")
            assert done.out.split()[0] == "later" and len(done.out.splitlines()) == 1


@pytest.mark.anyio
async def test_result_waits_fails_and_cancel(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(90):
        async with worker(zk_server, zk_chroot) as cli:
            done = await cli(
                "submit", "add", '{"a": 1}', "--root", ROOT, "--id", "d", "--delay", "60"
            )
            assert done.code == 0, done
            done = await cli("result", "d", "--root", ROOT, "--wait", "0.2")
            assert done.code == NOT_FINISHED, done
            assert "not finished after 0.2s: scheduled" in done.out

            done = await cli("cancel", "d", "--root", ROOT)
            assert (done.code, done.out.strip()) == (0, "cancelled"), done
            assert "was cancelled" in one_line(await cli("result", "d", "--root", ROOT))

            done = await cli("submit", "boom", "{}", "--root", ROOT, "--id", "b", "--wait", "10")
            assert "job b failed: RuntimeError: no disk" in one_line(done)
            done = await cli("result", "b", "--root", ROOT, "--json")
            assert done.code == 1
            assert json.loads(done.out) == {
                "id": "b",
                "status": "failed",
                "type": "RuntimeError",
                "message": "no disk",
            }

            # Retry: a cancelled or failed job runs again, its attempts kept; a done one is refused.
            done = await cli("retry", "d", "--root", ROOT, "--json")
            assert done.code == 0, done
            assert json.loads(done.out)["status"] != "cancelled"
            done = await cli("retry", "b", "--root", ROOT)
            assert done.code == 0, done
            assert "job b failed" in one_line(
                await cli("result", "b", "--root", ROOT, "--wait", "10")
            )
            assert (
                json.loads((await cli("info", "b", "--root", ROOT, "--json")).out)["attempts"] == 2
            )
            done = await cli(
                "submit", "add", '{"a": 2}', "--root", ROOT, "--id", "ok", "--wait", "10"
            )
            assert done.code == 0, done
            refused = await cli("retry", "ok", "--root", ROOT)
            assert refused.code != 0 and "DONE" in one_line(refused), refused


@pytest.mark.anyio
async def test_clear_errors_for_names_payloads_and_ids(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(90):
        async with worker(zk_server, zk_chroot) as cli:
            line = one_line(await cli("submit", "resize", '{"a": 1}', "--root", ROOT))
            assert "no live worker of /cli/jobs offers a job named 'resize'" in line
            assert "(offered: add, boom)" in line
            line = one_line(await cli("submit", "add", "{a: 1}", "--root", ROOT))
            assert "the payload is not JSON" in line
            line = one_line(await cli("submit", "add", "[1, 2]", "--root", ROOT))
            assert "must be a JSON object" in line
            # The worker checks the payload against its handler; --wait shows its verdict.
            line = one_line(
                await cli("submit", "add", '{"a": "x"}', "--root", ROOT, "--wait", "10")
            )
            assert "ValidationError" in line and "a" in line
            line = one_line(await cli("submit", "add", "{}", "--root", ROOT, "--id", "/bad"))
            assert "job_id" in line
            # A bad --delay or --status is a bad command line: exit status 2 (it was 1).
            for delay in ("-1", "nan", "soon"):
                bad = await cli("submit", "add", "{}", "--root", ROOT, "--delay", delay)
                assert bad.code == 2, bad
                assert "--delay: must be a finite number of seconds >= 0" in one_line(bad)
            line = one_line(await cli("result", "x", "--root", ROOT, "--wait", "nan"))
            assert "--wait must be a number of seconds" in line
            line = one_line(await cli("info", "nope", "--root", ROOT))
            assert "no job 'nope'" in line
            line = one_line(await cli("cancel", "nope", "--root", ROOT))
            assert "no job 'nope'" in line
            bad = await cli("list", "--root", ROOT, "--status", "lost")
            assert bad.code == 2, bad
            assert "'lost' is not one of pending, scheduled" in one_line(bad)
            line = one_line(await cli("list", "--root", "no//path"))
            assert "invalid --root" in line
            [port] = free_ports(1)
            line = one_line(
                await cli(
                    "info", "x", "--root", ROOT, "--hosts", f"127.0.0.1:{port}", "--timeout", "0.5"
                )
            )
            assert f"cannot reach ZooKeeper at 127.0.0.1:{port} within 0.5s" in line
            done = await cli("submit", "add")
            assert done.code == 2 and "required" in done.err


@pytest.mark.anyio
async def test_submit_with_the_apps_handlers_checks_the_payload_before_writing(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    handlers = "tests.zk.test_jobs_cli:register"
    with anyio.fail_after(90):
        async with worker(zk_server, zk_chroot) as cli:
            done = await cli(
                "submit", "add", '{"a": 4}', "--root", ROOT, "--handlers", handlers, "--wait", "10"
            )
            assert done.code == 0, done
            assert json.loads(done.out.splitlines()[1]) == 4
            before = (await cli("list", "--root", ROOT, "--json")).out
            line = one_line(
                await cli("submit", "add", '{"a": "x"}', "--root", ROOT, "--handlers", handlers)
            )
            assert "payload for job 'add' is invalid" in line and "a; " in line
            line = one_line(
                await cli(
                    "submit", "add", '{"a": 1, "c": 2}', "--root", ROOT, "--handlers", handlers
                )
            )
            assert "payload for job 'add' is invalid" in line and "c; " in line
            line = one_line(
                await cli("submit", "resize", "{}", "--root", ROOT, "--handlers", handlers)
            )
            assert "no job 'resize' is registered here (registered: 'add', 'boom')" in line
            assert (await cli("list", "--root", ROOT, "--json")).out == before  # nothing written
            for spec, said in (
                ("tests.zk.test_jobs_cli", "give MODULE:FUNCTION"),
                ("tests.zk.nowhere:register", "cannot import tests.zk.nowhere"),
                ("tests.zk.test_jobs_cli:absent", "has no function 'absent'"),
            ):
                line = one_line(
                    await cli("submit", "add", "{}", "--root", ROOT, "--handlers", spec)
                )
                assert said in line, line


@pytest.mark.anyio
async def test_list_with_an_after_that_is_no_job_id_is_a_clear_error(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with worker(zk_server, zk_chroot) as cli:
            line = one_line(await cli("list", "--root", ROOT, "--after", "a/b"))
            assert "--after" in line and "not valid" in line
