"""The package's metadata: one version, an SPDX license, typed, and the wheel checked by the check.

The wheel itself is built, installed into a fresh virtualenv and used by
``scripts/wheel-smoke`` (a step of ``scripts/check``); these read the
declarations it relies on.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

import aiocoord
from aiocoord.cli import main

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_version_is_written_in_one_place() -> None:
    project = PROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    attr = PROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "aiocoord.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", aiocoord.__version__)
    source = (ROOT / "aiocoord" / "__init__.py").read_text(encoding="utf-8")
    assert (
        source.count(f'__version__ = "{aiocoord.__version__}"') == 1
    )  # a literal setuptools reads


def test_version_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"aiocoord {aiocoord.__version__}\n"


def test_license_classifiers_and_typing() -> None:
    project = PROJECT["project"]
    assert project["license"] == "Apache-2.0"  # SPDX, not the deprecated table
    assert (ROOT / "LICENSE").is_file() and project["license-files"] == ["LICENSE"]
    classifiers = project["classifiers"]
    assert not [c for c in classifiers if c.startswith("License ::")]  # the SPDX string says it
    assert "Typing :: Typed" in classifiers
    minimum = project["requires-python"].removeprefix(">=")
    assert f"Programming Language :: Python :: {minimum}" in classifiers
    assert (ROOT / "aiocoord" / "py.typed").is_file()
    assert "py.typed" in PROJECT["tool"]["setuptools"]["package-data"]["aiocoord"]


def test_the_check_builds_and_smoke_tests_the_wheel() -> None:
    dev = " ".join(PROJECT["project"]["optional-dependencies"]["dev"])
    assert "build" in dev and "twine" in dev
    assert "./scripts/wheel-smoke" in (ROOT / "scripts" / "check").read_text(encoding="utf-8")
    smoke = (ROOT / "scripts" / "wheel-smoke").read_text(encoding="utf-8")
    for step in (
        "-m build",
        "twine check",
        "-m venv",
        "--version",
        "inspect --help",
        "bench --quick",
        "the wheel holds the library only",
    ):
        assert step in smoke, step


PEERS = ("kazoo", "arq", "matplotlib")  # the benchmarks' peers: dev dependencies only


def _peer_imports(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in PEERS]
    return found


def test_the_package_is_the_library_only() -> None:
    """The benchmarks (peers, Java, plots) are benchmarks/ of the checkout, not in the wheel.

    scripts/wheel-smoke checks the built wheel itself; this checks what it is built from.
    """
    assert PROJECT["tool"]["setuptools"]["packages"]["find"]["include"] == [
        "aiocoord",
        "aiocoord.*",
    ]
    extras = PROJECT["project"]["optional-dependencies"]
    assert "bench" not in extras
    assert all(peer in " ".join(extras["dev"]) for peer in ("kazoo", "matplotlib"))
    shipped = PROJECT["project"]["dependencies"] + [
        dep for name, deps in extras.items() if name != "dev" for dep in deps
    ]
    assert not [dep for dep in shipped if dep.startswith(PEERS)]
    assert "benchmarks" in PROJECT["tool"]["mypy"]["files"]
    assert (ROOT / "benchmarks" / "__init__.py").is_file()
    package = ROOT / "aiocoord"
    assert not (package / "bench").exists()
    assert not [p for p in package.rglob("*") if p.suffix in {".java", ".jar", ".class"}]
    assert [i for p in sorted(package.rglob("*.py")) for i in _peer_imports(p)] == []
    # The walk sees what it looks for: the benchmarks do import the peers.
    assert _peer_imports(ROOT / "benchmarks" / "session.py")
