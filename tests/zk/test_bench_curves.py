"""The scaling-curves benchmark keeps working: a tiny sweep writes its table, data and plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiocoord.testing import ZooKeeperServer
from benchmarks.curves import main
from benchmarks.curves_report import Point, growth, slope

pytest.importorskip("matplotlib")


def test_growth_names_the_slope_of_the_log_log_fit() -> None:
    flat = [Point(n, 5.0) for n in (10, 100, 1000)]
    line = [Point(n, 2.0 * n) for n in (10, 100, 1000)]
    inverse = [Point(n, 1000.0 / n) for n in (10, 100, 1000)]
    assert growth(slope(flat)) == "constant"
    assert growth(slope(line)) == "linear"
    assert growth(slope(inverse)) == "falls as 1/n"
    assert slope([Point(10, 1.0), Point(100, None)]) is None  # one point: no fit
    assert growth(None) == "-"


@pytest.mark.timeout(120)
def test_quick_sweep_writes_the_table_and_the_plots(
    zk_server: ZooKeeperServer, tmp_path: Path
) -> None:
    hosts = zk_server.connect_string
    main(["--quick", "--only", "locks,scheduler", "--out", str(tmp_path), "--hosts", hosts])
    table = (tmp_path / "curves.md").read_text()
    for heading in (
        "### Locks: acquire+release throughput",
        "### Scheduler: end-to-end throughput",
    ):
        assert heading in table
    locks, sched = table.split("### Scheduler")
    for k in (1, 4):  # --quick's sizes, each a row with a figure for aiocoord's mutex
        row = next(line for line in locks.splitlines() if line.startswith(f"| {k} |"))
        assert row.split("|")[2].strip() not in ("", "-"), row
    assert {line.split("|")[1].strip() for line in sched.splitlines() if line.startswith("| ")} >= {
        "1",
        "2",
    }
    for w in (1, 2):  # a figure for each, not the reason it was not measured
        row = next(line for line in sched.splitlines() if line.startswith(f"| {w} |"))
        assert row.split("|")[2].strip() not in ("", "-"), row
    for name in ("locks.png", "scheduler.png"):
        png = (tmp_path / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 1000

    (tmp_path / "locks.png").unlink()
    main(["--replot", "--out", str(tmp_path)])  # from curves.json, nothing measured
    assert (tmp_path / "locks.png").exists()
    assert (tmp_path / "curves.md").read_text() == table
