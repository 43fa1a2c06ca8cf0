"""Leader latch: hand-off latency and join at scale, against aiozk, kazoo and Curator.

Every figure comes from one embedded ZooKeeper server in this same run, and each
implementation is measured in a process of its own (so peak RSS is its own):

- Hand-off: N participants, each with its own session, on one path.  The leader
  leaves; the time until the next participant observes its leadership is
  recorded over R rounds (median, p95), in two ways:
  - next in line: a fresh election each round, joined in order, so the next
    participant's last listing had only the leader ahead of it (aiocoord then
    leads on the notification alone; the peers list the children first);
  - rotation: the one that left joins again at the tail once the next leader
    is in, and the next round starts 50 ms later, so every recipe lists the
    children once per hand-off.
- Join at scale: M participants on one session join at once.  Time until settled
  (one leader, every other one watching its predecessor), requests per
  participant, then H hand-offs and the requests each cost, and peak RSS.
  Requests are the server's ``zk_packets_received`` (pings and the handshake
  included), the same yardstick for every implementation.

Before anything is timed, every implementation runs a few untimed rotation
rounds: a fresh server is slower until its JIT has compiled the paths involved,
and whichever implementation was measured first paid for that alone (its
rotation median was about a quarter higher than when measured again in the same
run).  ``--warm-up 0`` skips it.  The R rounds of each hand-off measurement
are split into interleaved passes (``--passes``, 3): every pass runs every
implementation once, so a slow spell of the shared machine weighs on all of
them alike (measured one after the other, the same code's median moved by a
fifth from one run to the next, and the ratios with it).

Peers: ``aiozk.recipes.LeaderElection`` (the installed aiozk package),
``kazoo.recipe.election.Election`` (one thread per participant; left out, with
a note, when kazoo is not installed) and, next in line only, Apache Curator's
``LeaderLatch`` (Java, one client per participant, in one JVM that runs untimed
rounds first for its JIT; left out with a note when Java or the jars are
missing).  aiocoord and aiozk each run on asyncio and on uvloop, and each is
compared with the other on the same loop.  Join at scale also reports each
process's peak RSS, what was loaded included, and its ratio to aiozk's on the
same loop.  The server runs with
``forceSync=no`` unless ``--fsync`` is given: with it, every hand-off is
dominated by the same disk flush for everyone and the clients' own cost hides.

    python -m benchmarks.latch [--participants 10] [--rounds 30] [--scale 1000] [--fsync]
        [--warm-up 10] [--passes 3] [--small-scale 200] [--impl NAME ...]
        [--measure first|rotation|join ...]   (--scale 0 --small-scale 0: no join)
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import time

from . import python_m
from .latch_curator import curator_first, curator_missing
from .latch_peers import (
    aiozk_first,
    aiozk_handoff,
    aiozk_join,
    kazoo_first,
    kazoo_handoff,
    kazoo_join,
)
from .latch_runs import Result, aiocoord_first, aiocoord_handoff, aiocoord_join
from .peers import kazoo_installed, skipped_note

__all__ = (
    "IMPLS",
    "MEASURES",
    "child",
    "main",
    "measure",
    "measure_in_passes",
    "peer_on_same_loop",
    "report_handoff",
    "report_join",
)

IMPLS = (
    "aiocoord/asyncio",
    "aiozk/asyncio",
    "aiocoord/uvloop",
    "aiozk/uvloop",
    "Curator",
    "kazoo",
)
MEASURES = ("first", "rotation", "join")


def peer_on_same_loop(impl: str) -> str:
    """The aiozk row an implementation's ratio is taken against (same event loop)."""
    return "aiozk/uvloop" if impl.endswith("uvloop") else "aiozk/asyncio"


# --- the parent: runs each measurement in a child process, prints the table -------------------


