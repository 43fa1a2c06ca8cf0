"""The soak's one-minute version: every recipe and the scheduler under load and faults, no leak.

It runs ``python -m benchmarks.soak`` as a user would, at full counts (500 latches
over 10 sessions, 20 contended CAS locks, 5 contended mutexes, 5 once_per jobs,
5 cron jobs over 3 workers, 200 tasks with workers joining and leaving, 100
jobs/s) for 60 s, sampling every 5 s, with a fault every 5 s on average.  Seed 10 plans the job client's session expired twice (once as the
warm-up's rehearsal, once after it), cuts and a short pause.  The ten-minute
figures are in docs/reliability.md.  Every absolute limit per fault is judged
(reconnection, leaderless latches, watches back), except memory per fault, which
needs 20 faults after the warm-up and says n/a here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 60
TARGETS = {
    "RSS growth",
    "client watches growth",
    "server watches growth (wchs)",
    "tasks growth",
    "fds growth",
    "overlapping terms",
    "fencing tokens out of order",
    "jobs lost",
    "jobs failed or wrong",
    "unexpected errors",
    "once_per windows run twice",
    "cron times begun twice",
    "cron times never begun",
    "reconnect after a cut",
    "reconnect after a pause <= T",
    "reconnect after a pause > T",
    "latch leaderless per fault",
    "watches back after a fault",
    "RSS per fault",
    "heap blocks per fault",
}


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + 240)
def test_one_minute_soak_passes_its_verdict(tmp_path: Path) -> None:
    figures_path = tmp_path / "soak.json"
    command = [
        sys.executable,
        *("-m", "benchmarks.soak"),
        *("--seconds", str(SECONDS), "--interval", "5", "--fault-every", "5"),
        *("--seed", "10", "--json", str(figures_path)),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        command,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=SECONDS + 180,  # the soak bounds itself too: run time, drain and set-up
        check=False,
    )
    # The soak's verdict table ends its stdout: last, where a failure digest's end shows it.
    stderr_end = "\n".join(done.stderr.splitlines()[-80:])
    output = f"exit {done.returncode}\nstderr (its end):\n{stderr_end}\nstdout:\n{done.stdout}"
    assert done.returncode == 0, output
    assert done.stdout.rstrip().endswith("verdict: PASS"), output
    figures = json.loads(figures_path.read_text(encoding="utf-8"))
    assert figures["passed"], output
    assert {t["name"] for t in figures["targets"]} == TARGETS
    assert all(t["ok"] for t in figures["targets"]), output

    # It really ran: a sample every 5 s, every kind of fault, terms of every recipe, and the
    # jobs at a quarter of their rate at least (beside the suite on 2 cores they ran at 43
    # a second of the 100 asked), each one with its result.
    assert [round(s["t"] / 5) for s in figures["samples"]] == list(range(1, 13)), output
    assert set(figures["faults"]) == {"cut", "pause", "expire"}, output
    assert figures["terms"]["latch"] > 100 and figures["terms"]["task"] > 200, output
    assert figures["terms"]["lock"] > 1000 and figures["terms"]["mutex"] > 100, output
    assert figures["terms"]["once"] > 30 and figures["windows"] > 30, output
    assert figures["terms"]["cron"] > 100 and figures["firings"] > 100, output
    # Each fault's recovery was measured: a reconnection (or none needed) and a latch gap.
    assert len(figures["recoveries"]) == sum(figures["faults"].values()), output
    assert all(r["leaderless"] >= 0 for r in figures["recoveries"]), output
    jobs = figures["jobs"]
    assert jobs["done"] == jobs["submitted"] > 25 * SECONDS, output
    assert not figures["errors"], output
