"""The task hand-over benchmark's runs: worker processes, the bystander, one hand-over.

`hand_over` starts three worker processes of version 1.0 leading the tasks,
then one of 1.1 that takes them all, and measures what `tasks` reports; with
`observe`, a fifth process watches the leader nodes.  Processes are started
with ``spawn`` and run the entry points here (`worker_main`, `observer_main`),
so this module must stay importable by name.
"""

from __future__ import annotations

import gc
import itertools
import multiprocessing
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

import aiocoord
from aiocoord import LeadershipLost
from aiocoord.recipes.task_leadership import (
    TaskLeadership,
    Worker,
    choose_leaders,
    describe_task_leadership,
    task_leadership,
)
from aiocoord.zk.paths import basename

from .latch_runs import packets

__all__ = (
    "GC_FREEZE",
    "ROOT",
    "Result",
    "freeze_heap",
    "hand_over",
    "join_all",
    "observer_main",
    "worker_main",
)

ROOT = "/bench"
Body = tuple[str, str, float, float | None]  # task, worker, start, end


@dataclass
class Result:
    join_to_all_led: float
    gaps: list[float]
    overlaps: int
    settle: float
    # Seen by a bystander (runs with an observer): from each old leader node's
    # deletion (the release) to the new one's creation, and to the new body's start.
    released_to_created: list[float] = field(default_factory=list)
    released_to_led: list[float] = field(default_factory=list)
    # Server requests from the new worker's start to its last body's start (pings included).
    requests: int = 0


# --- one worker process ---------------------------------------------------------------------

GC_FREEZE = "AIOCOORD_BENCHGC_FREEZE"  # set by main() for the processes it starts


def freeze_heap() -> None:
    """Move what start-up allocated out of the collector's reach (`gc.freeze`).

    Without it a full collection now and then lands in the middle of a
    hand-over and stalls one process for 30-40 ms on a 2-core VM (seen in
    traces), whatever the code does; latency-sensitive services freeze after
    start-up for the same reason.  Every process of the run does it, peers
    included, unless ``--no-gc-freeze``.
    """
    if os.environ.get(GC_FREEZE) == "1":
        gc.freeze()


async def _worker(
    hosts: str,
    chroot: str,
    wid: str,
    version: str,
    tasks: list[str],
    settle: float,
    stop: Any,
    out: Any,
) -> None:
    bodies: list[list[Any]] = []
    running: set[str] = set()
    reported = False

    async def lead_loop(tl: TaskLeadership, task: str) -> None:
        nonlocal reported
        while True:
            try:
                async with tl.lead(task):
                    body = [task, wid, time.monotonic(), None]
                    bodies.append(body)
                    running.add(task)
                    if not reported and len(running) == len(tasks):
                        reported = True
                        out.put(("all led", wid, body[2]))
                    try:
                        await anyio.sleep_forever()
                    finally:
                        body[3] = time.monotonic()
                        running.discard(task)
            except LeadershipLost:
                continue
            except RuntimeError:
                return  # closed

    async with (
        aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord,
        task_leadership(
            coord, ROOT, worker=Worker(version, id=wid), tasks=tasks, settle=settle
        ) as tl,
        anyio.create_task_group() as tg,
    ):
        out.put(("registered", wid, time.monotonic()))
        for task in tasks:
            tg.start_soon(lead_loop, tl, task)
        await anyio.sleep(0.05)  # the lead() calls are waiting by then
        freeze_heap()
        await anyio.to_thread.run_sync(stop.wait)
        tg.cancel_scope.cancel()
    out.put(("bodies", wid, [tuple(b) for b in bodies]))


def worker_main(*args: Any) -> None:
    """Entry point of a worker process."""
    anyio.run(_worker, *args, backend_options={"use_uvloop": True})


async def _observer(hosts: str, chroot: str, stop: Any, out: Any) -> None:
    """A bystander watching the leader nodes: when each was deleted and created.

    Its notifications come from the server as each change is applied, by one
    path for both changes, so the time between a deletion and the creation
    that follows is the server's, give or take the jitter of one notification.
    """
    seen: list[tuple[str, str, float]] = []

    def on_event(event: aiocoord.zk.WatchedEvent) -> None:
        if event.type in (aiocoord.zk.EventType.DELETED, aiocoord.zk.EventType.CREATED):
            seen.append((basename(event.path), event.type.name, time.monotonic()))

    async with (
        aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord,
        coord.client.watch(f"{ROOT}/leaders", recursive=True) as watch,
    ):
        watch.set_callback(on_event)
        freeze_heap()
        out.put(("watching", "observer", None))
        await anyio.to_thread.run_sync(stop.wait)
    out.put(("seen", "observer", seen))