def child(args: argparse.Namespace) -> Result:
    impl, hosts = args.child_impl, args.hosts
    uvloop = impl.endswith("uvloop")
    if args.child == "first":
        if impl.startswith("aiocoord"):
            return aiocoord_first(hosts, args.participants, args.rounds, uvloop)
        if impl.startswith("aiozk"):
            return aiozk_first(hosts, args.participants, args.rounds, uvloop)
        return kazoo_first(hosts, args.participants, args.rounds)
    if args.child == "handoff":
        if impl.startswith("aiocoord"):
            return aiocoord_handoff(hosts, args.participants, args.rounds, uvloop)
        if impl.startswith("aiozk"):
            return aiozk_handoff(hosts, args.participants, args.rounds, uvloop)
        return kazoo_handoff(hosts, args.participants, args.rounds)
    if impl.startswith("aiocoord"):
        return aiocoord_join(hosts, args.scale, args.handoffs, uvloop)
    if impl.startswith("aiozk"):
        return aiozk_join(hosts, args.scale, args.handoffs, uvloop)
    return kazoo_join(hosts, args.scale, args.handoffs, args.limit)


def measure(kind: str, impl: str, hosts: str, args: argparse.Namespace, scale: int) -> Result:
    if impl == "Curator":  # a JVM of its own, next in line only
        if kind != "first":
            return {"error": "measured next in line only"}
        return curator_first(hosts, args.participants, args.rounds)
    cmd, env = python_m(
        "benchmarks.latch",
        "--child",
        kind,
        "--child-impl",
        impl,
        "--hosts",
        hosts,
        "--participants",
        str(args.participants),
        "--rounds",
        str(args.rounds),
        "--scale",
        str(scale),
        "--handoffs",
        str(args.handoffs),
        "--limit",
        str(args.limit),
    )
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit + 60, env=env)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: Result = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure_in_passes(kind: str, impls: list[str], args: argparse.Namespace) -> dict[str, Result]:
    """Each implementation's R rounds, taken in `args.passes` interleaved passes.

    Every pass runs every implementation once (a process each), starting one
    further along the list each time, so that a slow spell of the shared
    machine (other work on its two cores) weighs on all of them alike rather
    than on whichever ran during it.
    """
    passes = max(1, min(args.passes, args.rounds))
    results: dict[str, Result] = {impl: {"latencies": []} for impl in impls}
    for p in range(passes):
        share = args.rounds // passes + (1 if p < args.rounds % passes else 0)
        part = argparse.Namespace(**{**vars(args), "rounds": share})
        for impl in impls[p % len(impls) :] + impls[: p % len(impls)]:
            res = measure(kind, impl, args.hosts, part, args.scale)
            if "error" in res:
                results[impl] = res
            elif "error" not in results[impl]:
                results[impl]["latencies"].extend(res.get("latencies", []))
    return {impl: results[impl] for impl in impls}


def _ratio(mine: float | None, theirs: float | None) -> str:
    if not mine or not theirs:
        return "    -"
    return f"{mine / theirs:5.2f}x"


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * q) - 1))]


def report_handoff(title: str, results: dict[str, Result]) -> list[str]:
    """The table of one hand-off measurement; ratios of medians (aiozk: on the same loop)."""
    lines = [
        f"{title:<17} {'median ms':>9} {'p95 ms':>8} {'p99 ms':>8} {'vs aiozk':>9} "
        f"{'vs Curator':>10} {'vs kazoo':>9}",
    ]
    medians: dict[str, float | None] = {}
    for impl, res in results.items():
        lat = sorted(res.get("latencies", []))
        medians[impl] = statistics.median(lat) * 1000 if lat else None
    for impl, res in results.items():
        lat = sorted(res.get("latencies", []))
        if not lat:
            lines.append(f"{impl:<17} {res.get('error', 'no data')}")
            continue
        med = medians[impl]
        aiozk = medians.get(peer_on_same_loop(impl), medians.get("aiozk"))
        lines.append(
            f"{impl:<17} {med:9.2f} {_quantile(lat, 0.95) * 1000:8.2f} "
            f"{_quantile(lat, 0.99) * 1000:8.2f} {_ratio(med, aiozk):>9} "
            f"{_ratio(med, medians.get('Curator')):>10} {_ratio(med, medians.get('kazoo')):>9}"
        )
    return lines


