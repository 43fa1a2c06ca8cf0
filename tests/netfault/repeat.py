"""Run each network-fault scenario N times and tabulate passes and key figures.

    python -m tests.netfault.repeat --runs 10 [--only TEXT ...] [--out DIR]

As root (like the tier).  Each run of a scenario is one ``pytest -m netfault
NODEID -s`` in its own process, in rounds (every scenario once, then again),
so a loop cut short still covers them all.  Each run's output goes to
``DIR/logs/``; the pytest temporary directory (the participants' event logs and
stderr) is kept only for a failed run, under ``DIR/kept/``.  After every run
``DIR/summary.md`` (the table for docs/reliability.md) and
``DIR/runs.json`` (every run, its outcome and figures) are rewritten.
Figures are the ``NETFAULT-FIGURES`` lines the scenarios print
(`tests.netfault.figures`); each column is its median over the passed runs,
with the range.  ``AIOCOORD_NETFAULT_SECONDS`` (the impaired period of the
slow-link scenarios) is passed on; default here 20.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .figures import MARK

__all__ = ("SCENARIOS", "main")

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = (
    "tests/netfault/test_lab.py",
    "tests/netfault/test_member_cut_off.py",
    "tests/netfault/test_leader_isolated.py",
    "tests/netfault/test_blackhole.py::test_blackholed_client_lets_go_by_its_own_timers[both]",
    "tests/netfault/test_blackhole.py::test_blackholed_client_lets_go_by_its_own_timers[server-to-client]",
    "tests/netfault/test_slow_links.py::test_slow_lossy_links_lose_nothing",
    "tests/netfault/test_slow_links.py::test_lossy_links_lose_nothing",
    "tests/netfault/test_clock_skew.py::test_within_the_skew_one_holder_at_a_time",
    "tests/netfault/test_clock_skew.py::test_beyond_the_skew_two_holders_as_documented",
    "tests/netfault/test_clock_skew.py::test_once_per_windows_start_at_most_the_offset_early",
)


def slug(nodeid: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in nodeid.split("/")[-1]).strip("-")[:90]


def run_once(nodeid: str, run: int, out: Path, seconds: str) -> dict[str, Any]:
    name = f"{slug(nodeid)}.{run}"
    temp = out / "tmp" / name
    log = out / "logs" / f"{name}.log"
    env = {**os.environ, "AIOCOORD_NETFAULT_SECONDS": seconds}
    argv = [sys.executable, "-m", "pytest", "-m", "netfault", nodeid, "-s", "-q"]
    argv += ["-p", "no:randomly", "--basetemp", str(temp)]
    started = time.monotonic()
    with log.open("wb") as sink:
        code = subprocess.run(
            argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
        ).returncode
    text = log.read_text(errors="replace")
    figures = [json.loads(line[len(MARK) :]) for line in text.splitlines() if line.startswith(MARK)]
    skipped = code == 0 and " passed" not in text and "skipped" in text
    if code != 0:
        shutil.move(str(temp), str(out / "kept" / name))
    else:
        shutil.rmtree(temp, ignore_errors=True)
    outcome = "skipped" if skipped else "passed" if code == 0 else "FAILED"
    return {
        "nodeid": nodeid,
        "run": run,
        "outcome": outcome,
        "seconds": round(time.monotonic() - started, 1),
        "log": str(log),
        "figures": figures,
    }


def summary(results: list[dict[str, Any]]) -> str:
    """The markdown table: one row per scenario (and per figure group), runs, passes, figures."""
    rows: dict[str, dict[str, Any]] = {}
    for r in results:
        row = rows.setdefault(r["nodeid"], {"runs": 0, "passes": 0, "groups": defaultdict(list)})
        row["runs"] += 1
        row["passes"] += r["outcome"] == "passed"
        if r["outcome"] == "passed":
            for fig in r["figures"]:
                key = fig["scenario"] + (f", d {fig['d']:+g}s" if "d" in fig else "")
                row["groups"][key].append(fig)
    lines = [
        "| scenario | runs | passes | figures: median (range) over the passed runs |",
        "| --- | --- | --- | --- |",
    ]
    for nodeid, row in rows.items():
        name = nodeid.split("::")[-1].split("/")[-1]
        groups = row["groups"] or {"": []}
        for key, figs in groups.items():
            cells = []
            fields = [k for k in (figs[0] if figs else {}) if k not in ("scenario", "d")]
            for field in fields:
                values = [f[field] for f in figs if isinstance(f.get(field), int | float)]
                if not values:
                    continue
                lo, mid, hi = min(values), statistics.median(values), max(values)
                if lo == hi:
                    cells.append(f"{field} {mid:g}")
                else:
                    cells.append(f"{field} {mid:g} ({lo:g}–{hi:g})")
            label = f"{key} (`{name}`)" if key else f"`{name}`"
            lines.append(f"| {label} | {row['runs']} | {row['passes']} | {'; '.join(cells)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only", action="append", default=[], help="scenarios containing TEXT")
    parser.add_argument("--out", type=Path, default=Path("netfault-runs"))
    parser.add_argument("--seconds", default=os.environ.get("AIOCOORD_NETFAULT_SECONDS", "20"))
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1: {args.runs}")
    chosen = [s for s in SCENARIOS if not args.only or any(o in s for o in args.only)]
    if not chosen:
        parser.error(f"--only matches no scenario: {args.only}")
    out = args.out.resolve()
    for sub in ("logs", "kept", "tmp"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for run in range(1, args.runs + 1):
        for nodeid in chosen:
            result = run_once(nodeid, run, out, args.seconds)
            results.append(result)
            print(f"run {run} {result['outcome']} {result['seconds']:.0f}s {nodeid}", flush=True)
            (out / "runs.json").write_text(json.dumps(results, indent=1))
            (out / "summary.md").write_text(summary(results))
    print(summary(results))
    failed = [r for r in results if r["outcome"] == "FAILED"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
