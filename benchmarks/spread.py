"""Task leadership's spread: loads and moves of the choice, T = 12, 100, 1,000 × W = 2 … 10.

For each cell (T tasks over W candidates), many seeded random sets of task
names and worker ids: the least and the greatest load over every set; every
single leave of the W workers and `joins` random newcomers per set; the most
tasks a join and a leave moved (a move: a task whose leader changes), how
many of those were beyond the joiner's or leaver's own share, and how many
joins and leaves stayed within the issue's target ⌈T/W⌉ + 1 (W counted
before the change).  Last, the time of one choice of 2,000 tasks.  The
choice is `choose_leaders`, the recipe's own; needs no server.

docs/task-leadership.md shows the table of the default run (the times
aside); tests/unit/test_task_choice.py checks its T = 12 rows.

    python -m benchmarks.spread [--sets 200] [--joins 3] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections import Counter
from dataclasses import dataclass

from aiocoord.recipes.task_leadership import choose_leaders

__all__ = ("Cell", "choice_ms", "format_table", "main", "measure_cell")

TASK_COUNTS = (12, 100, 1000)
WORKER_COUNTS = tuple(range(2, 11))


@dataclass(frozen=True, slots=True)
class Cell:
    """What the random sets of one (T, W) showed; see the module docs."""

    tasks: int
    workers: int
    sets: int
    min_load: int
    max_load: int
    join_most: int  # the most tasks one join moved
    join_beyond: int  # the most moved beyond the joiner's share
    joins_within: int  # joins that moved at most `bound`
    joins: int
    leave_most: int
    leave_beyond: int
    leaves_within: int
    leaves: int

    @property
    def bound(self) -> int:
        """The target: at most ⌈T/W⌉ + 1 tasks move on a single join or leave."""
        return math.ceil(self.tasks / self.workers) + 1


def _choose(tasks: list[str], workers: list[str]) -> dict[str, str]:
    return choose_leaders(tasks, dict.fromkeys(workers, "1"))


def _moved(before: dict[str, str], after: dict[str, str]) -> int:
    return sum(before[task] != after[task] for task in before)


def measure_cell(t: int, w: int, *, sets: int, joins: int, seed: int) -> Cell:
    """Measure `sets` random sets of `t` tasks over `w` workers (names from `seed`)."""
    rnd = random.Random(f"{seed}/{t}/{w}")
    bound = math.ceil(t / w) + 1
    low, high = t, 0
    join_most = join_beyond = joins_within = 0
    leave_most = leave_beyond = leaves_within = 0
    for _ in range(sets):
        tasks = [f"task-{rnd.getrandbits(48):012x}" for _ in range(t)]
        workers = [f"worker-{rnd.getrandbits(48):012x}" for _ in range(w)]
        before = _choose(tasks, workers)
        loads = Counter(before.values())
        low = min(low, *(loads[x] for x in workers))
        high = max(high, *(loads[x] for x in workers))
        for _ in range(joins):
            newcomer = f"worker-{rnd.getrandbits(48):012x}"
            after = _choose(tasks, [*workers, newcomer])
            moved = _moved(before, after)
            share = sum(leader == newcomer for leader in after.values())
            join_most = max(join_most, moved)
            join_beyond = max(join_beyond, moved - share)
            joins_within += moved <= bound
        for gone in workers:
            moved = _moved(before, _choose(tasks, [x for x in workers if x != gone]))
            leave_most = max(leave_most, moved)
            leave_beyond = max(leave_beyond, moved - loads[gone])
            leaves_within += moved <= bound
    return Cell(
        t,
        w,
        sets,
        low,
        high,
        join_most,
        join_beyond,
        joins_within,
        sets * joins,
        leave_most,
        leave_beyond,
        leaves_within,
        sets * w,
    )


def format_table(cells: list[Cell]) -> str:
    """The cells as the Markdown table of docs/task-leadership.md."""
    lines = [
        "| T | W | sets | min load | max load | ⌈T/W⌉ + 1 "
        "| join: most moved (beyond share) | joins within | "
        "leave: most moved (beyond share) | leaves within |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines.extend(
        f"| {c.tasks} | {c.workers} | {c.sets} | {c.min_load} | {c.max_load} | {c.bound} "
        f"| {c.join_most} ({c.join_beyond}) | {c.joins_within}/{c.joins} "
        f"| {c.leave_most} ({c.leave_beyond}) | {c.leaves_within}/{c.leaves} |"
        for c in cells
    )
    return "\n".join(lines)


def choice_ms(tasks: int, workers: int, *, runs: int = 5) -> float:
    """The best of `runs` times of one choice of `tasks` tasks over `workers`, in milliseconds."""
    names = [f"task-{i}" for i in range(tasks)]
    ids = [f"worker-{i}" for i in range(workers)]
    best = math.inf
    for _ in range(runs):
        started = time.perf_counter()
        _choose(names, ids)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.spread",
        description="Loads and moves of task leadership's choice over random task and worker names.",
    )
    parser.add_argument(
        "--sets", type=int, default=200, help="random sets per cell (a tenth for T = 1,000)"
    )
    parser.add_argument("--joins", type=int, default=3, help="random newcomers per set")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cells = [
        measure_cell(
            t,
            w,
            sets=max(1, args.sets // 10) if t >= 1000 else args.sets,
            joins=args.joins,
            seed=args.seed,
        )
        for t in TASK_COUNTS
        for w in WORKER_COUNTS
    ]
    print(format_table(cells))
    print()
    for w in (3, 10, 30):
        print(f"one choice of 2,000 tasks over {w} workers: {choice_ms(2000, w):.1f} ms")


if __name__ == "__main__":
    main()
