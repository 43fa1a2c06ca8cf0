"""Soak: every recipe and the scheduler under load and network faults for minutes, then a verdict.

Against one embedded standalone server, in one process, on `sessions`
coordinators (default 10), each behind a `FaultProxy` of its own:

- 500 leader latches: `latch_paths` (50) elections with one participant per
  session; a leader holds its term 2-20 s, then leaves and joins again;
- 20 CAS locks and `mutexes` (5) queued mutexes, each contended by
  `contenders` (3) holders on different sessions, held 20-200 ms at a time
  (a mutex holder writes through a fenced store with its token);
- `once_paths` (5) `once_per` jobs on a 1 s window, each called every
  0.1-0.3 s by `contenders` (3) callers on different sessions;
- `cron_workers` (3) `Cron` workers sharing `cron_jobs` (5) jobs that fire
  every second, each firing writing through the fenced store with
  ``firing.token``;
- task leadership over 200 tasks by `task_workers` (4) workers; in every
  sampling interval one of them leaves and joins again under a new id
  (between two samples, so that each sample sees them all);
- the scheduler: `job_workers` (3) workers, and a client submitting `job_rate`
  (100) jobs/s, each awaited to its result, at most `open_jobs` (200) open;
- every 5-15 s (`fault_every` 10 s on average) one session's connection is
  cut, or paused for less than its session timeout, or (one fault in ten,
  `expire_share`) for longer, so that the server expires the session and
  everything on it starts again on a new one.  The first fault (at
  `rehearse` s) expires the job client's session, the run's largest
  transient, so that its high-water mark in RSS falls in the warm-up.

Every `interval` (10 s) it samples this process's RSS (``/proc/self/status``)
and allocated heap blocks, file descriptors (``/proc/self/fd``), asyncio
tasks, the watches the coordinators hold and the server's (``wchs``), the
server's node count (``mntr``), and over the interval the p50/p99 of a job's
submit->result time, a lock's acquire wait, a round trip on an unfaulted
session, and the event loop's longest lateness.  At the end it stops the
faults and the submissions, waits (at most `drain` s) for the open jobs, and
checks the targets: after the warm-up (the longest of 10 % of the run, two
intervals, and the rehearsal plus four session timeouts) RSS, watches, tasks
and fds grow less than 5 % (`soak_verdict.growth`); no job lost; no two
terms of one latch, lock, mutex, once_per job, task or cron job overlap,
unless the earlier holder's SUSPENDED arrived during its term and it ended
within `grace` of it; fencing tokens in order; no once_per window run twice,
no cron time begun twice, every cron time begun (unless a fault excuses it:
`soak_verdict.missing_firings`); the absolute limits per fault
(`soak_limits.Limits`: reconnection, leaderless latches, watches back,
memory per fault); no exception that is not a `CoordError`.  Exits 1 if a
target fails.

    python -m benchmarks.soak [--seconds 600] [--interval 10] [--sessions 10]
        [--latch-paths 50] [--locks 20] [--contenders 3] [--tasks 200] [--task-workers 4]
        [--mutexes 5] [--once-paths 5] [--cron-workers 3] [--cron-jobs 5]
        [--job-rate 100] [--job-workers 3] [--fault-every 10] [--seed 1]
        [--rss-kib-per-fault 64] [--blocks-per-fault 200] [--watch-intervals 3]
        [--loop uvloop|asyncio] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

import aiocoord
from aiocoord.testing import FaultProxy, ZooKeeperServer

from .soak_limits import Limits, Recovery, format_recoveries, recoveries, recovery_targets
from .soak_load import (
    CRON_EVERY,
    cron_worker,
    follow,
    inject_faults,
    job_worker,
    latch_participant,
    lock_contender,
    make_scheduler,
    mutex_contender,
    once_caller,
    probe,
    submit_jobs,
    task_worker,
)
from .soak_record import LogCounter, Recorder, take_sample
from .soak_verdict import (
    Sample,
    Target,
    Term,
    double_firings,
    double_windows,
    format_samples,
    format_verdict,
    growth,
    missing_firings,
    overlaps,
    recipe_targets,
    token_disorder,
    verdict,
)

__all__ = ("Outcome", "SoakConfig", "figures", "main", "report", "run", "soak")

ROOT = "/soak"
CRON_TAIL = 10.0  # cron times later than this before the end are not checked for liveness
SETUP_ALLOWANCE = 120.0  # connecting, and stopping everything at the end


@dataclass(frozen=True, slots=True)
class SoakConfig:
    seconds: float = 600.0
    interval: float = 10.0
    warmup: float | None = None  # None: see warmup_s
    sessions: int = 10
    latch_paths: int = 50
    locks: int = 20
    contenders: int = 3
    tasks: int = 200
    task_workers: int = 4
    mutexes: int = 5
    once_paths: int = 5
    cron_workers: int = 3
    cron_jobs: int = 5
    job_rate: float = 100.0
    job_workers: int = 3
    session_timeout: float = 5.0
    fault_every: float = 10.0  # on average; each wait is 0.5-1.5 times this
    rehearse: float = 5.0  # when the job client's session is first expired (0: not)
    open_jobs: int = 200  # the job client's bound on jobs awaiting their result
    expire_share: float = 0.1
    result_ttl: float = 30.0
    drain: float = 60.0
    grace: float = 1.0
    rss_kib_per_fault: float = 64.0
    blocks_per_fault: float = 200.0
    watch_intervals: int = 3
    seed: int = 1

    @property
    def warmup_s(self) -> float:
        """The warm-up: 10 % of the run, two intervals, or until the rehearsal is well over."""
        if self.warmup is not None:
            return self.warmup
        rehearsal = self.rehearse + 4 * self.session_timeout if self.rehearse > 0 else 0.0
        return max(0.1 * self.seconds, 2 * self.interval, rehearsal)

    @property
    def limits(self) -> Limits:
        """The absolute limits per fault, from the session timeout and the interval."""
        return Limits(
            self.session_timeout,
            self.interval,
            watch_intervals=self.watch_intervals,
            rss_kib=self.rss_kib_per_fault,
            blocks=self.blocks_per_fault,
        )

    def cron_session(self, slot: int) -> int:
        """The session cron worker `slot` runs on."""
        return (3 + 3 * slot) % self.sessions


@dataclass(slots=True)
class Outcome:
    config: SoakConfig
    rec: Recorder
    log: LogCounter
    terms: list[Term] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    windows: int = 0  # once_per windows run (recorded)
    firings: int = 0  # cron firings begun
    doubled: list[tuple[str, float, int]] = field(default_factory=list)  # windows, cron times
    missing: list[tuple[str, float]] = field(default_factory=list)  # cron times never begun
    targets: list[Target] = field(default_factory=list)
    load: list[tuple[float, float, float]] = field(default_factory=list)  # at start, at end

    @property
    def passed(self) -> bool:
        return all(t.ok for t in self.targets)


async def soak(
    config: SoakConfig,
    server: ZooKeeperServer,
    echo: Callable[[str], None] = print,
    keep: Path | None = None,
) -> Outcome:
    """Run the soak against `server`; each sample is passed to `echo` as a table line.

    With `keep` (an existing directory), the records (terms, once_per runs,
    cron firings, connection states) are written there and kept, instead of
    in a temporary directory.
    """
    cfg = config
    proxies = [FaultProxy(*server.address).start() for _ in range(cfg.sessions)]
    try:
        with (
            tempfile.TemporaryDirectory(prefix="aiocoord-soak-") as scratch,
            LogCounter() as log,
        ):
            tmp = scratch if keep is None else str(keep)
            async with AsyncExitStack() as stack:

                async def connect(hosts: str) -> aiocoord.Coordinator:
                    return await stack.enter_async_context(
                        aiocoord.connect(hosts, session_timeout=cfg.session_timeout)
                    )

                coords = [await connect(p.connect_string) for p in proxies]
                direct = await connect(server.connect_string)
                rec = Recorder(Path(tmp) / "terms.tsv")
                outcome = Outcome(cfg, rec, log, load=[os.getloadavg()])
                await _load(outcome, server, proxies, coords, direct, echo)
            outcome.terms = rec.terms()
            runs, firings = rec.window_runs(), rec.firings()
            rec.save_states()
            rec.close()
    finally:
        for proxy in proxies:
            proxy.stop()
    rec.jobs.lost = sorted(rec.open_jobs)
    outcome.targets = verdict(
        outcome.samples,
        cfg.warmup_s,
        outcome.terms,
        rec.suspended,
        rec.jobs,
        sum(rec.errors.values()),
        grace=cfg.grace,
    )
    cron_sessions = {cfg.cron_session(k) for k in range(cfg.cron_workers)}
    limits = cfg.limits
    outcome.targets += recipe_targets(
        runs,
        firings,
        every=CRON_EVERY,
        until=cfg.seconds - CRON_TAIL,
        cron_faults=[f for f in rec.faults if f.session in cron_sessions],
        after=limits.leaderless,
        jobs=[f"j{k}" for k in range(cfg.cron_jobs)] if cfg.cron_workers else (),
        since=cfg.warmup_s,
    )
    outcome.windows = len({(r.resource, r.window) for r in runs if r.ok})
    outcome.firings = len(firings)
    outcome.doubled = [*double_windows(runs), *double_firings(firings)]
    outcome.missing = missing_firings(
        firings,
        CRON_EVERY,
        cfg.seconds - CRON_TAIL,
        [f for f in rec.faults if f.session in cron_sessions],
        limits.leaderless,
        jobs=[f"j{k}" for k in range(cfg.cron_jobs)] if cfg.cron_workers else (),
        since=cfg.warmup_s,
    )[0]
    stop = cfg.seconds if rec.stopped is None else rec.stopped
    latches = [t for t in outcome.terms if _kind(t) == "latch"]
    outcome.recoveries = recoveries(
        rec.faults, rec.states, latches, outcome.samples, cfg.warmup_s, stop, limits
    )
    outcome.targets += recovery_targets(outcome.recoveries, outcome.samples, cfg.warmup_s, limits)
    return outcome


async def _load(
    outcome: Outcome,
    server: ZooKeeperServer,
    proxies: Sequence[FaultProxy],
    coords: Sequence[aiocoord.Coordinator],
    direct: aiocoord.Coordinator,
    echo: Callable[[str], None],
) -> None:
    """Run every role and the faults for the run's time, sampling; then drain the jobs."""
    cfg, rec = outcome.config, outcome.rec
    rng = random.Random(cfg.seed)
    async with anyio.create_task_group() as tg:
        for i, coord in enumerate(coords):
            tg.start_soon(follow, coord, rec, i)
        tg.start_soon(probe, direct, rec)
        _start_roles(tg, cfg, rec, rng, coords)
        faults = anyio.CancelScope()

        async def run_faults() -> None:
            with faults:
                await inject_faults(
                    proxies,
                    rec,
                    random.Random(rng.random()),
                    cfg.fault_every,
                    cfg.session_timeout,
                    cfg.expire_share,
                    cfg.rehearse if cfg.rehearse > 0 else None,
                )

        tg.start_soon(run_faults)
        client = make_scheduler(coords[0], f"{ROOT}/jobs", cfg.result_ttl)
        stop = anyio.Event()
        with anyio.CancelScope() as drain:
            async with anyio.create_task_group() as jobs:
                jobs.start_soon(submit_jobs, client, rec, cfg.job_rate, cfg.open_jobs, stop, jobs)
                samples = outcome.samples
                while (due := (len(samples) + 1) * cfg.interval) <= cfg.seconds:
                    await anyio.sleep(max(0.0, due - rec.now()))
                    samples.append(await take_sample(rec, [*coords, direct], server.address))
                    echo(format_samples(samples[-1:], header=len(samples) == 1))
                await anyio.sleep(max(0.0, cfg.seconds - rec.now()))
                stop.set()
                faults.cancel()
                drain.deadline = anyio.current_time() + cfg.drain
        outcome.load.append(os.getloadavg())
        rec.stopped = rec.now()
        tg.cancel_scope.cancel()


