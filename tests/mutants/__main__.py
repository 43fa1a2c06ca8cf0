"""``python -m tests.mutants``: every mutant against a short campaign and its recipe's tests.

For each mutant of `tests.mutants.MUTANTS` (or those named), with
``AIOCOORD_MUTANT`` set to it:

- a short fault campaign (``--seconds``, default 30 s, one seed) whose
  participant faults are all aimed at the holders of the resource the mutant
  breaks, and only of the kinds that can show its defect (`KINDS`): caught
  if the checker reports a violation (which ones: "how");
- the recipe's own tests (`Mutant.tests`, through ``pytest -p
  tests.mutants.plugin``): caught if one fails.

First the same campaign runs without a mutant (the baseline, ``none``): it
must pass, or a catch would mean nothing.  Prints a table (mutant, property
broken, what caught it and how) and exits 1 if the baseline failed or any
mutant was caught by neither.  ``--only campaign`` / ``--only tests`` runs
one half.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..chaos.campaign import CampaignConfig, run_campaign
from ..chaos.report import Report
from . import ENV, MUTANTS

REPO = Path(__file__).resolve().parents[2]

# Whose holders a mutant's campaign aims its faults at (see tests.chaos.faults.AIMS).
AIMS: dict[str, tuple[str, ...]] = {
    "none": ("latch", "lock", "mutex", "selector", "assigner", "job", "cron"),
    "latch_no_cancel": ("latch",),
    "mutex_no_wait": ("mutex",),
    "cron_no_cas": ("cron",),
    "ack_before_run": ("job",),
    "lease_no_deadline": ("lock",),
    "cache_no_resync": ("latch", "lock", "mutex"),  # every participant runs a cache: any will do
    # Every participant is a member, a counter and a barrier participant: any will do.
    "membership_no_recreate": ("latch", "lock", "mutex"),
    "counter_no_cas": ("latch", "lock", "mutex"),
    "barrier_enters_early": ("latch", "lock", "mutex"),
    # Two leaders at once from the start: any fault will do, but the selector's holders
    # change hands most (and with them who is paired with the Java selector).
    "selector_latch_layout": ("selector",),
}
# The participant faults that can show a mutant's defect (default: every kind).  A CAS-lock
# holder's own deadline matters only when it is cut off for longer than its lease while its
# session lives on; two cron leaders race only when a frozen one wakes up.
KINDS: dict[str, tuple[str, ...]] = {
    "lease_no_deadline": ("net_pause_long", "net_pause_short"),
    "cron_no_cas": ("stop_short", "stop_long", "net_pause_long"),
    # A cache misses changes only while it is cut off and its process runs on.
    "cache_no_resync": ("cut", "net_pause_short", "net_pause_long", "expire"),
    # A member's node goes only with its session: expiries, and pauses past the session timeout.
    "membership_no_recreate": ("expire", "net_pause_long", "stop_long"),
}


@dataclass(slots=True)
class Row:
    mutant: str
    breaks: str
    campaign: str = "not run"
    campaign_caught: bool = False
    tests: str = "not run"
    tests_caught: bool = False
    seconds: float = 0.0

    @property
    def caught(self) -> bool:
        return self.campaign_caught or self.tests_caught


@contextmanager
def _mutant(name: str | None) -> Iterator[None]:
    old = os.environ.pop(ENV, None)
    if name is not None:
        os.environ[ENV] = name
    try:
        yield
    finally:
        os.environ.pop(ENV, None)
        if old is not None:
            os.environ[ENV] = old


def _how(report: Report) -> str:
    """The violations a campaign found, by kind."""
    kinds = [
        ("overlaps", len(report.overlaps)),
        ("stale writes", len(report.stale_accepted)),
        ("token order", len(report.token_order)),
        ("windows twice", len(report.double_windows)),
        ("windows missed", len(report.missed_windows)),
        ("cron times twice", len(report.double_firings)),
        ("jobs lost", len(report.jobs_lost)),
        ("errors", len(report.errors)),
        ("crashes", len(report.crashes)),
        ("liveness", len(report.liveness)),
        ("gaps", len(report.long_gaps)),
        ("cache versions back", len(report.cache_backwards)),
        ("cache final views", len(report.cache_final)),
        ("members missing", len(report.recipes.members_missing)),
        ("dead members listed", len(report.recipes.members_ghosts)),
        ("counter values doubled", len(report.recipes.counters_doubled)),
        ("counter values out of order", len(report.recipes.counters_order)),
        ("counter finals off", len(report.recipes.counters_final)),
        ("barrier early enters", len(report.recipes.barriers_early_enter)),
        ("barrier early leaves", len(report.recipes.barriers_early_leave)),
    ]
    found = ", ".join(f"{n} {k}" for k, n in kinds if n)
    res = sorted({o.res for o in report.overlaps})
    if res:
        found += f" (overlaps of {', '.join(res)})"
    return found or "no violation"


def campaign(name: str | None, args: argparse.Namespace, row: Row) -> None:
    cfg = CampaignConfig(
        seed=args.seed,
        seconds=args.seconds,
        calm=args.calm,
        aimed=1.0,
        aims=AIMS.get(name or "none"),
        kinds=KINDS.get(name or "none"),
        echo=(lambda _: None) if args.quiet else print,
        directory=(args.dir / (name or "none")) if args.dir else None,
        keep=args.dir is not None,
    )
    with _mutant(name):
        result = run_campaign(cfg)
    report = result.report
    hits = sum(report.aimed.values())
    row.campaign_caught = not report.ok
    row.campaign = f"{_how(report)}; {sum(report.faults.values())} faults, {hits} hit a holder"
    if not report.ok:
        row.campaign += f"; logs {result.directory}"


def recipe_tests(name: str, row: Row) -> None:
    tests = MUTANTS[name].tests
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.mutants.plugin", "-q", "-x"]
    cmd += ["--timeout", "180", *tests]
    with _mutant(name):
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    failed = re.findall(r"^FAILED (\S+)", out, re.MULTILINE)
    summary = re.findall(r"=+ (.*(?:passed|failed|error).*?) =+$", out, re.MULTILINE)
    if proc.returncode == 1 and failed:
        row.tests_caught = True
        row.tests = f"{failed[0].split('[')[0]} failed"
    elif proc.returncode == 0:
        row.tests = f"all passed ({summary[-1] if summary else ''})"
    else:
        row.tests = f"pytest exit {proc.returncode}: {summary[-1] if summary else out[-300:]}"


def table(rows: list[Row]) -> str:
    lines = [
        "| mutant | property broken | campaign | recipe tests | caught |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r.mutant == "none":
            verdict = "baseline: " + ("passes" if not r.campaign_caught else "FAILS")
        else:
            by = [w for w, c in (("campaign", r.campaign_caught), ("tests", r.tests_caught)) if c]
            verdict = f"yes ({' + '.join(by)})" if by else "**NO**"
        lines.append(f"| {r.mutant} | {r.breaks} | {r.campaign} | {r.tests} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("mutants", nargs="*", help=f"default: all ({', '.join(MUTANTS)})")
    parser.add_argument("--seconds", type=float, default=30.0, help="each campaign's faults")
    parser.add_argument("--calm", type=float, default=8.0)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--only", choices=("campaign", "tests"), default=None)
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated campaign")
    parser.add_argument("--dir", type=Path, default=None, help="keep every campaign's logs here")
    parser.add_argument("--quiet", action="store_true", help="print only the table")
    args = parser.parse_args(argv)
    names = args.mutants or list(MUTANTS)
    unknown = [n for n in names if n not in MUTANTS]
    if unknown:
        parser.error(f"no such mutant: {', '.join(unknown)} (one of {', '.join(MUTANTS)})")
    rows: list[Row] = []
    if args.only != "tests" and not args.no_baseline:
        row = Row("none", "(the library as it is)", tests="-")
        started = time.monotonic()
        campaign(None, args, row)
        row.seconds = time.monotonic() - started
        rows.append(row)
        print(f"mutants: baseline campaign: {row.campaign}", flush=True)
    for name in names:
        row = Row(name, MUTANTS[name].breaks)
        started = time.monotonic()
        if args.only != "tests":
            campaign(name, args, row)
        if args.only != "campaign":
            recipe_tests(name, row)
        row.seconds = time.monotonic() - started
        rows.append(row)
        print(f"mutants: {name}: campaign {row.campaign}; tests {row.tests}", flush=True)
    print(table(rows))
    baseline_ok = all(not r.campaign_caught for r in rows if r.mutant == "none")
    missed = [r.mutant for r in rows if r.mutant != "none" and not r.caught]
    if not baseline_ok:
        print("mutants: FAILED: the unmutated campaign reports violations")
    if missed:
        print(f"mutants: FAILED: not caught: {', '.join(missed)}")
    if baseline_ok and not missed:
        print(f"mutants: every mutant caught ({len(names)})")
    return 0 if baseline_ok and not missed else 1


if __name__ == "__main__":
    sys.exit(main())
