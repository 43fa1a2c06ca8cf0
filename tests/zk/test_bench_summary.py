"""The peer table keeps working: ``python -m benchmarks.summary`` from a checkout's root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_summary_prints_aiocoord_against_its_peers() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.summary", "--seconds", "0.1"],
        env=env,
        cwd=ROOT,  # as the docs say to run it
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    table = done.stdout[done.stdout.index("benchmark ") :]
    for row in ("getData round trip", "getData pipelined", "lock acquire+", "leader hand-off"):
        line = next(line for line in table.splitlines() if line.startswith(row))
        assert line.count("x") >= 2 and "error" not in line, line  # a ratio to kazoo and aiozk
