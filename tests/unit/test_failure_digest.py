"""The check's closing digest: each failed test's id and the end of its message."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import failure_digest

pytestmark = pytest.mark.unit

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" tests="3">
<testcase classname="tests.zk.test_soak" name="test_one_minute_soak_passes_its_verdict">
<failure message="AssertionError: exit 1 [+100 more lines]">def test():
&gt;   assert done.returncode == 0, output
E   AssertionError: exit 1
{lines}E   verdict: FAIL

tests/zk/test_soak.py:70: AssertionError</failure></testcase>
<testcase classname="tests.zk.test_mutex" name="test_passes[asyncio]"/>
<testcase classname="tests.zk.test_mutex" name="test_errs[uvloop]">
<error message="failed on setup with &quot;OSError: port&quot;">trace</error></testcase>
</testsuite></testsuites>
"""


def test_it_names_each_failure_and_keeps_the_end_of_a_long_message(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(REPORT.format(lines="".join(f"E     row {n}\n" for n in range(100))))
    text = failure_digest.digest(junit)
    assert "--- tests/zk/test_soak.py::test_one_minute_soak_passes_its_verdict" in text
    assert "--- tests/zk/test_mutex.py::test_errs[uvloop]" in text
    assert "test_passes" not in text
    assert "AssertionError: exit 1" in text and "verdict: FAIL" in text
    assert "row 99" in text and "row 10\n" not in text and "[...]" in text
    assert "OSError: port" in text


def test_a_report_without_failures_prints_nothing(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        REPORT.replace("<failure", "<skipped")
        .replace("</failure>", "</skipped>")
        .replace("<error", "<skipped")
        .replace("</error>", "</skipped>")
    )
    assert failure_digest.digest(junit) == ""
