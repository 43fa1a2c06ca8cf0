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
what this server and machine allow at the least.  kazoo's rows and column are
left out, with a note, when kazoo is not installed.

The issue's target: every task led again within 3 round trips of its
release, and no task leaderless for more than 50 ms beyond its drain.

The server runs without fsync (``forceSync=no``, as in the latch benchmark;
``--fsync`` keeps it), and one untimed hand-over warms it up first: the
first hand-over on a fresh JVM is far slower than the ones after it.  Every
process freezes its start-up heap (``gc.freeze()``; ``--no-gc-freeze`` does
not), so that a full collection does not land in a hand-over by chance.

    python -m benchmarks.tasks [--tasks 200] [--runs 3] [--settle 0.2] [--fsync]
                                    [--no-gc-freeze]
"""

from __future__ import annotations

import argparse
import os
import statistics

import anyio

from aiocoord.testing import ZooKeeperServer

from .peers import kazoo_installed, skipped_note
from .tasks_peers import bare_hand_over, kazoo_bare_hand_over, round_trips
from .tasks_runs import GC_FREEZE, Result, freeze_heap, hand_over

__all__ = ("main", "run")


def run(
    hosts: str, *, tasks: int = 200, runs: int = 3, settle: float = 0.2, observe: bool = False
) -> list[Result]:
    """`runs` hand-overs of `tasks` tasks against the server at `hosts`."""
    return [hand_over(hosts, tasks, settle, observe=observe) for _ in range(runs)]


def _median(values: list[float] | None) -> float | None:
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> None:
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
        help="leave the garbage collector as it is (see freeze_heap)",
    )
    args = parser.parse_args(argv)
    os.environ[GC_FREEZE] = "0" if args.no_gc_freeze else "1"
    kazoo: list[float] | None = None
    kazoo_single: list[float] | None = None
    with ZooKeeperServer(extra_config={} if args.fsync else {"forceSync": "no"}) as server:
        hosts = server.connect_string
        for _ in range(args.warm_up):
            hand_over(hosts, args.tasks, args.settle)
        read_rtt, write_rtt = anyio.run(round_trips, hosts)
        results = run(hosts, tasks=args.tasks, runs=args.runs, settle=args.settle)
        singles = run(hosts, tasks=1, runs=args.single_runs, settle=args.settle, observe=True)
        bare = bare_hand_over(hosts, args.tasks)
        bare_single = [bare_hand_over(hosts, 1)[0] for _ in range(args.single_runs)]
        if kazoo_installed():
            freeze_heap()  # the kazoo clients run in this process
            kazoo = kazoo_bare_hand_over(hosts, args.tasks)
            kazoo_single = [kazoo_bare_hand_over(hosts, 1)[0] for _ in range(args.single_runs)]
    print(
        f"\n3 workers of 1.0 lead {args.tasks} tasks; a 1.1 worker joins and takes them all "
        f"(settle {args.settle * 1000:.0f} ms, one process per worker, uvloop)"
    )
    print(
        f"round trip, one at a time: read {read_rtt * 1000:.2f} ms, write {write_rtt * 1000:.2f} ms\n"
    )
    if kazoo is None:
        print(skipped_note("kazoo"))
    header = f"{'':36}{'ms':>8}{'read RTTs':>11}{'write RTTs':>12}{'x kazoo bare':>14}"
    print(header)
    print("-" * len(header))

    def row(label: str, seconds: float | None, peer: float | None = None) -> None:
        if seconds is None:
            return  # a peer that was not measured
        ratio = f"{seconds / peer:14.2f}" if peer else ""
        print(
            f"{label:36}{seconds * 1000:8.1f}{seconds / read_rtt:11.1f}"
            f"{seconds / write_rtt:12.1f}{ratio}"
        )

    k_med, k_max = _median(kazoo), max(kazoo) if kazoo else None
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
    ks_med = _median(kazoo_single)
    print(f"\none task, {len(singles)} runs:")
    row("    join -> led, median", statistics.median(r.join_to_all_led for r in singles))
    row("    gap, median", statistics.median(gaps), ks_med)
    row("    gap, longest", max(gaps), max(kazoo_single) if kazoo_single else None)
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
