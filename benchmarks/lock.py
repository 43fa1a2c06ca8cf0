"""Lock throughput: aiocoord's CasLock against kazoo's Lock and aiozk's Lock recipe.

K contenders, each with its own ZooKeeper session, loop acquire -> release as
fast as they can on one lock path for a fixed time.  Reported per
implementation: acquisitions per second (all contenders together), each
contender's share, and Jain's fairness index (1.0: perfectly even; 1/K: one
contender took everything); for aiocoord's rows also the server requests and
the lost CAS writes (a conditional setData answered with a bad version, which
the server logs like any write) per acquisition, counted in its clients.
Ratios are against the peers measured in this same run, against one embedded
server, since machines are noisy.

- ``cas_lock``: ``async with cas_lock(coord, path)`` (renewal tasks and loss
  watching included: what applications use).
- ``CasLock``: ``await lock.acquire(); await lock.release()`` (the bare CAS).
- ``kazoo``: ``kazoo.recipe.lock.Lock`` (one thread per contender; skipped, with a
  note, when kazoo is not installed).
- ``aiozk``: ``aiozk.recipes.Lock`` from the installed aiozk package.

kazoo's and aiozk's locks are FIFO queues of sequential nodes; CasLock has no
queue but takes turns by the order its record keeps (docs/cas-lock.md), so its
fairness is measured here rather than promised.

The implementations take turns for `--rounds` rounds (each `--seconds` long,
each round starting with the next implementation) so that a slow patch of a
shared machine hits all of them alike; acq/s is the median over rounds, each
ratio the median of the per-round ratios, and the shares, fairness and costs
count every round.  `--contenders 4,16` measures each K in turn.

    python -m benchmarks.lock [--seconds 3] [--rounds 3] [--contenders 4,16] [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from collections.abc import Callable

import aiocoord
from aiocoord.recipes.cas_lock import CasLock, cas_lock
from aiocoord.testing import ZooKeeperServer

from .contenders import Costs, Counts, Step, bench_aiozk, bench_kazoo, jain, race_sessions
from .peers import kazoo_installed, skipped_note

__all__ = ("bench_aiocoord", "jain", "main", "report", "run")

ROOT = "/bench-lock"


def bench_aiocoord(
    hosts: str, k: int, seconds: float, uvloop: bool, managed: bool, costs: Costs | None = None
) -> Counts:
    """aiocoord's lock: ``async with cas_lock(...)`` (`managed`) or bare acquire/release."""
    path = f"{ROOT}/cas-{uuid.uuid4().hex[:8]}"

    async def steps(coords: list[aiocoord.Coordinator]) -> list[Step]:
        locks = [CasLock(c, path, owner=f"c{i}", lease=10) for i, c in enumerate(coords)]

        def step_for(i: int) -> Step:
            async def held_block() -> None:
                async with cas_lock(coords[i], path, owner=f"c{i}", lease=10):
                    pass

            async def bare() -> None:
                await locks[i].acquire()
                await locks[i].release()

            return held_block if managed else bare

        return [step_for(i) for i in range(k)]

    return race_sessions(hosts, k, seconds, uvloop, steps, costs)


Rounds = dict[str, list[Counts]]  # implementation -> one Counts per round
OURS = ("cas_lock", "CasLock")


def run(
    hosts: str | None = None,
    *,
    seconds: float = 3.0,
    rounds: int = 3,
    contenders: int = 4,
    uvloop: bool = True,
    costs: dict[str, Costs] | None = None,
) -> Rounds:
    """Measure every implementation, in turns; starts its own server unless `hosts` is given.

    kazoo's lock is left out when kazoo is not installed.  With `costs`, the
    costs of aiocoord's rows over all rounds are added to it, by name.
    """
    if hosts is None:
        with ZooKeeperServer(extra_config={"maxClientCnxns": "0"}) as server:
            return run(
                server.connect_string,
                seconds=seconds,
                rounds=rounds,
                contenders=contenders,
                uvloop=uvloop,
                costs=costs,
            )
    results: Rounds = {"cas_lock": [], "CasLock": [], "kazoo Lock": [], "aiozk Lock": []}
    if not kazoo_installed():
        del results["kazoo Lock"]
    counted = costs if costs is not None else {}
    for name in OURS:
        counted.setdefault(name, Costs(contenders))
    measure: dict[str, Callable[[], Counts]] = {
        "cas_lock": lambda: bench_aiocoord(
            hosts, contenders, seconds, uvloop, True, counted["cas_lock"]
        ),
        "CasLock": lambda: bench_aiocoord(
            hosts, contenders, seconds, uvloop, False, counted["CasLock"]
        ),
        "kazoo Lock": lambda: bench_kazoo(hosts, contenders, seconds, ROOT),
        "aiozk Lock": lambda: bench_aiozk(hosts, contenders, seconds, uvloop, ROOT),
    }
    names = list(results)
    for r in range(rounds):
        # Each round starts with the next implementation: none always runs first.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(measure[name]())
    return results


def report(results: Rounds, seconds: float, costs: dict[str, Costs] | None = None) -> str:
    """The table: acq/s, ratios, fairness, and for aiocoord's rows the costs per acquisition."""
    rates = {name: [sum(c) / seconds for c in runs] for name, runs in results.items()}
    costs = costs or {}

    def ratio(name: str, peer: str) -> str:
        if not rates.get(peer):
            return f"{'-':>9}"
        value = statistics.median(a / b for a, b in zip(rates[name], rates[peer], strict=True))
        return f"{value:8.2f}x"

    def per(name: str, field: str) -> str:
        spent = costs.get(name)
        return f"{spent.per(getattr(spent, field)):.2f}" if spent else "-"

    lines = [
        f"{'implementation':<12} {'acq/s':>8} {'vs kazoo':>9} {'vs aiozk':>9} {'jain':>6} "
        f"{'req/acq':>8} {'lost CAS/acq':>13}  per-contender shares   (acq/s of each round)",
    ]
    for name, runs in results.items():
        counts = [sum(column) for column in zip(*runs, strict=True)]
        total = sum(counts) or 1
        shares = " ".join(f"{c / total:4.0%}" for c in counts)
        each = " ".join(f"{r:.0f}" for r in rates[name])
        lines.append(
            f"{name:<12} {statistics.median(rates[name]):8.0f} {ratio(name, 'kazoo Lock')} "
            f"{ratio(name, 'aiozk Lock')} {jain(counts):6.3f} {per(name, 'requests'):>8} "
            f"{per(name, 'failed_cas'):>13}  {shares}   ({each})"
        )
    if "kazoo Lock" not in results:
        lines.append(skipped_note("kazoo"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per implementation and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", default="4,16", help="K, or several: 4,16")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    for k in [int(k) for k in args.contenders.split(",") if k.strip()]:
        costs: dict[str, Costs] = {}
        results = run(
            args.hosts,
            seconds=args.seconds,
            rounds=args.rounds,
            contenders=k,
            uvloop=args.loop == "uvloop",
            costs=costs,
        )
        print(
            f"{k} contenders, each its own session, {args.rounds} rounds of {args.seconds:g} s "
            f"each, async on {args.loop}, acquire -> release in a loop"
        )
        print(report(results, args.seconds, costs), flush=True)


if __name__ == "__main__":
    main()
