"""``./scripts/check -m unit`` is the fast path the README promises: the unit tests, lint and
types, without the wheel, the docs site or the collection of the server tests.

The script is run in a copy of the repository's layout whose tools are stubs that
record how they were called, so nothing slow runs here.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _stub(path: Path, log: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/usr/bin/env bash\necho "{path.name} $*" >> "{log}"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run_check(tmp_path: Path, *args: str) -> list[str]:
    log = tmp_path / "calls.log"
    log.touch()
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check", tmp_path / "scripts" / "check")
    for tool in ("setup", "wheel-smoke", "docs"):
        _stub(tmp_path / "scripts" / tool, log)
    for tool in ("ruff", "mypy", "pytest"):
        _stub(tmp_path / ".venv" / "bin" / tool, log)
    done = subprocess.run(
        [str(tmp_path / "scripts" / "check"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines()


def test_the_unit_path_skips_the_wheel_the_docs_and_the_server_tests(tmp_path: Path) -> None:
    """It took 50 s: the wheel smoke test, the docs site, and every test file collected."""
    calls = _run_check(tmp_path, "-m", "unit")
    assert not [c for c in calls if c.startswith(("wheel-smoke", "docs"))], calls
    [pytest_call] = [c for c in calls if c.startswith("pytest")]
    assert "tests/unit" in pytest_call.split() and "-n" not in pytest_call.split()
    assert any(c.startswith("ruff check") for c in calls)
    assert any(c.startswith("mypy") for c in calls)


def test_the_whole_check_still_runs_everything(tmp_path: Path) -> None:
    calls = _run_check(tmp_path, "-x")
    assert [c.split()[0] for c in calls] == [
        "setup",
        "ruff",
        "ruff",
        "mypy",
        "pytest",
        "wheel-smoke",
        "docs",
    ]


def _setup_levels(tmp_path: Path, *args: str) -> tuple[list[str], str]:
    """Run a copy of scripts/setup whose every tool is a stub; the tools it ran and the stamp."""
    log = tmp_path / "calls.log"
    log.touch()
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy(ROOT / "scripts" / "setup", tmp_path / "scripts" / "setup")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = tmp_path / "bin"
    for tool in ("apt-get", "javac", "chromium", "chromedriver", "openssl", "nft"):
        _stub(bin_dir / tool, log)
    _stub(tmp_path / ".venv" / "bin" / "python", log)
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "setup"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return log.read_text().splitlines(), (
        tmp_path / ".venv" / ".aiocoord-install-stamp"
    ).read_text()


def test_the_demo_sets_up_its_runtime_only() -> None:
    """The demo installed the whole developer toolchain (a JDK, Chromium, Kerberos, 127 packages)."""
    lines = (ROOT / "scripts" / "demo").read_text().splitlines()
    assert "./scripts/setup runtime" in lines


def test_the_runtime_level_installs_the_package_without_extras(tmp_path: Path) -> None:
    calls, stamp = _setup_levels(tmp_path, "runtime")
    [pip] = [c for c in calls if c.startswith("python -m pip")]
    assert pip.split()[-1] == "."
    assert stamp.startswith("runtime ")


def test_the_dev_level_installs_the_extras_and_serves_the_runtime_level(tmp_path: Path) -> None:
    calls, stamp = _setup_levels(tmp_path)
    [pip] = [c for c in calls if c.startswith("python -m pip")]
    assert pip.split()[-1] == ".[dev,sasl]"
    assert stamp.startswith("dev ")
    again, _ = _setup_levels(tmp_path, "runtime")
    assert not [c for c in again[len(calls) :] if c.startswith("python -m pip")]
