"""The package's metadata: one version, an SPDX license, typed, and the wheel checked by the check.

The wheel itself is built, installed into a fresh virtualenv and used by
``scripts/wheel-smoke`` (a step of ``scripts/check``); these read the
declarations it relies on.
"""

from __future__ import annotations

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
    ):
        assert step in smoke, step
