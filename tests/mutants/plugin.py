"""``pytest -p tests.mutants.plugin``: apply the mutant named by ``AIOCOORD_MUTANT`` to the run."""

from __future__ import annotations

import sys

import pytest

from . import ENV, apply_from_env


def pytest_configure(config: pytest.Config) -> None:
    name = apply_from_env()
    if name is not None:
        config.stash[_KEY] = name
        sys.stderr.write(f"mutant applied ({ENV}): {name}\n")  # shown even with -q


def pytest_report_header(config: pytest.Config) -> str | None:
    name = config.stash.get(_KEY, None)
    return None if name is None else f"mutant applied ({ENV}): {name}"


_KEY = pytest.StashKey[str]()
