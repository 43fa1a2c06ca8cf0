"""docs/migrating.md: a Curator name aiocoord has an equivalent for is not said to have none."""

from __future__ import annotations

from pathlib import Path

import aiocoord
from aiocoord.recipes.leader_latch import LeaderLatch, leader_selector

DOCS = Path(__file__).parents[2] / "docs"


def _row(curator: str) -> list[str]:
    """The cells of the Curator table's row that starts with `curator`."""
    for line in (DOCS / "migrating.md").read_text().splitlines():
        if line.startswith(f"| `{curator}`"):
            return [cell.strip() for cell in line.strip("|").split("|")]
    raise AssertionError(f"no row for {curator} in docs/migrating.md")


def test_close_mode_leader_selector_and_mutex_rows_name_their_equivalents() -> None:
    """The rows said "none" or pointed elsewhere although these exist."""
    assert "close_mode" in LeaderLatch.__init__.__code__.co_varnames
    assert callable(leader_selector) and callable(aiocoord.mutex)
    for curator, ours in [
        ("LeaderLatch.CloseMode", 'close_mode="notify"'),
        ("LeaderSelector", "leader_selector("),
        ("InterProcessMutex", "mutex(coord, path)"),
    ]:
        row = _row(curator)
        assert row[1] != "none" and ours in row[1], row
