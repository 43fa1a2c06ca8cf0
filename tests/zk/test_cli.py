"""The `aiocoord` command: help, one-line errors, the embedded server, inspect, demo, bench.

Commands run as subprocesses (``python -m aiocoord``), as a user runs them, except
the argument-parsing checks, which call `main()` directly.  Recipes for
``inspect`` are held live on the session's server while the command reads them.
The demo's verdict logic is checked on hand-made logs (a verdict that cannot
fail proves nothing), and the demo itself runs once, small, to a PASSED verdict.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.cli import main
from aiocoord.cli.demo.verdict import (
    Term,
    WorkerLog,
    check_no_two_leaders,
    check_once_windows,
    parse_log,
    terms_of,
)
from aiocoord.recipes.cas_lock import CasLock, once_per
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer
from aiocoord.testing._server import free_ports


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env.update(extra)
    return env


def aiocoord_cmd(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aiocoord", *args],
        env=env if env is not None else _env(),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The command failed with exactly one line on stderr and no traceback."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


# --- help and argument errors ---------------------------------------------------------------------


def test_help_lists_the_commands_and_each_has_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    for command in ("demo", "zk", "inspect", "bench"):
        assert f"\n    {command} " in text
    assert "_demo-worker" not in text
    expected = {
        "demo": ["--workers", "--tasks", "--jobs", "SIGKILL", "verdict"],
        "zk": ["{start,stop,status}", "--port", "--dir", "AIOCOORD_ZK_DIR", "per-user"],
        "inspect": ["--json", "--hosts", "leader latch", "CAS lock", "scheduler"],
        "bench": ["--quick", "kazoo", "aiozk"],
    }
    for command, words in expected.items():
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        for word in words:
            assert word in text, (command, word)


def test_user_errors_print_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    done = aiocoord_cmd("frobnicate")
    assert done.returncode == 2
    line = one_line_error(done)
    assert "invalid choice: 'frobnicate'" in line and "_demo-worker" not in line

    assert main(["inspect", "no-slash"]) == 1
    assert capsys.readouterr().err.strip() == (
        "aiocoord inspect: invalid path 'no-slash': must start with '/'"
    )
    assert main(["demo", "--workers", "1"]) == 1
    assert "--workers must be between 2 and 8" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["zk", "restart"])
    assert info.value.code == 2
    assert "invalid choice: 'restart'" in capsys.readouterr().err


def test_unreachable_server_is_one_line() -> None:
    [port] = free_ports(1)
    done = aiocoord_cmd("inspect", "/", "--hosts", f"127.0.0.1:{port}", "--timeout", "0.5")
    assert done.returncode == 1
    assert one_line_error(done).startswith(
        f"aiocoord inspect: cannot reach ZooKeeper at 127.0.0.1:{port} within 0.5s"
    )


# --- the embedded server ---------------------------------------------------------------------------


def test_zk_start_status_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process `main()` calls (the server itself is a separate JVM either way)."""
    monkeypatch.delenv("AIOCOORD_HOSTS", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env file around
    folder = str(tmp_path / "zk")
    [port] = free_ports(1)

    def run(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = run("zk", "start", "--dir", folder, "--port", str(port))
    try:
        assert code == 0 and f"ZooKeeper running at 127.0.0.1:{port}" in out
        record = json.loads((tmp_path / "zk" / "server.json").read_text())
        assert record["port"] == port
        code, out, _ = run("zk", "status", "--dir", folder)
        assert code == 0 and f"127.0.0.1:{port} (pid {record['pid']}" in out
        assert "answering (standalone)" in out
        code, out, _ = run("zk", "start", "--dir", folder)
        assert code == 0 and "already running" in out
        code, _, err = run("zk", "start", "--dir", str(tmp_path / "other"), "--port", str(port))
        assert (code, err) == (1, f"aiocoord zk: port {port} on 127.0.0.1 is already in use\n")
        # inspect finds the embedded server by itself (no AIOCOORD_HOSTS, no --hosts).
        code, out, _ = run("--loop", "asyncio", "inspect", "/", "--json", "--dir", folder)
        assert code == 0 and json.loads(out)["children"][0]["path"] == "/zookeeper"
    finally:
        code, out, _ = run("zk", "stop", "--dir", folder)
    assert code == 0 and f"stopped ZooKeeper at 127.0.0.1:{port}" in out
    assert not _running(record["pid"])
    code, out, _ = run("zk", "status", "--dir", folder)
    assert code == 3 and "no embedded ZooKeeper running" in out


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody has reaped yet does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# --- inspect ---------------------------------------------------------------------------------------


def test_inspect_recognises_each_recipe(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    """Live recipes under one path: inspect names each one and reads it as the recipe does."""
    hosts = zk_server.connect_string

    async def scenario() -> tuple[dict[str, Any], str, dict[str, Any]]:
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0)
                )
                for _ in range(2)
            ]
            latches = [
                await stack.enter_async_context(
                    aiocoord.leader_latch(c, "/app/leader", participant_id=f"pod-{i}")
                )
                for i, c in enumerate(coords)
            ]
            term = await latches[0].wait()
            lock = CasLock(coords[0], "/app/locks/report", owner="pod-0", lease=30)
            assert await lock.try_acquire()
            async with once_per(coords[1], "/app/once", 3600, owner="pod-1") as slot:
                assert slot.acquired
            workers = [aiocoord.Worker("1.0", id="w-old"), aiocoord.Worker("1.1", id="w-new")]
            tls = [
                await stack.enter_async_context(
                    aiocoord.task_leadership(c, "/app/tasks", worker=w, tasks=["a", "b"])
                )
                for c, w in zip(coords, workers, strict=True)
            ]
            with anyio.fail_after(10):
                while await tls[0].leaders() != {"a": "w-new", "b": "w-new"}:  # noqa: ASYNC110
                    await anyio.sleep(0.05)
            sched = Scheduler(coords[0], "/app/jobs")

            @sched.job("noop")
            async def noop(n: int) -> int:
                return n

            job = await sched.submit("noop", {"n": 1})  # no worker: stays pending
            await coords[0].client.create("/app/bad-lock", b'{"format":"aiocoord.cas-lock/9"}')
            done = await anyio.run_process(
                [sys.executable, "-m", "aiocoord", "inspect", "/app", "--json"],
                env=_env(AIOCOORD_HOSTS=f"{hosts}{zk_chroot}"),
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
            text = await anyio.run_process(
                [sys.executable, "-m", "aiocoord", "inspect", "/app"],
                env=_env(AIOCOORD_HOSTS=f"{hosts}{zk_chroot}"),
                check=False,
            )
            expect = {
                "token": term.token,
                "lock_token": lock.token,
                "job": job,
                "tokens": [(await c.client.get(n)).stat.czxid for c, n in _nodes(latches)],
            }
            await lock.release()
            return json.loads(done.stdout), text.stdout.decode(), expect

    info, text, expect = anyio.run(scenario)
    found = {child["path"]: child for child in _walk(info)}
    latch = found["/app/leader"]
    assert latch["kind"] == "leader_latch" and latch["layout"] == "curator"
    assert latch["leader"] == "pod-0"
    assert [p["id"] for p in latch["participants"]] == ["pod-0", "pod-1"]
    assert [p["token"] for p in latch["participants"]] == expect["tokens"]
    assert latch["participants"][0]["token"] == expect["token"]
    lock = found["/app/locks/report"]
    assert (lock["kind"], lock["held"], lock["owner"]) == ("cas_lock", True, "pod-0")
    assert lock["token"] == expect["lock_token"] and lock["lease_expires"]
    once = found["/app/once"]
    assert once["kind"] == "cas_lock" and once["held"] is False
    assert once["last_run"]["owner"] == "pod-1"
    tasks = found["/app/tasks"]
    assert tasks["kind"] == "task_leadership"
    assert {w["id"]: w["version"] for w in tasks["workers"]} == {"w-old": "1.0", "w-new": "1.1"}
    assert {t: v["leader"] for t, v in tasks["leaders"].items()} == {"a": "w-new", "b": "w-new"}
    jobs = found["/app/jobs"]
    assert jobs["kind"] == "scheduler" and jobs["pending"] == [
        {"id": expect["job"], "name": "noop", "status": "pending"}
    ]
    bad = found["/app/bad-lock"]
    assert bad["kind"] == "cas_lock" and "newer" in bad["error"]
    assert "[leader latch, curator layout] leader: pod-0" in text
    assert "[CAS lock] held, owner pod-0" in text
    assert "[task leadership] 2 workers, 2 tasks led" in text
    assert "task a" in text and "-> w-new (1.1)" in text
    assert "[scheduler]" in text and "pending: noop x1" in text


def _nodes(latches: list[aiocoord.LeaderLatch]) -> list[tuple[aiocoord.Coordinator, str]]:
    out = []
    for latch in latches:
        assert latch.node is not None
        out.append((latch._coord, latch.node))
    return out


def _walk(info: dict[str, Any]) -> list[dict[str, Any]]:
    out = [info]
    for child in info.get("children", []):
        out += _walk(child)
    return out


# --- the demo: its verdict, then a small run --------------------------------------------------------


def _log(worker: str, *records: dict[str, Any], killed: float | None = None) -> WorkerLog:
    text = "\n".join(json.dumps(r) for r in records) + '\n{"ev": "lead", "t"'  # a cut last line
    return parse_log(worker, "1.1", text, killed)


def test_verdict_catches_two_leaders_and_bad_tokens() -> None:
    a = _log(
        "a",
        {"ev": "lead", "task": "t", "token": 10, "t": 1.0},
        {"ev": "end", "task": "t", "token": 10, "t": 2.0},
    )
    b = _log("b", {"ev": "lead", "task": "t", "token": 11, "t": 2.5})
    ok, terms = check_no_two_leaders([a, b])
    assert ok.ok and a.bad_lines == 1
    assert terms[-1] == Term("t", "b", 11, 2.5, math.inf)  # still leading: open term
    overlap = _log("c", {"ev": "lead", "task": "t", "token": 12, "t": 1.5})
    bad, _ = check_no_two_leaders([a, b, overlap])
    assert not bad.ok and "before a stopped" in bad.detail
    stale = _log("d", {"ev": "lead", "task": "t", "token": 5, "t": 3.0}, killed=3.1)
    assert terms_of(stale) == [Term("t", "d", 5, 3.0, 3.1)]  # a killed worker's term ends
    bad, _ = check_no_two_leaders([a, stale])
    assert not bad.ok and "token 0x5 after 0xa" in bad.detail


def test_verdict_catches_missing_and_duplicate_windows() -> None:
    run = {"ev": "once", "window": 3.0, "token": 7, "t": 3.5}
    log = _log("a", run)
    nodes = {"3000": {"worker": "a", "token": 7}}
    assert check_once_windows(nodes, [log], interval=3, covered_from=2.0, covered_to=6.5).ok
    missing = check_once_windows(nodes, [log], interval=3, covered_from=2.0, covered_to=9.5)
    assert not missing.ok and "1 windows never ran" in missing.detail
    twice = _log("b", {**run, "token": 8})
    dup = check_once_windows(nodes, [log, twice], interval=3, covered_from=2, covered_to=6.5)
    assert not dup.ok and "ran 2 times" in dup.detail


@pytest.mark.slow
def test_demo_runs_to_a_passing_verdict(zk_server: ZooKeeperServer) -> None:
    namespace = f"/demo-{secrets.token_hex(4)}"
    env = _env(AIOCOORD_HOSTS=zk_server.connect_string, AIOCOORD_NAMESPACE=namespace)
    args = ("demo", "--workers", "2", "--tasks", "4", "--jobs", "10", "--windows", "1")
    done = aiocoord_cmd(*args, env=env, timeout=90)
    report = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, report
    for line in (
        "starting 2 workers of version 1.0: w1 w2",
        "rolling out version 1.1: starting w3 w4",
        "crash: SIGKILL w",
        "10/10 jobs done",
        "ok   no task ever had two leaders",
        "ok   every task led by a live 1.1 worker at the end",
        "ok   every once-per-3s window ran exactly once",
        "ok   every job completed: 10/10",
        "PASSED",
    ):
        assert line in done.stdout, f"{line!r} missing\n{report}"


@pytest.mark.slow
def test_bench_prints_one_table(tmp_path: Path) -> None:
    """From a folder with no benchmarks/ in it: the benchmarks ship in the package."""
    done = aiocoord_cmd("bench", "--seconds", "0.1", timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("benchmark ") :]
    for row in ("getData round trip", "getData pipelined", "lock acquire+", "leader hand-off"):
        line = next(line for line in table.splitlines() if line.startswith(row))
        assert line.count("x") >= 2 and "error" not in line, line
