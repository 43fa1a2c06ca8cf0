"""Task hand-over: a newer worker joins 3 workers leading 200 tasks.

Three workers of version 1.0 lead 200 tasks; every task runs a ``lead()``
body that records when it starts and when it ends (it ends at once when
cancelled: no drain time).  A worker of version 1.1 joins and takes all 200.
Each worker is a process of its own, as in production; times come from the
system-wide monotonic clock.  Measured, per run:

- join -> all led: from the new worker's registration (its
  ``async with task_leadership`` returned) until its 200th body started;
  this includes the `settle` delay, shown apart;
- gap per task: from the end of the old leader's body (drain done: the
  delete goes out next) to the start of the new leader's body, the time the
  task had no leader; in milliseconds and in round trips;
- overlaps: pairs of bodies of one task that ran at the same time (must be 0);
- in the one-task runs, a fifth process watches the leader node as a
  bystander and times the hand-over from the release (the old node's
  deletion, as the server applied it) to the new node's creation, and to the
  new body's start: the "round trips of the release" of the issue's target.

Peers measured in the same run: read and write round trips (aiocoord
``exists`` and ``set``, one at a time); a bare hand-over with kazoo (one
client deletes the 200 ephemeral nodes one by one, as 200 independent
leaders would; a second client watching them re-creates each on its deletion
event): what a hand-over costs with no recipe at all; and the recipe's own
protocol with nothing around it ("aiocoord bare": three processes delete
their share in one multi each, a fourth re-creates the nodes one multi per
burst of notifications, gap from the delete sent to the create answered):
what this server and machine allow at the least.

The issue's target: every task led again within 3 round trips of its
release, and no task leaderless for more than 50 ms beyond its drain.

The server runs without fsync (``forceSync=no``, as in the latch benchmark;
``--fsync`` keeps it), and one untimed hand-over warms it up first: the
first hand-over on a fresh JVM is far slower than the ones after it.  Every
process freezes its start-up heap (``gc.freeze()``; ``--no-gc-freeze`` does
not), so that a full collection does not land in a hand-over by chance.

    python benchmarks/bench_tasks.py [--tasks 200] [--runs 3] [--settle 0.2] [--fsync]
                                     [--no-gc-freeze]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

import aiocoord
from aiocoord import CreateMode, LeadershipLost
from aiocoord.recipes.task_leadership import TaskLeadership, Worker, task_leadership
from aiocoord.recipes.task_leadership._choice import assign
from aiocoord.recipes.task_leadership._versions import maven_version_key
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk.paths import basename

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


# --- one worker process ---------------------------------------------------------------------

_GC_FREEZE = "AIOCOORD_BENCH_GC_FREEZE"  # set by main() for the processes it starts


def _freeze_heap() -> None:
    """Move what start-up allocated out of the collector's reach (`gc.freeze`).

    Without it a full collection now and then lands in the middle of a
    hand-over and stalls one process for 30-40 ms on a 2-core VM (seen in
    traces), whatever the code does; latency-sensitive services freeze after
    start-up for the same reason.  Every process of the run does it, peers
    included, unless ``--no-gc-freeze``.
    """
    if os.environ.get(_GC_FREEZE) == "1":
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
        _freeze_heap()
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

    def on_event(event: aiocoord.WatchedEvent) -> None:
        if event.type in (aiocoord.EventType.DELETED, aiocoord.EventType.CREATED):
            seen.append((basename(event.path), event.type.name, time.monotonic()))

    async with (
        aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord,
        coord.client.watch(f"{ROOT}/leaders", recursive=True) as watch,
    ):
        watch.set_callback(on_event)
        _freeze_heap()
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
    expected = assign(tasks, old, version_key=maven_version_key).leaders

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
        spawn("new", "1.1")
        registered = wait_for("registered", "new")
        all_led = wait_for("all led", "new")
        stop.set()
        bodies: list[Body] = []
        for wid in [*old, "new"]:
            bodies += wait_for("bodies", wid)
        seen = wait_for("seen", "observer") if observe else []
    finally:
        stop.set()
        _join_all(procs)
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
    return Result(all_led - registered, gaps, overlaps, settle, *_release_times(seen, started))


def _join_all(procs: list[Any]) -> None:
    """Wait for the worker processes to end; kill any still running after 10 s."""
    for proc in procs:
        proc.join(10)
        if proc.is_alive():
            proc.kill()


async def _read_leaders(coord: aiocoord.Coordinator) -> dict[str, str]:
    client = coord.client
    try:
        names = await client.children(f"{ROOT}/leaders")
    except aiocoord.NoNodeError:
        return {}
    out = {}
    for name in names:
        try:
            node = await client.get(f"{ROOT}/leaders/{name}")
        except aiocoord.NoNodeError:
            continue
        out[name] = json.loads(node.data)["id"]
    return out


# --- peers ----------------------------------------------------------------------------------


async def _round_trips(hosts: str, n: int = 300) -> tuple[float, float]:
    async with aiocoord.connect(hosts, session_timeout=10.0) as coord:
        client = coord.client
        path = f"/rtt-{uuid.uuid4().hex[:8]}"
        await client.create(path, b"", mode=CreateMode.EPHEMERAL)
        reads, writes = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            await client.exists(path)
            t1 = time.perf_counter()
            await client.set(path, b"x")
            reads.append(t1 - t0)
            writes.append(time.perf_counter() - t1)
        return statistics.median(reads), statistics.median(writes)


def kazoo_bare_hand_over(hosts: str, n_tasks: int) -> list[float]:
    """Delete N ephemeral nodes one by one from one kazoo client; another re-creates each."""
    from kazoo.client import KazooClient
    from kazoo.protocol.states import EventType as KEventType

    base = f"/bench-kazoo-{uuid.uuid4().hex[:8]}"
    a = KazooClient(hosts=hosts, timeout=10.0)
    b = KazooClient(hosts=hosts, timeout=10.0)
    a.start()
    b.start()
    try:
        a.ensure_path(base)
        paths = [f"{base}/t{i}" for i in range(n_tasks)]
        for p in paths:
            a.create(p, ephemeral=True)
        deleted_at: dict[str, float] = {}
        created_at: dict[str, float] = {}
        done = threading.Event()
        lock = threading.Lock()

        def on_created(path: str) -> Callable[[Any], None]:
            def cb(_result: Any) -> None:
                with lock:
                    created_at[path] = time.monotonic()
                    if len(created_at) == len(paths):
                        done.set()

            return cb

        def watcher(event: Any) -> None:
            if event.type == KEventType.DELETED:
                b.create_async(event.path, ephemeral=True).rawlink(on_created(event.path))

        for p in paths:
            b.exists(p, watch=watcher)
        for p in paths:
            deleted_at[p] = time.monotonic()
            a.delete_async(p)
        if not done.wait(60):
            raise TimeoutError("kazoo hand-over did not finish")
        return [created_at[p] - deleted_at[p] for p in paths]
    finally:
        for c in (a, b):
            c.stop()
            c.close()


# --- the same protocol without the recipe -----------------------------------------------------


async def _bare_old(hosts: str, chroot: str, paths: list[str], go: Any, out: Any) -> None:
    """Hold `paths` as ephemerals; on `go`, delete them all in one multi (as one old worker does)."""
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord:
        client = coord.client
        await client.multi([aiocoord.CreateOp(p, b"", CreateMode.EPHEMERAL) for p in paths])
        _freeze_heap()
        out.put(("bare ready", paths[0], None))
        await anyio.to_thread.run_sync(go.wait)
        sent = time.monotonic()
        await client.multi([aiocoord.DeleteOp(p) for p in paths])
        out.put(("bare deleted", paths[0], sent))


async def _bare_new(hosts: str, chroot: str, base: str, n: int, out: Any) -> None:
    """Create each node as its deletion is read: one multi per burst, from a loop callback."""
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord:
        client = coord.client
        loop = asyncio.get_running_loop()
        created: dict[str, float] = {}
        queue: list[str] = []
        done = anyio.Event()

        def flush() -> None:
            batch = queue[:]
            queue.clear()
            sent = client.send_multi(
                [aiocoord.CreateOp(p, b"", CreateMode.EPHEMERAL) for p in batch]
            )

            def on_reply(reply: Any) -> None:
                reply.result()
                now = time.monotonic()
                for path in batch:
                    created[path] = now
                if len(created) == n:
                    done.set()

            sent.add_done_callback(on_reply)

        def on_event(event: Any) -> None:
            if event.type is aiocoord.EventType.DELETED:
                if not queue:
                    loop.call_soon(flush)
                queue.append(event.path)

        async with client.watch(base, recursive=True) as pw:
            pw.set_callback(on_event)
            _freeze_heap()
            out.put(("bare watching", "new", None))
            with anyio.fail_after(60):
                await done.wait()
        out.put(("bare created", "new", created))


def _bare_main(role: str, *args: Any) -> None:
    """Entry point of a process of the bare hand-over."""
    main = _bare_old if role == "old" else _bare_new
    anyio.run(main, *args, backend_options={"use_uvloop": True})


def bare_hand_over(hosts: str, n_tasks: int) -> list[float]:
    """3 processes (fewer for fewer nodes) delete their share in one multi each; a 4th re-creates.

    The recipe's protocol with nothing else: no bodies, no choice, no
    settle; what a hand-over costs on this server and machine at the least.
    Gap per node: from its delete being sent to its create being answered.
    """
    ctx = multiprocessing.get_context("spawn")
    chroot = f"/bench-bare-{uuid.uuid4().hex[:8]}"
    base = "/leaders"
    paths = [f"{base}/task-{i:04d}" for i in range(n_tasks)]
    shares = [share for share in (paths[i::3] for i in range(3)) if share]
    go = ctx.Event()
    out = ctx.Queue()
    anyio.run(_ensure, hosts, chroot + base)
    olds = len(shares)
    procs = [
        ctx.Process(target=_bare_main, args=("old", hosts, chroot, share, go, out))
        for share in shares
    ]
    procs.append(ctx.Process(target=_bare_main, args=("new", hosts, chroot, base, n_tasks, out)))
    got: dict[tuple[str, str], Any] = {}

    def wait_for(kind: str, count: int) -> None:
        while sum(1 for k in got if k[0] == kind) < count:
            kind_, key, value = out.get(timeout=60)
            got[(kind_, key)] = value

    try:
        for proc in procs[:olds]:
            proc.start()
        wait_for("bare ready", olds)
        procs[olds].start()
        wait_for("bare watching", 1)
        go.set()
        wait_for("bare deleted", olds)
        wait_for("bare created", 1)
    finally:
        go.set()
        _join_all(procs)
    created = got[("bare created", "new")]
    gaps = []
    for share in shares:
        sent = got[("bare deleted", share[0])]
        gaps += [created[p] - sent for p in share]
    return gaps


async def _ensure(hosts: str, path: str) -> None:
    async with aiocoord.connect(hosts, session_timeout=10.0) as coord:
        await coord.client.ensure_path(path, mode=CreateMode.PERSISTENT)


# --- report ---------------------------------------------------------------------------------


def run(
    hosts: str, *, tasks: int = 200, runs: int = 3, settle: float = 0.2, observe: bool = False
) -> list[Result]:
    return [hand_over(hosts, tasks, settle, observe=observe) for _ in range(runs)]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="runs with all tasks")
    parser.add_argument("--single-runs", type=int, default=5, help="runs with one task")
    parser.add_argument("--settle", type=float, default=0.2)
    parser.add_argument(
        "--fsync", action="store_true", help="let the server fsync its log (forceSync=yes)"
    )
    parser.add_argument("--warm-up", type=int, default=1, help="untimed hand-overs first")
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="leave the garbage collector as it is (see _freeze_heap)",
    )
    args = parser.parse_args()
    os.environ[_GC_FREEZE] = "0" if args.no_gc_freeze else "1"
    with ZooKeeperServer(extra_config={} if args.fsync else {"forceSync": "no"}) as server:
        hosts = server.connect_string
        for _ in range(args.warm_up):
            hand_over(hosts, args.tasks, args.settle)
        read_rtt, write_rtt = anyio.run(_round_trips, hosts)
        results = run(hosts, tasks=args.tasks, runs=args.runs, settle=args.settle)
        singles = run(hosts, tasks=1, runs=args.single_runs, settle=args.settle, observe=True)
        bare = bare_hand_over(hosts, args.tasks)
        bare_single = [bare_hand_over(hosts, 1)[0] for _ in range(args.single_runs)]
        _freeze_heap()  # the kazoo clients run in this process
        kazoo = kazoo_bare_hand_over(hosts, args.tasks)
        kazoo_single = [kazoo_bare_hand_over(hosts, 1)[0] for _ in range(args.single_runs)]
    print(
        f"\n3 workers of 1.0 lead {args.tasks} tasks; a 1.1 worker joins and takes them all "
        f"(settle {args.settle * 1000:.0f} ms, one process per worker, uvloop)"
    )
    print(
        f"round trip, one at a time: read {read_rtt * 1000:.2f} ms, write {write_rtt * 1000:.2f} ms\n"
    )
    header = f"{'':36}{'ms':>8}{'read RTTs':>11}{'write RTTs':>12}{'x kazoo bare':>14}"
    print(header)
    print("-" * len(header))

    def row(label: str, seconds: float, peer: float | None = None) -> None:
        ratio = f"{seconds / peer:14.2f}" if peer else ""
        print(
            f"{label:36}{seconds * 1000:8.1f}{seconds / read_rtt:11.1f}"
            f"{seconds / write_rtt:12.1f}{ratio}"
        )

    k_med, k_max = statistics.median(kazoo), max(kazoo)
    for i, r in enumerate(results, 1):
        row(f"{args.tasks} tasks, run {i}: join -> all led", r.join_to_all_led)
        row("    of which settle", r.settle)
        row("    gap per task, median", statistics.median(r.gaps), k_med)
        row("    gap per task, p90", statistics.quantiles(r.gaps, n=10)[-1])
        row("    gap per task, longest", max(r.gaps), k_max)
        print(f"    overlapping bodies: {r.overlaps}")
    row(f"kazoo bare, {args.tasks} nodes: gap, median", k_med)
    row(f"kazoo bare, {args.tasks} nodes: gap, longest", k_max)
    row(f"aiocoord bare, {args.tasks} nodes: gap, median", statistics.median(bare), k_med)
    row(f"aiocoord bare, {args.tasks} nodes: gap, longest", max(bare), k_max)
    gaps = [r.gaps[0] for r in singles]
    ks_med = statistics.median(kazoo_single)
    print(f"\none task, {len(singles)} runs:")
    row("    join -> led, median", statistics.median(r.join_to_all_led for r in singles))
    row("    gap, median", statistics.median(gaps), ks_med)
    row("    gap, longest", max(gaps), max(kazoo_single))
    created = [t for r in singles for t in r.released_to_created]
    led = [t for r in singles for t in r.released_to_led]
    if created and led:
        row("    release -> new node, median", statistics.median(created))
        row("    release -> new body, median", statistics.median(led))
        row("    release -> new body, longest", max(led))
    print(f"    overlapping bodies: {sum(r.overlaps for r in singles)}")
    row("kazoo bare, one node: gap, median", ks_med)
    row("aiocoord bare, one node: gap, median", statistics.median(bare_single), ks_med)


if __name__ == "__main__":
    main()