def _start_roles(
    tg: anyio.abc.TaskGroup,
    cfg: SoakConfig,
    rec: Recorder,
    rng: random.Random,
    coords: Sequence[aiocoord.Coordinator],
) -> None:
    def own_rng() -> random.Random:
        return random.Random(rng.random())

    n = len(coords)
    for p in range(cfg.latch_paths):
        for i, coord in enumerate(coords):
            tg.start_soon(latch_participant, coord, rec, own_rng(), f"{ROOT}/latch/{p}", i)
    for lock in range(cfg.locks):
        for k in range(cfg.contenders):
            i = (lock * cfg.contenders + k) % n
            path = f"{ROOT}/lock/{lock}"
            tg.start_soon(lock_contender, coords[i], rec, own_rng(), path, f"s{i}.c{k}", i)
    for m in range(cfg.mutexes):
        for k in range(cfg.contenders):
            i = (m * cfg.contenders + k + 1) % n
            path = f"{ROOT}/mutex/{m}"
            tg.start_soon(mutex_contender, coords[i], rec, own_rng(), path, f"s{i}.m{k}", i)
    for w in range(cfg.once_paths):
        for k in range(cfg.contenders):
            i = (w * cfg.contenders + k + 2) % n
            path = f"{ROOT}/once/{w}"
            tg.start_soon(once_caller, coords[i], rec, own_rng(), path, f"s{i}.o{k}", i)
    for slot in range(cfg.cron_workers):
        i = cfg.cron_session(slot)
        tg.start_soon(
            cron_worker, coords[i], rec, own_rng(), f"{ROOT}/cron", cfg.cron_jobs, slot, i
        )
    tasks = [f"t{k}" for k in range(cfg.tasks)]
    for slot in range(cfg.task_workers):
        i = (2 + 3 * slot) % n
        root, slots = f"{ROOT}/tasks", cfg.task_workers
        tg.start_soon(task_worker, coords[i], rec, root, tasks, slot, slots, cfg.interval, i)
    for j in range(cfg.job_workers):
        i = (1 + 3 * j) % n
        tg.start_soon(job_worker, coords[i], rec, f"{ROOT}/jobs", cfg.result_ttl)


