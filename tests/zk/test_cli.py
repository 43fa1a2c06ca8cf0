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
import re
import secrets
import subprocess
import sys
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import anyio
import pytest

import aiocoord
from aiocoord.cli import main
from aiocoord.cli.demo.crons import JobSpec, job_specs, scheduled_times
from aiocoord.cli.demo.firings import Run, check_exactly_once, check_no_two_runners, runs_of
from aiocoord.cli.demo.verdict import WorkerLog, check_once_windows, parse_log
from aiocoord.recipes.cas_lock import CasLock, once_per
from aiocoord.recipes.cron import FiringOutcome
from aiocoord.scheduler import Scheduler
from aiocoord.server import free_ports
from aiocoord.testing import ZooKeeperServer


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
    for command in ("demo", "zk", "inspect", "bench", "acl"):
        assert f"\n    {command} " in text
    assert "_demo-worker" not in text
    expected = {
        "demo": ["--workers", "--tasks", "--jobs", "SIGKILL", "verdict"],
        "zk": ["{start,stop,status,ensemble}", "--port", "--dir", "AIOCOORD_ZK_DIR", "per-user"],
        "inspect": ["--json", "--hosts", "leader latch", "CAS lock", "scheduler"],
        "bench": ["--quick", "--hosts", "--root", "cas_lock", "leader_latch", "benchmarks/"],
        "acl": ["{get,set}", "--version", "scheme:id:perms", "cdrwa", "AIOCOORD_SASL_*"],
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
    assert main(["bench", "--seconds", "0"]) == 1
    assert "--seconds must be more than 0 and at most 60" in capsys.readouterr().err
    assert main(["bench", "--root", "no-slash"]) == 1
    assert "invalid --root 'no-slash': must start with '/'" in capsys.readouterr().err
    assert main(["bench", "--participants", "1"]) == 1
    assert "--participants must be from 2 to 64" in capsys.readouterr().err
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
    done = aiocoord_cmd("bench", "--hosts", f"127.0.0.1:{port}", "--timeout", "0.5")
    assert done.returncode == 1
    assert one_line_error(done) == (
        f"aiocoord bench: cannot reach ZooKeeper at 127.0.0.1:{port} within 0.5s"
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
        assert code == 1
        assert err.startswith(f"aiocoord zk: port {port} on 127.0.0.1 is already in use by java")
        assert f"(pid {record['pid']})" in err and err.count("\n") == 1
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


def _fire(job: str, at: float, token: int, t: float, attempt: int = 1) -> dict[str, Any]:
    return {"ev": "fire", "job": job, "at": at, "token": token, "attempt": attempt, "t": t}


def _fired(job: str, at: float, t: float, attempt: int = 1) -> dict[str, Any]:
    return {"ev": "fired", "job": job, "at": at, "attempt": attempt, "t": t}


def test_verdict_catches_two_runners_and_bad_tokens() -> None:
    a = _log("a", _fire("j", 1.0, 10, 1.0), _fired("j", 1.0, 1.3))
    b = _log("b", _fire("j", 2.0, 11, 2.0))
    ok, runs = check_no_two_runners([a, b])
    assert ok.ok and a.bad_lines == 1
    assert runs[-1] == Run("j", 2.0, "b", 11, 1, 2.0, math.inf, "open")  # still running
    overlap = _log("c", _fire("j", 1.0, 12, 1.2))
    bad, _ = check_no_two_runners([a, overlap])
    assert not bad.ok and "before a's ended" in bad.detail
    stale = _log("d", _fire("j", 3.0, 5, 3.0), killed=3.1)
    assert runs_of(stale) == [Run("j", 3.0, "d", 5, 1, 3.0, 3.1, "killed")]  # cut by the kill
    bad, _ = check_no_two_runners([a, stale])
    assert not bad.ok and "token 0x5 after 0xa" in bad.detail


def _outcome(
    at: float,
    status: Literal["ok", "interrupted"] = "ok",
    worker: str = "a",
    token: int = 7,
    attempt: int = 1,
) -> FiringOutcome:
    when = datetime.fromtimestamp(at, UTC)
    return FiringOutcome("j", when, status, attempt=attempt, token=token, worker=worker)


def test_verdict_checks_every_scheduled_firing_ran_exactly_once() -> None:
    every = JobSpec("j", None, 1.0, retry_interrupted=False)
    retried = JobSpec("j", "* * * * * *", None, retry_interrupted=True)
    assert scheduled_times(every, 10.0, 13.0) == [10.0, 11.0, 12.0, 13.0]
    assert scheduled_times(retried, 10.0, 13.0) == [10.0, 11.0, 12.0, 13.0]
    assert scheduled_times(job_specs(2)[1], 60.0, 66.0) == [60.0, 62.0, 64.0, 66.0]
    times = (10.0, 11.0, 12.0)
    history = [_outcome(t) for t in times]
    runs = [Run("j", t, "a", 7, 1, t, t + 0.3, "ok") for t in times]
    good = check_exactly_once([every], {"j": history}, runs, history_bound=50)
    assert good.ok and "3 scheduled times of 1 jobs" in good.detail, good
    assert "none interrupted" in good.detail
    # A double run, a missing time, a run without an outcome, a full history: each fails.
    twice = [*runs, Run("j", 11.0, "b", 8, 1, 11.5, 11.8, "ok")]
    bad = check_exactly_once([every], {"j": history}, twice, history_bound=50)
    assert not bad.ok and "ran 2 times" in bad.detail
    gap = [history[0], history[2]]
    bad = check_exactly_once([every], {"j": gap}, runs, history_bound=50)
    assert not bad.ok and "never ran" in bad.detail
    bad = check_exactly_once([every], {"j": history}, runs[:2], history_bound=50)
    assert not bad.ok and "no completed run" in bad.detail
    bad = check_exactly_once([every], {"j": history}, runs, history_bound=3)
    assert not bad.ok and "history full" in bad.detail
    odd = [*runs, Run("j", 11.5, "a", 7, 1, 11.5, 11.8, "ok")]
    bad = check_exactly_once([every], {"j": history}, odd, history_bound=50)
    assert not bad.ok and "not a scheduled time" in bad.detail
    late = [*runs, Run("j", 13.0, "a", 7, 1, 13.0, 13.3, "ok")]  # ran, never recorded
    bad = check_exactly_once([every], {"j": history}, late, history_bound=50)
    assert not bad.ok and "no outcome in ZooKeeper" in bad.detail
    stopped = [*runs, Run("j", 13.0, "a", 7, 1, 13.0, 13.1, "cancelled")]  # the final stop
    assert check_exactly_once([every], {"j": history}, stopped, history_bound=50).ok
    # Interrupted (killed mid-firing): recorded once; run again only with retry_interrupted.
    killed = Run("j", 11.0, "a", 7, 1, 11.0, 11.1, "killed")
    cut = [runs[0], killed, runs[2]]
    recorded = [history[0], _outcome(11.0, "interrupted"), history[2]]
    ok = check_exactly_once([every], {"j": recorded}, cut, history_bound=50)
    assert ok.ok and "1 interrupted: j 00:00:11 (a killed mid-firing; recorded" in ok.detail
    again = [*recorded[:2], _outcome(11.0, "ok", "b", 9, 2), history[2]]
    rerun = [*cut, Run("j", 11.0, "b", 9, 2, 13.0, 13.3, "ok")]
    bad = check_exactly_once([every], {"j": again}, rerun, history_bound=50)
    assert not bad.ok and "outcomes" in bad.detail  # a second attempt without retry_interrupted
    ok = check_exactly_once([retried], {"j": again}, rerun, history_bound=50)
    assert ok.ok and "run again by b" in ok.detail, ok
    unstarted = [runs[0], runs[2]]  # claimed, then killed before its function started
    ok = check_exactly_once([every], {"j": recorded}, unstarted, history_bound=50)
    assert ok.ok and "cut off before it started; recorded interrupted" in ok.detail, ok


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
        "ok   no job ever ran on two workers at once",
        "ok   every task led by a live 1.1 worker at the end",
        "ok   every scheduled firing ran exactly once: ",
        "ok   every once-per-3s window ran exactly once",
        "ok   every job completed: 10/10",
        "PASSED",
    ):
        assert line in done.stdout, f"{line!r} missing\n{report}"
    # The exactly-once check covered every job over a stretch of firings.
    found = re.search(r"exactly once: (\d+) scheduled times of (\d+) jobs", done.stdout)
    assert found is not None and found.group(2) == "4" and int(found.group(1)) >= 12, report


def test_bench_measures_the_given_servers_and_cleans_up(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path
) -> None:
    """From a folder with no benchmarks/ in it: aiocoord's recipes only, on the given hosts."""
    hosts, root = zk_server.connect_string, f"{zk_chroot}/bench"
    args = ("--hosts", hosts, "--root", root, "--seconds", "0.2", "--contenders", "2")
    done = aiocoord_cmd("bench", *args, "--participants", "3", timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("benchmark ") :]
    rows = ("getData round trip (median)", "getData pipelined", "lock acquire+", "leader hand-off")
    for row in rows:
        line = next(line for line in table.splitlines() if line.startswith(row))
        assert float(line.split()[-1].replace(",", "")) > 0, line
    assert "kazoo" not in done.stdout and "aiozk" not in done.stdout

    async def left() -> list[str]:
        async with aiocoord.connect(hosts, session_timeout=4.0) as coord:
            try:
                return await coord.client.children(root)
            except aiocoord.NoNodeError:  # a container: the server may have removed it
                return []

    assert anyio.run(left) == []  # its run's node is deleted


# --- acl and "no access" --------------------------------------------------------------------------


def test_acl_get_and_set_and_no_access(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    from aiocoord.cli.acl import format_entry, parse_entry
    from aiocoord.zk import ACL

    hosts = zk_server.connect_string + zk_chroot
    alice = _env(AIOCOORD_AUTH="alice:wonderland", AIOCOORD_HOSTS=hosts)

    async def make() -> None:
        async with aiocoord.connect(hosts, auth="alice:wonderland") as coord:
            await coord.client.create("/open", b"hello", acl=aiocoord.zk.OPEN_ACL_UNSAFE)
            await coord.client.create("/open/private", b"alice's")  # creator-only

    anyio.run(make)
    done = aiocoord_cmd("acl", "get", "/open", "--hosts", hosts)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["world:anyone:cdrwa", "(ACL version 0)"]
    done = aiocoord_cmd(
        "acl",
        "set",
        "/open",
        "world:anyone:r",
        "sasl:bob:cdrwa",
        "--version",
        "0",
        "--hosts",
        hosts,
    )
    # This server has no SASL provider: it refuses the sasl scheme, and says so in one line.
    assert "invalid ACL" in one_line_error(done) and "scheme" in one_line_error(done)
    done = aiocoord_cmd(
        "acl",
        "set",
        "/open",
        "world:anyone:r",
        "ip:127.0.0.1:cdrwa",
        "--version",
        "0",
        "--hosts",
        hosts,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["world:anyone:r", "ip:127.0.0.1:cdrwa", "(ACL version 1)"]
    stale = aiocoord_cmd(
        "acl", "set", "/open", "world:anyone:r", "--version", "0", "--hosts", hosts
    )
    assert "no longer at version 0" in one_line_error(stale)
    done = aiocoord_cmd("acl", "get", "/open/private", "--json", env=alice)
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["aversion"] == 0 and shown["acl"][0]["scheme"] == "digest"
    assert shown["acl"][0]["perms"] == "cdrwa"
    # Another identity may not read the ACL, nor the node: one line, no traceback.
    denied = aiocoord_cmd("acl", "get", "/open/private", "--hosts", hosts)
    assert "no access to the ACL of /open/private" in one_line_error(denied)
    denied = aiocoord_cmd("inspect", "/open/private", "--hosts", hosts)
    assert one_line_error(denied).startswith("aiocoord inspect: no access to /open/private")
    listed = aiocoord_cmd("inspect", "/open", "--hosts", hosts)
    assert listed.returncode == 0, listed.stderr
    assert "private  [node] no access" in listed.stdout
    for bad in (["acl", "set", "/open"], ["acl", "get", "/open", "world:anyone:r"]):
        assert aiocoord_cmd(*bad, "--hosts", hosts).returncode == 1
    assert "unknown permission 'x'" in one_line_error(
        aiocoord_cmd("acl", "set", "/open", "world:anyone:x", "--hosts", hosts)
    )
    entry = ACL(ACL.READ | ACL.ADMIN, "digest", "alice:abc=")
    assert parse_entry(format_entry(entry)) == entry


def test_zk_start_on_a_taken_port_names_the_program_holding_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said only that the port was in use, not by what."""
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split(" port ")[1].split()[0])
        code = main(["zk", "start", "--dir", str(tmp_path / "zk"), "--port", str(port)])
        err = capsys.readouterr().err
        assert code == 1
        assert f"port {port} on 127.0.0.1 is already in use by python" in err
        assert f"(pid {server.pid})" in err and "http.server" in err and err.count("\n") == 1
    finally:
        server.kill()
        server.wait()


def test_unreachable_server_past_the_first_second_is_still_one_line() -> None:
    """With ZooKeeper down, ``inspect /`` printed a "connect attempt failed" line per attempt."""
    [port] = free_ports(1)
    done = aiocoord_cmd("inspect", "/", "--hosts", f"127.0.0.1:{port}", "--timeout", "3")
    assert done.returncode == 1
    assert one_line_error(done).startswith(
        f"aiocoord inspect: cannot reach ZooKeeper at 127.0.0.1:{port} within 3s"
    )
