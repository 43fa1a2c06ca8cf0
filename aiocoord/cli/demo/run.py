"""``aiocoord demo``: the project's main job, end to end, with a verdict.

1. ZooKeeper: ``AIOCOORD_HOSTS`` if set, else the embedded server (started for
   the demo and stopped after it, unless it already ran).
2. Worker processes of version 1.0 (``python -m aiocoord _demo-worker``, see
   `worker`) run a dozen `aiocoord.Cron` jobs (`crons`: every 1 to 3 seconds,
   each led by one worker through version-aware task leadership) and share a
   once-per-interval job.
3. Version 1.1 workers roll out: the tasks move to them (the newest version
   leads), then the 1.0 workers retire with SIGTERM.
4. One 1.1 worker is SIGKILLed, in the middle of a firing if it can be: its
   tasks stay put until its session expires, then fail over to the other 1.1
   workers, which run the firings due meanwhile, late.
5. A batch of scheduler jobs runs on the surviving workers.
6. The verdict, checked against ZooKeeper and the workers' logs (`verdict`,
   `firings`): no job ever ran on two workers at once, every task ends on a
   live 1.1 worker with the token its firings show, every scheduled firing of
   every cron job ran exactly once (the jobs' histories against the logs;
   interrupted firings listed), every once-per window ran exactly once, every
   job completed.  The exit status is 0 only if all of it holds.

The live view follows ZooKeeper itself (a recursive watch on the task
leadership nodes), so every hand-over is printed as the server saw it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ...errors import CoordError
from ...session import Coordinator, connect
from ...settings import Settings
from .._connect import embedded_dir
from .._run import run_async
from ..zk import UserError, local_zookeeper
from .collect import Proc, once_runs, open_firing, read_histories, read_logs
from .crons import FIRE_WORK, job_specs
from .firings import Run, check_exactly_once, check_no_two_runners
from .follow import NEW, OLD, Follower
from .verdict import (
    Check,
    check_final_leaders,
    check_jobs,
    check_once_windows,
)
from .view import View
from .worker import HISTORY, ONCE_LEASE, checksum, demo_scheduler

__all__ = ("run_demo",)


class DemoFailed(Exception):
    """A step did not happen in time; the demo stops and says which."""


def _check_args(args: argparse.Namespace) -> None:
    if not 2 <= args.workers <= 8:
        raise UserError("--workers must be between 2 and 8")
    if not 1 <= args.tasks <= 100:
        raise UserError("--tasks must be between 1 and 100")
    if not 0 <= args.jobs <= 1000:
        raise UserError("--jobs must be between 0 and 1000")
    if not 2.0 <= args.interval <= 60:
        raise UserError("--interval must be between 2 and 60 seconds")
    if not 1 <= args.windows <= 20:
        raise UserError("--windows must be between 1 and 20")
    if not 1.0 <= args.session_timeout <= 30:
        raise UserError("--session-timeout must be between 1 and 30 seconds")


def run_demo(args: argparse.Namespace) -> int:
    """The ``demo`` command; returns 0 only if the verdict holds."""
    _check_args(args)
    view = View()
    view.line(
        view.bold("aiocoord demo") + ": cluster-wide cron through a rolling upgrade and a crash"
    )
    with local_zookeeper(embedded_dir(args)) as settings:
        where = "AIOCOORD_HOSTS" if "hosts" in Settings().model_fields_set else "embedded"
        view.say(f"ZooKeeper at {settings.hosts} ({where})")
        return run_async(Demo(args, settings, view).run, args.loop)


class Demo:
    """One run of the demo: its worker processes, what ZooKeeper says, the story, the verdict."""

    def __init__(self, args: argparse.Namespace, settings: Settings, view: View) -> None:
        self.args = args
        self.settings = settings
        self.view = view
        self.root = f"/aiocoord-demo/{secrets.token_hex(4)}"
        self.specs = job_specs(args.tasks)
        self.tasks = [spec.name for spec in self.specs]
        self.run_dir = Path(tempfile.mkdtemp(prefix="aiocoord-demo-"))
        self.procs: dict[str, Proc] = {}
        self.zk = Follower(self.root, self.tasks, view)

    # --- workers -------------------------------------------------------------------------------

    def spawn(self, worker_id: str, version: str) -> None:
        log = self.run_dir / f"{worker_id}.jsonl"
        out = self.run_dir / f"{worker_id}.out"
        env = dict(os.environ)
        env["AIOCOORD_HOSTS"] = self.settings.hosts
        if self.settings.namespace:
            env["AIOCOORD_NAMESPACE"] = self.settings.namespace
        cmd = [sys.executable, "-m", "aiocoord", "--loop", self.args.loop, "_demo-worker"]
        cmd += ["--root", self.root, "--id", worker_id, "--version", version]
        cmd += ["--tasks", str(self.args.tasks), "--interval", str(self.args.interval)]
        cmd += ["--session-timeout", str(self.args.session_timeout), "--log", str(log)]
        with out.open("wb") as stream:
            popen = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=stream, stderr=subprocess.STDOUT, env=env
            )
        self.procs[worker_id] = Proc(worker_id, version, popen, log, out)

    def live(self) -> dict[str, Proc]:
        return {w: p for w, p in self.procs.items() if p.killed_at is None and not p.stopped}

    async def terminate(self, ids: list[str], timeout: float = 15.0) -> None:
        """SIGTERM the workers and wait for them to exit (SIGKILL after `timeout`)."""
        for worker_id in ids:
            self.procs[worker_id].popen.send_signal(signal.SIGTERM)
        for worker_id in ids:
            proc = self.procs[worker_id]
            with anyio.move_on_after(timeout):
                while proc.popen.poll() is None:  # noqa: ASYNC110 - a child's exit has no event here
                    await anyio.sleep(0.05)
            if proc.popen.poll() is None:
                proc.popen.kill()
                proc.popen.wait()
                raise DemoFailed(f"{worker_id} did not stop within {timeout:g}s of SIGTERM")
            proc.stopped = True

    async def kill(self, worker_id: str) -> float:
        proc = self.procs[worker_id]
        proc.popen.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(proc.popen.wait)
        proc.killed_at = time.time()
        return proc.killed_at

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.popen.poll() is None:
                proc.popen.kill()
                proc.popen.wait()

    def _crashed(self) -> str | None:
        for proc in self.live().values():
            if proc.popen.poll() is not None:
                tail = proc.out.read_text(errors="replace").strip().splitlines()[-3:]
                return f"worker {proc.id} exited with {proc.popen.returncode}: " + " | ".join(tail)
        return None

    # --- waiting on what ZooKeeper says -------------------------------------------------------

    async def until(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        with anyio.move_on_after(timeout):
            while not done():
                crashed = self._crashed()
                if crashed:
                    raise DemoFailed(crashed)
                changed = self.zk.changed
                with anyio.move_on_after(0.2):
                    await changed.wait()
            return
        raise DemoFailed(f"timed out after {timeout:g}s waiting until {what}")

    # --- the story -----------------------------------------------------------------------------

    async def run(self) -> int:
        view, args = self.view, self.args
        view.say(
            f"demo root {self.root}: {args.tasks} cron jobs firing every 1 to 3s, "
            f"a once-per-{args.interval:g}s job, {args.workers} workers per version, "
            f"logs in {self.run_dir}"
        )
        checks: list[Check] = []
        try:
            async with connect(self.settings, session_timeout=10.0) as coord:
                async with anyio.create_task_group() as tg:
                    await tg.start(self.zk.follow, coord)
                    checks = await self.story(coord)
                    tg.cancel_scope.cancel()
                if not args.keep:
                    with contextlib.suppress(CoordError):
                        await coord.client.delete_all(self.root)
        except DemoFailed as exc:
            view.clear_progress()
            view.say(view.red(f"demo failed: {exc}"))
            checks.append(Check(False, "the demo ran to the end", str(exc)))
        finally:
            self.kill_all()
        return self.verdict(checks)

    async def story(self, coord: Coordinator) -> list[Check]:
        view, args = self.view, self.args
        old = [f"w{i + 1}" for i in range(args.workers)]
        new = [f"w{i + 1 + args.workers}" for i in range(args.workers)]

        view.say(f"starting {len(old)} workers of version {OLD}: {' '.join(old)}")
        for worker_id in old:
            self.spawn(worker_id, OLD)
        await self.until(f"the {OLD} workers lead every task", lambda: self.zk.settled(old), 30)
        covered_from = time.time()
        view.say(f"every task has a leader ({self.zk.handovers} hand-overs so far):")
        view.leaders_table(self.zk.leaders, self.zk.workers)
        self.zk.quiet = False

        view.say(f"rolling out version {NEW}: starting {' '.join(new)}")
        self.zk.progress_label = f"tasks on {NEW}"
        for worker_id in new:
            self.spawn(worker_id, NEW)
        await self.until(
            f"every task moves to a {NEW} worker", lambda: self.zk.settled(old + new), 30
        )
        self.zk.progress_label = None
        view.clear_progress()
        view.say(f"all tasks on {NEW}; retiring the {OLD} workers with SIGTERM")
        await self.terminate(old)
        await self.until(f"the {OLD} workers are gone", lambda: self.zk.settled(new), 15)
        view.leaders_table(self.zk.leaders, self.zk.workers)

        counts = {w: sum(1 for v in self.zk.leaders.values() if v and v[0] == w) for w in new}
        victim = max(new, key=lambda w: counts[w])
        orphans = [t for t, v in self.zk.leaders.items() if v and v[0] == victim]
        firing = await self.mid_firing(victim)
        started = time.monotonic()
        await self.kill(victim)
        cut = open_firing(self.procs[victim]) if firing is not None else None
        during = f", in the middle of {cut.job}'s firing of {_hms(cut.at)}" if cut else ""
        view.say(
            f"crash: SIGKILL {victim} ({NEW}), leader of {len(orphans)} tasks{during}; they "
            f"fail over once its session expires (session timeout {args.session_timeout:g}s)"
        )
        survivors = [w for w in new if w != victim]
        await self.until(
            f"the tasks of {victim} fail over",
            lambda: self.zk.settled(survivors),
            args.session_timeout * 3 + 15,
        )
        view.say(
            f"{len(orphans)} tasks failed over {time.monotonic() - started:.1f}s after the kill"
        )
        view.leaders_table(self.zk.leaders, self.zk.workers)

        checks: list[Check] = []
        checks += await self.jobs(coord)

        # The final leaders, as ZooKeeper has them; each fires under its token before the end.
        snapshot = {t: await self.zk.read_leader(coord, t) for t in self.tasks}
        live = {w: v for w, v in self.zk.workers.items() if w in self.live()}
        # Let the once-per job run a few full windows with workers alive all through.
        interval = args.interval
        want = (math.ceil(covered_from / interval) + args.windows) * interval + ONCE_LEASE
        want = max(want, time.time() + max(s.period for s in self.specs) + FIRE_WORK + 1.0)
        view.say(f"letting the cron jobs and the once-per-{interval:g}s job run a little more")
        await anyio.sleep(want - time.time())

        covered_to = time.time()
        view.say(f"stopping the {NEW} workers")
        await self.terminate(list(self.live()))
        logs = read_logs(self.procs.values())
        no_two, firings = check_no_two_runners(logs)
        fired = {(r.job, r.worker, r.token) for r in firings}
        final = check_final_leaders(snapshot, self.tasks, live, NEW, fired)
        histories = await read_histories(coord, self.root, self.specs)
        exactly = check_exactly_once(self.specs, histories, firings, history_bound=HISTORY)
        runs = await once_runs(coord, self.root)
        once = check_once_windows(
            runs, logs, interval=interval, covered_from=covered_from, covered_to=covered_to
        )
        view.say(
            f"{len(firings)} cron firings and {len(runs)} once-per runs done by {len(logs)} workers"
        )
        return [no_two, final, exactly, once, *checks]

    async def mid_firing(self, worker_id: str) -> Run | None:
        """Wait (a few seconds at most) until `worker_id` is in the middle of a firing."""
        with anyio.move_on_after(max(s.period for s in self.specs) + 1.0):
            while (run := open_firing(self.procs[worker_id])) is None:  # noqa: ASYNC110
                await anyio.sleep(0.02)  # a child's log has no event to wait on
            return run
        return None

    async def jobs(self, coord: Coordinator) -> list[Check]:
        """Submit a batch of scheduler jobs and await every result, with a progress bar."""
        count = self.args.jobs
        if count == 0:
            return []
        client = demo_scheduler(coord, self.root, "client")
        texts = [f"job-{i:03d}" for i in range(count)]
        rounds = 1000
        view = self.view
        view.say(f"submitting {count} scheduler jobs (checksum, {rounds} rounds of SHA-256 each)")
        ids = {
            text: await client.submit("checksum", {"text": text, "rounds": rounds})
            for text in texts
        }
        results: dict[str, Any] = {}
        by_worker: dict[str, int] = {}

        async def wait(text: str) -> None:
            try:
                value = await client.result(ids[text])
            except CoordError as exc:
                value = {"error": str(exc)}
            results[text] = value.get("digest") if isinstance(value, dict) else value
            worker = value.get("worker", "?") if isinstance(value, dict) else "?"
            by_worker[worker] = by_worker.get(worker, 0) + 1
            view.progress("jobs done", len(results), count)

        started = time.monotonic()
        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                for text in texts:
                    tg.start_soon(wait, text)
        view.clear_progress()
        spread = ", ".join(f"{w} {n}" for w, n in sorted(by_worker.items()))
        view.say(
            f"{len(results)}/{count} jobs done in {time.monotonic() - started:.1f}s ({spread})"
        )
        expected = {text: checksum(text, rounds) for text in texts}
        return [check_jobs(count, results, expected)]

    def verdict(self, checks: list[Check]) -> int:
        view = self.view
        view.line()
        view.line(view.bold("verdict (checked against ZooKeeper and the workers' logs):"))
        for check in checks:
            mark = view.green("  ok  ") if check.ok else view.red(" FAIL ")
            view.line(f"{mark} {check.title}" + (f": {check.detail}" if check.detail else ""))
        passed = bool(checks) and all(c.ok for c in checks)
        if passed and not self.args.keep:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        elif not passed:
            view.line(f"workers' logs kept in {self.run_dir}")
        view.line(view.green("PASSED") if passed else view.red("FAILED"))
        return 0 if passed else 1


def _hms(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))
