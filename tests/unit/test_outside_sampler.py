"""`benchmarks.outside`: a command's RSS sampled from outside, and its trend after the first quarter."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks.outside import main, summary


def test_flat_memory_has_no_trend() -> None:
    samples = [(float(t), 100_000, 1.0) for t in range(0, 100, 5)]
    assert "trend after the first quarter +0.00 %" in summary(samples, None)


def test_growth_after_the_first_quarter_is_what_counts() -> None:
    # A jump in the first quarter (warm-up) is left out; 1 % a quarter after it is not.
    samples = [
        (float(t), 50_000 if t < 25 else 100_000 + 40 * (t - 25), 0.5) for t in range(0, 101, 5)
    ]
    line = summary(samples, None)
    assert "at 25 s" in line and "+3.00 %" in line, line


def test_run_limits_the_span_judged() -> None:
    samples = [(float(t), 100_000 if t <= 60 else 200_000, 0.5) for t in range(0, 101, 5)]
    assert "+0.00 %" in summary(samples, 60.0)


def test_a_command_is_sampled_until_it_exits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rss.txt"
    code = "import sys, time; b = bytearray(20_000_000); time.sleep(1.0); sys.exit(3)"
    assert main(["--every", "0.1", "--out", str(out), "--", sys.executable, "-c", code]) == 3
    rows = [line.split() for line in out.read_text().splitlines()]
    assert len(rows) >= 5
    assert max(int(r[1]) for r in rows) > 19_000  # the 20 MB it holds, in KiB
    assert capsys.readouterr().out.startswith("outside: RSS ")


def test_no_command_is_a_usage_error() -> None:
    with pytest.raises(SystemExit):
        main(["--every", "1"])
