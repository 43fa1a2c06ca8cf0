"""Every program in examples/ runs to completion against a real ZooKeeper and says what it should.

Each runs as a subprocess, as a user would run it, with ``AIOCOORD_HOSTS`` set to
the session's server and a fresh ``AIOCOORD_NAMESPACE``.  One example also
runs with ``AIOCOORD_HOSTS`` unset, so the embedded default (a server started
for the program in the per-user state folder, a temporary one here, and
stopped after it) is exercised too.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from aiocoord.testing import ZooKeeperServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT = 60

# What each example must print (regular expressions); an example not listed must exit 0.
EXPECTED: dict[str, list[str]] = {
    "leader_latch.py": [
        r"pod-\d: leader with token 0x[0-9a-f]+; in line: \['pod-\d', 'pod-\d', 'pod-\d'\]",
        r"3 terms, one leader at a time; tokens increase: True",
    ],
    "mutex.py": [
        r"(  pod-\d token=0x[0-9a-f]+\n){9}",
        r"9 appends, one holder at a time; tokens increase: True",
    ],
    "semaphore.py": [
        r"pod-1: rebuilt the catalogue alone \(token 0x[0-9a-f]+\)",
        r"partner API calls at once, at most: 2\n",
        r"readers of the catalogue at once, at most: [1-3]\n",
    ],
    "cron_once_per.py": [
        r"pod-\d: running the revenue query for the window",
        r"skip, window .* already ran at",
        r"runs in this window by these pods: 1\n",
    ],
    "rolling_upgrade.py": [
        r"leaders: a: .*; b: ",
        r"leaders: c: backup, billing, cleanup, digest, report, sync\n",
        r"done: the tasks followed the newest version",
    ],
    "config_watch.py": [
        r"pod-\d: new-checkout starts as \{'enabled': False, 'rev': 0\}",
        r"pod-\d: new-checkout is now on \(rev 3\)",
        r"3 pods ended on rev 3: True; revisions only rose: True",
    ],
    "discovery.py": [
        r"services: \['inventory', 'pricing'\]",
        r"round robin: \['pricing-0', 'pricing-1', 'pricing-0', 'pricing-1'\]",
        r"uri of pricing-0: http://127\.0\.0\.1:8000/prices",
        r"after two errors from pricing-0: \['pricing-1'\]",
        r"java instance: 10\.0\.0\.9:9090 \{'lang': 'java'\}",
        r"after pricing-1 stopped: \['pricing-0'\]",
    ],
    "threaded_web.py": [
        r"POST /jobs/sum: 202\n",
        r"GET /jobs/<id>: 200 \{'result': 3\}",
        r"POST /jobs/sum with a bad payload: 422\n",
        r"POST /ledger x8: \[200\]\n",
        r"8 appends, one holder at a time; tokens increase down the ledger: True",
    ],
    "fastapi_app.py": [
        r"cron tick on the leader",
        r"leader of /examples/api/cron-leader: pod-a; participants: 2\n",
        r"POST /admin/rebuild on pod-a: 200",
        r"POST /admin/rebuild on pod-b: 503 .*'leader': 'pod-a'",
        r"GET /coordination/health/ready on pod-b: 200",
        r"POST /jobs/report on pod-b: 202, Location /jobs/[0-9a-f]{32}\n",
        r"GET /jobs/[0-9a-f]{32}/result on pod-a: 200 .*'result': \{'region': 'eu', 'days': 7, 'orders': 294\}",
        r"POST /jobs/report with a bad payload: 422 \[\(\['body', 'days'\], 'Input should be a valid integer",
    ],
}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env.update(extra)
    return env


def run_example(
    name: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(name: str, zk_server: ZooKeeperServer) -> None:
    namespace = f"/examples-{secrets.token_hex(4)}"
    done = run_example(
        name, _env(AIOCOORD_HOSTS=zk_server.connect_string, AIOCOORD_NAMESPACE=namespace)
    )
    report = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    assert "Traceback" not in done.stderr, report
    for pattern in EXPECTED.get(name, []):
        assert re.search(pattern, done.stdout), f"{pattern!r} not printed\n{report}"


def test_examples_are_all_checked() -> None:
    """Every example this file knows still exists (a renamed one would silently lose its checks)."""
    present = {p.name for p in EXAMPLES.glob("*.py")}
    assert set(EXPECTED) <= present


def test_example_uses_the_embedded_default(tmp_path: Path) -> None:
    """With AIOCOORD_HOSTS unset, the example starts the embedded server in the per-user
    state folder (here a temporary one, through AIOCOORD_ZK_DIR), runs against it, and
    stops it again; nothing is written to the working directory."""
    folder = tmp_path / "state"
    work = tmp_path / "work"
    work.mkdir()
    done = run_example("leader_latch.py", _env(AIOCOORD_ZK_DIR=str(folder)), cwd=work)
    report = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0, report
    assert "started the embedded ZooKeeper at 127.0.0.1:" in done.stderr, report
    assert f"data in {folder}" in done.stderr, report
    assert "tokens increase: True" in done.stdout, report
    assert (folder / "zoo.cfg").is_file()
    assert not (folder / "server.json").exists()  # stopped: nothing left running
    assert list(work.iterdir()) == []