def report_join(scale: int, results: dict[str, Result]) -> list[str]:
    """The table of one join at scale; settle and peak RSS ratios against aiozk on the same loop."""
    lines = [
        f"{f'join M={scale}':<17} {'settle s':>9} {'req/part':>8} {'req/hand-off':>12} "
        f"{'RSS +MiB':>8} {'peak MiB':>8} {'settle vs aiozk':>15} {'peak vs aiozk':>13}",
    ]
    for impl, res in results.items():
        if res.get("settle_s") is None:
            lines.append(f"{impl:<17} {res.get('error') or res.get('note') or 'no data'}")
            continue
        peer = results.get(peer_on_same_loop(impl), results.get("aiozk", {}))
        lines.append(
            f"{impl:<17} {res['settle_s']:9.3f} {res['requests_per_participant']:8.2f} "
            f"{res['requests_per_handoff']:12.2f} {res['rss_mb']:8.1f} "
            f"{res.get('peak_rss_mb', 0.0):8.1f} "
            f"{_ratio(res['settle_s'], peer.get('settle_s')):>15} "
            f"{_ratio(res.get('peak_rss_mb'), peer.get('peak_rss_mb')):>13}"
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--participants", type=int, default=10, help="N, hand-off")
    parser.add_argument("--rounds", type=int, default=30, help="R hand-offs timed")
    parser.add_argument("--scale", type=int, default=1000, help="M, join at scale")
    parser.add_argument("--small-scale", type=int, default=200, help="a second M (0: none)")
    parser.add_argument("--handoffs", type=int, default=10, help="H hand-offs after the join")
    parser.add_argument("--limit", type=float, default=60.0, help="seconds allowed per join")
    parser.add_argument("--impl", choices=IMPLS, action="append", help="only these")
    parser.add_argument("--measure", choices=MEASURES, action="append", help="only these")
    parser.add_argument("--fsync", action="store_true", help="keep the server's forceSync")
    parser.add_argument(
        "--warm-up", type=int, default=10, help="untimed rotation rounds per implementation first"
    )
    parser.add_argument(
        "--passes", type=int, default=3, help="interleaved passes the R rounds are split into"
    )
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    parser.add_argument("--child", choices=("first", "handoff", "join"), help=argparse.SUPPRESS)
    parser.add_argument("--child-impl", choices=IMPLS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    if args.hosts is None:
        from aiocoord.testing import ZooKeeperServer

        config = {} if args.fsync else {"forceSync": "no"}
        with ZooKeeperServer(extra_config=config) as server:
            args.hosts = server.connect_string
            return main_with(args)
    main_with(args)


def main_with(args: argparse.Namespace) -> None:
    impls = args.impl or [
        i
        for i in IMPLS
        if (i != "kazoo" or kazoo_installed()) and (i != "Curator" or curator_missing() is None)
    ]
    measures = args.measure or list(MEASURES)
    began = time.perf_counter()
    sync = "forceSync=yes" if args.fsync else "forceSync=no"
    print(f"one standalone ZooKeeper ({sync}); each implementation in its own process")
    print(
        f"hand-off: N={args.participants} participants, one session each, {args.rounds} rounds;"
        " median, p95 and p99 of release -> next observes leadership"
    )
    print("- next in line: a fresh election each round (joined in order), the leader leaves")
    print("- rotation: the leader leaves and joins again at the tail, round after round")
    if not args.impl:
        if not kazoo_installed():
            print(skipped_note("kazoo"))
        why = curator_missing()
        if why is not None:
            print(f"note: Curator's LeaderLatch is not measured: {why}")
    hand_impls = [i for i in impls if i != "Curator"]
    if args.warm_up > 0 and {"first", "rotation"} & set(measures):
        warm = argparse.Namespace(**{**vars(args), "rounds": args.warm_up})
        for impl in hand_impls:
            measure("handoff", impl, args.hosts, warm, args.scale)
    if "first" in measures:
        first = measure_in_passes("first", impls, args)
        print("\n".join(report_handoff("next in line", first)))
    if "rotation" in measures:
        handoff = measure_in_passes("handoff", hand_impls, args)
        print("\n".join(report_handoff("rotation", handoff)))
    scales = [s for s in (args.small_scale, args.scale) if s] if "join" in measures else []
    for scale in scales:
        print()
        print(
            f"join at scale: M={scale} participants on one session, then {args.handoffs} hand-offs"
        )
        joins = {impl: measure("join", impl, args.hosts, args, scale) for impl in hand_impls}
        print("\n".join(report_join(scale, joins)))
    print(f"\n({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
