"""Every scheduled time runs exactly once: worker processes in two versions, a SIGKILL, an expiry.

Real processes (`_cron_worker`), each with its own session, run two
1-second jobs for 40 firings or more: ``plain`` (``every=1``) and ``retry``
(the six-field expression ``* * * * * *``, ``retry_interrupted=True``).  Two
1.0 workers start; a 1.1 worker joins (the rolling upgrade: both jobs move
to it) and is SIGKILLed while both jobs hang in a firing; the 1.0 workers
take over once its session expires.  A second 1.1 worker joins, a 1.0 one
retires, then the 1.1 worker's session is expired while both jobs hang in a
firing; the remaining 1.0 worker takes over until the 1.1 worker is back
with a new session.  At most three workers run at once.  From the jobs'
histories (read from ZooKeeper) and the processes' own logs (their stdout):
every scheduled time from the first firing to the last ran once, except the
interrupted ones (the two hung firings, and any a hand-over cancelled),
which ``plain`` records interrupted (started once) and ``retry`` runs again
(started twice).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import aiocoord
from aiocoord import Cron, Worker
from aiocoord.recipes.cron import FiringOutcome
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.anyio

WORKER = Path(__file__).with_name("_cron_worker.py")
ROOT = "/app/cron"  # as in _cron_worker
JOBS = ("plain", "retry")
FIRINGS = 40


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": True})


@dataclass
class Fleet:
    """The worker processes and every line they wrote, in the order read."""

    hosts: str
    chroot: str
    logs: Path
    tg: anyio.abc.TaskGroup
    procs: dict[str, anyio.abc.Process] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    changed: anyio.Event = field(default_factory=anyio.Event)

    async def until(self, check: Callable[[], bool], timeout: float) -> None:
        with anyio.fail_after(timeout):
            while not check():
                await self.changed.wait()

    def lines(self, ev: str, worker: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e["ev"] == ev and worker in (None, e["worker"])]

    def starts(self, job: str, worker: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.lines("start", worker) if e["job"] == job]

    async def start(self, worker: str, version: str) -> None:
        with (self.logs / f"{worker}.err").open("wb") as err:
            proc = await anyio.open_process(
                [sys.executable, str(WORKER), self.hosts, self.chroot, worker, version],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.procs[worker] = proc
        assert proc.stdout is not None
        self.tg.start_soon(self._read, worker, proc.stdout)
        await self.until(lambda: bool(self.lines("ready", worker)), timeout=20)

    async def _read(self, worker: str, stream: anyio.abc.ByteReceiveStream) -> None:
        lines = BufferedByteReceiveStream(stream)
        while True:
            try:
                line = await lines.receive_until(b"\n", 1 << 16)
            except (anyio.EndOfStream, anyio.IncompleteRead):
                return
            self.events.append({**json.loads(line), "worker": worker})
            self.changed.set()
            self.changed = anyio.Event()

    async def send(self, worker: str, command: str) -> None:
        stdin = self.procs[worker].stdin
        assert stdin is not None
        await stdin.send(command.encode() + b"\n")

    async def kill(self, worker: str) -> None:
        self.procs[worker].kill()  # SIGKILL
        await self.procs[worker].wait()

    async def stop(self, worker: str) -> None:
        """Close its stdin: it leaves the cron and exits."""
        proc = self.procs[worker]
        assert proc.stdin is not None
        await proc.stdin.aclose()
        with anyio.fail_after(15):
            assert await proc.wait() == 0, (self.logs / f"{worker}.err").read_text()


@asynccontextmanager
async def fleet(server: ZooKeeperServer, chroot: str, logs: Path) -> AsyncIterator[Fleet]:
    async with anyio.create_task_group() as tg:
        f = Fleet(server.connect_string, chroot, logs, tg)
        try:
            yield f
        finally:
            with anyio.CancelScope(shield=True):
                for proc in f.procs.values():
                    if proc.returncode is None:
                        proc.kill()
                        await proc.wait()
            tg.cancel_scope.cancel()


async def hang_then(f: Fleet, worker: str) -> dict[str, float]:
    """Make the next firing of each job hang on `worker`; the times that hang."""
    await f.send(worker, "hang")
    await f.until(lambda: {e["job"] for e in f.lines("hang", worker)} == set(JOBS), timeout=10)
    return {e["job"]: e["at"] for e in f.lines("hang", worker)}


async def test_every_firing_runs_once_across_processes_an_upgrade_a_kill_and_an_expiry(
    zk_server: ZooKeeperServer, zk_chroot: str, tmp_path: Path
) -> None:
    with anyio.fail_after(120):
        async with fleet(zk_server, zk_chroot, tmp_path) as f:
            await f.start("old-1", "1.0")
            await f.start("old-2", "1.0")
            await f.until(lambda: all(len(f.starts(j)) >= 5 for j in JOBS), timeout=20)

            await f.start("new-1", "1.1")  # the rolling upgrade: both jobs move to 1.1
            await f.until(lambda: all(len(f.starts(j, "new-1")) >= 3 for j in JOBS), timeout=20)
            killed = await hang_then(f, "new-1")
            await f.kill("new-1")  # mid-firing
            # The 1.0 workers take over once its session expires, and run the times since.
            await f.until(
                lambda: all(
                    any(e["at"] > killed[j] and e["version"] == "1.0" for e in f.starts(j))
                    for j in JOBS
                ),
                timeout=20,
            )

            await f.start("new-2", "1.1")
            await f.until(lambda: all(len(f.starts(j, "new-2")) >= 2 for j in JOBS), timeout=20)
            await f.stop("old-1")  # retired
            expired = await hang_then(f, "new-2")
            await f.send("new-2", "expire")
            await f.until(lambda: bool(f.lines("expired", "new-2")), timeout=15)
            assert f.lines("expired", "new-2")[0]["done"] is True
            # old-2 leads until new-2 is back with a new session and takes the jobs again.
            await f.until(
                lambda: all(
                    any(e["at"] > expired[j] + 2 for e in f.starts(j, "new-2")) for j in JOBS
                ),
                timeout=30,
            )
            await f.until(
                lambda: all(len({e["at"] for e in f.starts(j)}) >= FIRINGS + 2 for j in JOBS),
                timeout=40,
            )
            for worker in ("old-2", "new-2"):
                await f.stop(worker)
            async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
                reader = Cron(coord, ROOT, worker=Worker("0", id="reader"))
                histories = {j: await reader.history(j) for j in JOBS}

    for job in JOBS:
        check_job(job, histories[job], f, killed[job], expired[job])


def check_job(
    job: str, history: list[FiringOutcome], f: Fleet, killed: float, expired: float
) -> None:
    """What ZooKeeper recorded for `job` against what the processes logged."""
    at = [h.scheduled_at.timestamp() for h in history]
    distinct = sorted(set(at))
    # Every scheduled time from the first to the last, none left out.
    assert all(math.isclose(b - a, 1.0) for a, b in itertools.pairwise(distinct)), job
    assert len(distinct) >= FIRINGS, (job, len(distinct))
    # Every start in the logs up to the last recorded time is a recorded time (the
    # firings the final stop cancelled have no outcome).
    starts = [e for e in f.starts(job) if e["at"] <= distinct[-1]]
    assert {e["at"] for e in starts} == set(distinct), job
    ends = {(e["worker"], e["at"], e["attempt"]): e["ev"] for e in f.events if e.get("job") == job}
    interrupted = {h.scheduled_at.timestamp() for h in history if h.status == "interrupted"}
    # The hung firings: the SIGKILLed one never ended, the expired one was cancelled.
    assert {killed, expired} <= interrupted and len(interrupted) <= 5, (job, interrupted)
    assert ends[("new-1", killed, 1)] == "hang", job  # its last word: killed in the firing
    assert ends[("new-2", expired, 1)] == "cancelled", job
    for t in distinct:
        entries = [(h.status, h.attempt, h.worker, h.token) for h in history if at_(h) == t]
        ran = [(e["attempt"], e["worker"], e["token"]) for e in starts if e["at"] == t]
        outcomes = [(status, attempt) for status, attempt, _w, _k in entries]
        if t not in interrupted:  # ran once, recorded once
            assert outcomes == [("ok", 1)], (job, t, entries)
        elif job == "plain":  # recorded interrupted, never run again
            assert outcomes == [("interrupted", 1)], (job, t, entries)
        else:  # run again until an attempt ended
            n = len(entries)
            assert n >= 2 and outcomes == [("interrupted", k) for k in range(1, n)] + [("ok", n)]
        # Each attempt started at most once, by the worker and under the token recorded
        # (an interrupted one may have been cut before its function started); the one
        # recorded ok ran to its end.
        assert sorted(a for a, _w, _k in ran) == sorted({a for a, _w, _k in ran}), (job, t, ran)
        assert {a for a, _w, _k in ran} <= {a for _s, a, _w, _k in entries}, (job, t, ran)
        for status, attempt, worker, token in entries:
            mine = [(w, k) for a, w, k in ran if a == attempt]
            assert mine == [(worker, token)] or (status, mine) == ("interrupted", []), (job, t)
            if status == "ok":
                assert ends[(worker, t, attempt)] == "end", (job, t)
    assert [h for h in history if h.status not in ("ok", "interrupted")] == []
    by_time = {at_(h): h for h in history if h.attempt == 1}
    assert (by_time[killed].worker, by_time[killed].version) == ("new-1", "1.1")
    assert (by_time[expired].worker, by_time[expired].version) == ("new-2", "1.1")
    if job == "retry":  # the hung firings ran twice in all: attempt 2 by the next leader
        for t in (killed, expired):
            assert sorted(e["attempt"] for e in starts if e["at"] == t) == [1, 2], (job, t)
    else:
        for t in (killed, expired):
            assert [e["attempt"] for e in starts if e["at"] == t] == [1], (job, t)
    # Who ran them: 1.0 first, 1.1 last; each later leader has a larger fencing token.
    versions = [h.version for h in history if h.status == "ok"]
    assert versions[0] == "1.0" and versions[-1] == "1.1", job
    tokens = [h.token or 0 for h in history]
    assert tokens == sorted(tokens), job


def at_(h: FiringOutcome) -> float:
    return h.scheduled_at.timestamp()
