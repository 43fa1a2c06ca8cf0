"""The arq-shaped benchmark keeps working: ``python -m benchmarks.arq_shape`` with tiny sizes.

Skipped where Debian's ``redis-server`` or the ``arq`` package (the ``dev``
extra) is missing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server"),
    pytest.mark.skipif(importlib.util.find_spec("arq") is None, reason="arq is not installed"),
]


@pytest.mark.slow_tier  # a minute or more: ./scripts/check -m slow_tier
@pytest.mark.timeout(480)
@pytest.mark.parametrize("ensemble", [0, 3], ids=["standalone", "ensemble"])
def test_arq_shape_prints_both_systems_with_costs_per_job(ensemble: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    args = ["--sizes", "60", "--rounds", "1", "--warmup", "10", "--server-warmup", "20"]
    args += ["--ensemble", str(ensemble)]
    small = ["--steady-seconds", "1", "--rate", "20", "--backlog", "100"]
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.arq_shape", *args, *small],
        env=env,
        cwd=ROOT,  # as the docs say to run it
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    header = next(line for line in out.splitlines() if "arq jobs/s" in line)
    assert "zk req/job" in header and "zk wr/job" in header
    row = next(line for line in out.splitlines() if line.split()[:1] == ["60"])
    assert "x" in row  # the ratio
    assert "steady 20 jobs/s" in out and "arq p50" in out and "aiocoord p50" in out
    assert "backlog 100 jobs" in out
    # Each member's CPU on an ensemble, the one server's otherwise.
    cpu = next(line for line in out.splitlines() if "aiocoord  total" in line)
    assert ("server3" in cpu) == bool(ensemble) and ("server " in cpu) != bool(ensemble)
