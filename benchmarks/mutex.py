"""Mutex throughput, fairness and costs: aiocoord's mutex against Curator, aiozk and kazoo.

K contenders, each with its own ZooKeeper session, loop acquire -> release as
fast as they can on one lock path for a fixed time.  Reported per
implementation: acquisitions per second (all contenders together), the ratio
to each peer measured in this same run, each contender's share, and Jain's
fairness index (1.0: perfectly even; 1/K: one contender took everything).

- ``mutex``: ``async with aiocoord.mutex(coord, path)`` (the loss-watching keeper
  included: what applications use).
- ``Mutex``: ``await m.acquire(); await m.release()`` (the bare queue).
- ``Curator``: Java Curator 5.4's ``InterProcessMutex``, one thread and client per
  contender, in a JVM (`mutex_peers`; skipped, with a note, without Java and
  the Debian jars).
- ``aiozk Lock``: ``aiozk.recipes.Lock``; ``kazoo Lock``: ``kazoo.recipe.lock.Lock``
  (skipped, with a note, when kazoo is not installed).

The implementations take turns for `--rounds` rounds so that a slow patch of
a shared machine hits all of them alike, each round starting with the next
one; acq/s is the median over rounds, each ratio the median of the per-round
ratios.

Then the costs of ``mutex`` for K = 4, 16 and 64 (`--sweep`), counted in
aiocoord's own clients: server requests per acquisition, watch notifications
per hand-over, and how many of those woke a waiter.  Queue recipes with
predecessor watches keep all three constant in K; a lock whose waiters all
watch one node would wake K - 1 of them per hand-over.

    python -m benchmarks.mutex [--seconds 3] [--rounds 3] [--contenders 4] [--sweep 4,16,64]

A server given with ``--hosts`` must allow K connections from one address
(``maxClientCnxns``, 60 by default) for the sweep.
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from collections.abc import Callable

import aiocoord
from aiocoord.testing import ZooKeeperServer

from .contenders import Costs, Counts, Step, bench_aiozk, bench_kazoo, jain, race_sessions
from .mutex_peers import bench_curator, curator_missing
from .peers import kazoo_installed, skipped_note

__all__ = ("Costs", "bench_aiocoord", "jain", "main", "measure_costs", "report", "run")

PEERS = ("Curator", "aiozk Lock", "kazoo Lock")
ROOT = "/bench-mutex"


def bench_aiocoord(
    hosts: str,
    k: int,
    seconds: float,
    uvloop: bool,
    managed: bool,
    costs: Costs | None = None,
) -> Counts:
    """aiocoord's mutex: ``async with mutex(...)`` (`managed`) or bare acquire/release."""
    path = f"{ROOT}/aiocoord-{uuid.uuid4().hex[:8]}"

    async def steps(coords: list[aiocoord.Coordinator]) -> list[Step]:
        mutexes = [aiocoord.Mutex(c, path, participant_id=f"c{i}") for i, c in enumerate(coords)]
        await coords[0].client.ensure_path(path)  # as any lock in use: its parent exists

        def step_for(i: int) -> Step:
            async def held_block() -> None:
                async with aiocoord.mutex(coords[i], path, participant_id=f"c{i}"):
                    pass

            async def bare() -> None:
                await mutexes[i].acquire()
                await mutexes[i].release()

            return held_block if managed else bare

        return [step_for(i) for i in range(k)]

    return race_sessions(hosts, k, seconds, uvloop, steps, costs)


Rounds = dict[str, list[Counts]]  # implementation -> one Counts per round


def run(
    hosts: str | None = None,
    *,
    seconds: float = 3.0,
    rounds: int = 3,
    contenders: int = 4,
    uvloop: bool = True,
) -> Rounds:
    """Measure every implementation, in turns; starts its own server unless `hosts` is given."""
    if hosts is None:
        with _server() as server:
            return run(
                server.connect_string,
                seconds=seconds,
                rounds=rounds,
                contenders=contenders,
                uvloop=uvloop,
            )
    results: Rounds = {name: [] for name in ("mutex", "Mutex", *PEERS)}
    if curator_missing() is not None:
        del results["Curator"]
    if not kazoo_installed():
        del results["kazoo Lock"]
    measure: dict[str, Callable[[], Counts]] = {
        "mutex": lambda: bench_aiocoord(hosts, contenders, seconds, uvloop, True),
        "Mutex": lambda: bench_aiocoord(hosts, contenders, seconds, uvloop, False),
        "Curator": lambda: bench_curator(hosts, contenders, seconds),
        "aiozk Lock": lambda: bench_aiozk(hosts, contenders, seconds, uvloop, ROOT),
        "kazoo Lock": lambda: bench_kazoo(hosts, contenders, seconds, ROOT),
    }
    names = list(results)
    for r in range(rounds):
        # Each round starts with the next implementation: none always runs after the JVM.
        for name in names[r % len(names) :] + names[: r % len(names)]:
            results[name].append(measure[name]())
    return results