def observer_main(*args: Any) -> None:
    """Entry point of the observer process."""
    anyio.run(_observer, *args, backend_options={"use_uvloop": True})


def _release_times(
    seen: list[tuple[str, str, float]], started: dict[str, float]
) -> tuple[list[float], list[float]]:
    """Per task: first deletion seen -> next creation seen, and -> the new body's start."""
    to_created, to_led = [], []
    for task, new_start in started.items():
        deleted = next((t for name, kind, t in seen if name == task and kind == "DELETED"), None)
        if deleted is None:
            continue
        created = next(
            (t for name, kind, t in seen if name == task and kind == "CREATED" and t > deleted),
            None,
        )
        if created is not None:
            to_created.append(created - deleted)
        to_led.append(new_start - deleted)
    return to_created, to_led


# --- one run --------------------------------------------------------------------------------


async def _wait_for_leaders(
    hosts: str, chroot: str, expected: dict[str, str], timeout: float = 60.0
) -> None:
    """Poll the leader nodes (as an observer) until they match `expected`."""
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord:
        with anyio.fail_after(timeout):
            while await _read_leaders(coord) != expected:  # noqa: ASYNC110 - server state
                await anyio.sleep(0.02)


def hand_over(hosts: str, n_tasks: int, settle: float, *, observe: bool = False) -> Result:
    """3 worker processes of 1.0 lead `n_tasks`; a 1.1 process joins and takes them all.

    With `observe`, a fifth process watches the leader nodes as a bystander,
    to time each hand-over from the release (see `_observer`).
    """
    ctx = multiprocessing.get_context("spawn")
    chroot = f"/bench-tasks-{uuid.uuid4().hex[:8]}"
    tasks = [f"task-{i:04d}" for i in range(n_tasks)]
    stop = ctx.Event()
    out = ctx.Queue()
    procs = []

    def spawn(wid: str, version: str) -> None:
        proc = ctx.Process(
            target=worker_main, args=(hosts, chroot, wid, version, tasks, settle, stop, out)
        )
        proc.start()
        procs.append(proc)

    def wait_for(kind: str, wid: str, timeout: float = 60.0) -> Any:
        """The value of the worker's message of this kind (others are kept for later)."""
        deadline = time.monotonic() + timeout
        while True:
            for got in pending:
                if got[0] == kind and got[1] == wid:
                    pending.remove(got)
                    return got[2]
            pending.append(out.get(timeout=max(0.1, deadline - time.monotonic())))

    pending: list[Any] = []
    old = {f"old-{i}": "1.0" for i in range(3)}
    expected = choose_leaders(tasks, old)

    try:
        for wid in old:
            spawn(wid, "1.0")
            wait_for("registered", wid)

        anyio.run(_wait_for_leaders, hosts, chroot, expected)
        if observe:
            proc = ctx.Process(target=observer_main, args=(hosts, chroot, stop, out))
            proc.start()
            procs.append(proc)
            wait_for("watching", "observer")
        before = packets(hosts)
        spawn("new", "1.1")
        registered = wait_for("registered", "new")
        all_led = wait_for("all led", "new")
        requests = packets(hosts) - before
        stop.set()
        bodies: list[Body] = []
        for wid in [*old, "new"]:
            bodies += wait_for("bodies", wid)
        seen = wait_for("seen", "observer") if observe else []
    finally:
        stop.set()
        join_all(procs)
    by_task: dict[str, list[Body]] = {t: [] for t in tasks}
    for body in bodies:
        by_task[body[0]].append(body)
    gaps, overlaps = [], 0
    started: dict[str, float] = {}
    for task, runs in by_task.items():
        runs.sort(key=lambda b: b[2])
        for a, b in itertools.pairwise(runs):
            if a[3] is None or a[3] > b[2]:
                overlaps += 1
        new_start = next(b[2] for b in runs if b[1] == "new")
        old_end = max(b[3] for b in runs if b[1] != "new" and b[3] is not None)
        gaps.append(new_start - old_end)
        started[task] = new_start
    result = Result(all_led - registered, gaps, overlaps, settle, *_release_times(seen, started))
    result.requests = requests
    return result


def join_all(procs: list[Any]) -> None:
    """Wait for the worker processes to end; kill any still running after 10 s."""
    for proc in procs:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


async def _read_leaders(coord: aiocoord.Coordinator) -> dict[str, str]:
    view = await describe_task_leadership(coord, ROOT)
    return {task: lead.worker for task, lead in view.leaders.items()}
