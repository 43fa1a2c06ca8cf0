"""The short mutation check: fast mutants must fail their recipe's own tests.

The full check (every mutant against a short aimed campaign and its tests,
``python -m tests.mutants``, several minutes) is run on demand; see
docs/reliability.md.  Here five mutants whose recipe tests take seconds run in
a child pytest with ``AIOCOORD_MUTANT`` set: each must make a test fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mutants import ENV, MUTANTS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name",
    ["mutex_no_wait", "cron_no_cas", "counter_no_cas", "barrier_enters_early", "tasks_no_turns"],
)
def test_a_mutant_fails_its_recipe_tests(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env[ENV] = name
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.mutants.plugin", "-q", "-x"]
    cmd += ["-k", "asyncio", "--timeout", "60", *MUTANTS[name].tests]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=110)
    out = proc.stdout + proc.stderr
    assert f"mutant applied ({ENV}): {name}" in out, out[-2000:]
    assert proc.returncode == 1 and "FAILED" in out, f"{name} was not caught:\n{out[-2000:]}"