def _kind(term: Term) -> str:
    """latch, lock, mutex, once, task or cron."""
    if term.resource.startswith(ROOT):
        return term.resource.split("/")[2]
    return term.resource.split(":")[0]


def _counts(counter: Counter[str], top: int = 8) -> str:
    return ", ".join(f"{k} {v}" for k, v in counter.most_common(top)) or "none"


def report(outcome: Outcome) -> str:
    """The samples, what happened, the overlaps and errors found, and the verdict."""
    cfg, rec = outcome.config, outcome.rec
    kinds = Counter(_kind(t) for t in outcome.terms)
    load = " -> ".join("/".join(f"{x:.2f}" for x in avg) for avg in outcome.load)
    after = [(x.t, float(x.blocks)) for x in outcome.samples if x.t >= cfg.warmup_s]
    trend = growth(after)
    heap = "n/a" if trend is None else f"{trend * 100:+.1f} %"
    logged = Counter({f"{level} {msg!r}": n for (level, _, msg), n in outcome.log.counts.items()})
    lines = [
        f"soak: {cfg.seconds:.0f} s, {cfg.sessions} sessions, "
        f"{cfg.latch_paths * cfg.sessions} latches ({cfg.latch_paths} paths x {cfg.sessions}), "
        f"{cfg.locks} CAS locks and {cfg.mutexes} mutexes x {cfg.contenders} contenders, "
        f"{cfg.once_paths} once_per x {cfg.contenders} callers, {cfg.cron_jobs} cron jobs "
        f"every {CRON_EVERY:g} s over {cfg.cron_workers} workers, {cfg.tasks} tasks over "
        f"{cfg.task_workers} workers joining and leaving, {cfg.job_rate:g} jobs/s over "
        f"{cfg.job_workers} workers; session timeout {cfg.session_timeout:g} s; seed {cfg.seed}",
        f"load average (1/5/15 min) at start -> at end: {load}",
        "",
        format_samples(outcome.samples),
        "",
        f"terms: {_counts(kinds)}",
        f"faults: {_counts(Counter(f.kind for f in rec.faults))}: "
        + ", ".join(f"{f.kind} s{f.session} {f.start:.0f}-{f.end:.0f}" for f in rec.faults),
        f"jobs: {rec.jobs.submitted} submitted, {rec.jobs.done} done, {rec.jobs.failed} failed, "
        f"{rec.jobs.wrong} wrong, {len(rec.jobs.lost)} lost",
        f"once_per windows run: {outcome.windows}; cron firings begun: {outcome.firings}; "
        f"cron outcomes written: {_counts(rec.cron_outcomes)} (missed: times given up)",
        f"fenced store: {rec.store.accepted} writes accepted, {rec.store.refused} refused "
        "(a stale token)",
        f"expected errors: {_counts(rec.counts)}",
        f"library log: {_counts(logged, 5)}",
        f"growth: the trend (Theil-Sen) over the samples from t={cfg.warmup_s:.0f} s on; "
        f"heap blocks (not a target: what RSS would show without fragmentation) {heap}",
    ]
    if rec.jobs.lost:
        lines.append("lost jobs: " + " ".join(rec.jobs.lost[:20]))
    for o in [o for o in overlaps(outcome.terms, rec.suspended, cfg.grace) if o.excused_by is None][
        :10
    ]:
        lines.append(f"OVERLAP {o.length:.3f} s: {o.first} and {o.second}")
    for first, second in token_disorder(outcome.terms)[:10]:
        lines.append(f"TOKEN ORDER: {first} then {second}")
    for resource, at, n in outcome.doubled[:10]:
        lines.append(f"RUN TWICE: {resource} at {at:.3f}: {n} times")
    for job, at in outcome.missing[:10]:
        lines.append(f"NEVER BEGUN: cron job {job} at t={at:.1f} s")
    if rec.errors:
        lines.append(f"UNEXPECTED ERRORS: {_counts(rec.errors)}")
    lines += [f"\n{tb}" for tb in rec.tracebacks[:3]]
    lines += [f"\nlibrary ERROR: {text}" for text in outcome.log.first_errors[:3]]
    lines += ["", format_recoveries(outcome.recoveries, cfg.limits)]
    lines += ["", format_verdict(outcome.targets)]
    return "\n".join(lines)