def measure_costs(
    hosts: str, sweep: list[int], seconds: float, uvloop: bool = True
) -> list[tuple[Costs, Counts]]:
    """``async with mutex(...)`` costs for each K of `sweep`."""
    out = []
    for k in sweep:
        costs = Costs(k)
        counts = bench_aiocoord(hosts, k, seconds, uvloop, True, costs)
        out.append((costs, counts))
    return out


def report(results: Rounds, seconds: float) -> str:
    rates = {name: [sum(c) / seconds for c in runs] for name, runs in results.items()}

    def ratio(name: str, peer: str) -> str:
        if not rates.get(peer) or name == peer:
            return f"{'-':>10}"
        value = statistics.median(a / b for a, b in zip(rates[name], rates[peer], strict=True))
        return f"{value:9.2f}x"

    head = f"{'implementation':<12} {'acq/s':>7}" + "".join(f" {'vs ' + p[:6]:>10}" for p in PEERS)
    lines = [head + f" {'jain':>5}  per-contender shares   (acq/s of each round)"]
    for name, runs in results.items():
        counts = [sum(column) for column in zip(*runs, strict=True)]
        total = sum(counts) or 1
        shares = " ".join(f"{c / total:4.0%}" for c in counts)
        each = " ".join(f"{r:.0f}" for r in rates[name])
        lines.append(
            f"{name:<12} {statistics.median(rates[name]):7.0f}"
            + "".join(f" {ratio(name, peer)}" for peer in PEERS)
            + f" {jain(counts):5.3f}  {shares}   ({each})"
        )
    why = curator_missing()
    if why is not None:
        lines.append(f"note: Curator's InterProcessMutex is not measured: {why}")
    if "kazoo Lock" not in results:
        lines.append(skipped_note("kazoo"))
    return "\n".join(lines)


def report_costs(measured: list[tuple[Costs, Counts]], seconds: float) -> str:
    lines = [
        f"{'K':>3} {'acq/s':>7} {'jain':>5} {'requests/acq':>13} "
        f"{'notifications/hand-over':>24} {'woke a waiter':>14}"
    ]
    for costs, counts in measured:
        lines.append(
            f"{costs.contenders:>3} {sum(counts) / seconds:7.0f} {jain(counts):5.3f} "
            f"{costs.per(costs.requests):13.2f} {costs.per(costs.notifications):24.2f} "
            f"{costs.per(costs.woken):14.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per implementation and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", type=int, default=4)
    parser.add_argument("--sweep", default="4,16,64", help="K values for the costs ('' skips)")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    sweep = [int(k) for k in args.sweep.split(",") if k.strip()]
    uvloop = args.loop == "uvloop"
    with _server() if args.hosts is None else _given(args.hosts) as server:
        hosts = server.connect_string
        results = run(
            hosts,
            seconds=args.seconds,
            rounds=args.rounds,
            contenders=args.contenders,
            uvloop=uvloop,
        )
        print(
            f"{args.contenders} contenders, each its own session, {args.rounds} rounds of "
            f"{args.seconds:g} s each, async on {args.loop}, acquire -> release in a loop"
        )
        print(report(results, args.seconds))
        if sweep:
            print(
                f"\nasync with mutex(...), costs counted in aiocoord's clients ({args.seconds:g} s each)"
            )
            print(report_costs(measure_costs(hosts, sweep, args.seconds, uvloop), args.seconds))


def _server() -> ZooKeeperServer:
    """The embedded server; 64 contenders on loopback need more than 60 connections per address."""
    return ZooKeeperServer(extra_config={"maxClientCnxns": "0"})


class _given:
    """A server given by --hosts, in place of one started here."""

    def __init__(self, hosts: str) -> None:
        self.connect_string = hosts

    def __enter__(self) -> _given:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
