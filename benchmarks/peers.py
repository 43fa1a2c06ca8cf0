"""The optional peers of the benchmarks: whether each is installed, and the note when not.

aiozk is a dependency of aiocoord, so its recipes are always measured.  kazoo
is optional (in the ``dev`` extra: ``pip install -e '.[dev]'``): without it, its rows and
columns are skipped and each benchmark says so once, rather than failing.
"""

from __future__ import annotations

import importlib.util

__all__ = ("kazoo_installed", "skipped_note")


def kazoo_installed() -> bool:
    """Whether kazoo can be imported here."""
    return importlib.util.find_spec("kazoo") is not None


def skipped_note(peer: str = "kazoo") -> str:
    """The one line a benchmark prints when `peer` is not installed."""
    return f"note: {peer} is not installed, so it is not measured (pip install -e '.[dev]')"