def figures(outcome: Outcome) -> dict[str, Any]:
    """The run as plain data: configuration, samples, what happened, and the targets."""
    rec = outcome.rec
    return {
        "config": asdict(outcome.config),
        "load": outcome.load,
        "samples": [asdict(s) for s in outcome.samples],
        "terms": dict(Counter(_kind(t) for t in outcome.terms)),
        "faults": dict(Counter(f.kind for f in rec.faults)),
        "jobs": asdict(rec.jobs),
        "windows": outcome.windows,
        "firings": outcome.firings,
        "cron_outcomes": dict(rec.cron_outcomes),
        "store": {"accepted": rec.store.accepted, "refused": rec.store.refused},
        "recoveries": [
            {
                **asdict(r.fault),
                "reconnect": r.reconnect,
                "leaderless": r.leaderless,
                "leaderless_path": r.leaderless_path,
                "watches_back": r.watches_back,
            }
            for r in outcome.recoveries
        ],
        "expected_errors": dict(rec.counts),
        "errors": dict(rec.errors),
        "targets": [asdict(t) for t in outcome.targets],
        "passed": outcome.passed,
    }


def run(
    config: SoakConfig,
    *,
    loop: str = "uvloop",
    echo: Callable[[str], None] = print,
    keep: Path | None = None,
) -> Outcome:
    """Start a server (fsync off, as in the other benchmarks), soak it, stop it."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    with ZooKeeperServer(extra_config={"forceSync": "no"}) as server:

        async def bounded() -> Outcome:
            with anyio.fail_after(config.seconds + config.drain + SETUP_ALLOWANCE):
                return await soak(config, server, echo, keep)

        main_fn: Callable[[], Awaitable[Outcome]] = bounded
        return anyio.run(
            main_fn, backend="asyncio", backend_options={"use_uvloop": loop == "uvloop"}
        )


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the soak, print the report; 0 if every target passed."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    defaults = SoakConfig()
    for f in fields(SoakConfig):
        value = getattr(defaults, f.name)
        if isinstance(value, tuple):
            continue
        kind = float if f.name == "warmup" else type(value)
        help = f"default {value}" if value is not None else "default: see the description"
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=value, help=help)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the records (terms, runs, firings, states) in this directory",
    )
    args = parser.parse_args(argv)
    loop, json_path = args.__dict__.pop("loop"), args.__dict__.pop("json")
    keep = args.__dict__.pop("keep")
    config = SoakConfig(**vars(args))
    outcome = run(config, loop=loop, echo=lambda line: print(line, flush=True), keep=keep)
    print()
    print(report(outcome), flush=True)
    if json_path is not None:
        json_path.write_text(json.dumps(figures(outcome), indent=1), encoding="utf-8")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
