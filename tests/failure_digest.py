"""``python -m tests.failure_digest JUNIT_XML``: each failed test's id and the end of its message.

`scripts/check` prints it last when the suite fails, so that a log read from its end (a CI
excerpt) still says which assertion failed and with what figures, not only which test.  Each
failure gets at most `LINES` lines of its message (the assertion's words come first, and
the soak's verdict table is where its own message ends) and the whole digest at most
`LIMIT` characters.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

LINES = 30
LIMIT = 12_000


def failures(junit: Path) -> Iterator[tuple[str, str]]:
    """``(test id, message)`` for every failed or erroring test case in a JUnit XML report."""
    for case in ET.parse(junit).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is not None:
                where = case.get("classname", "").replace(".", "/")
                name = f"{where}.py::{case.get('name', '')}" if where else case.get("name", "")
                yield name, _words(found.text or "") or (found.get("message") or "").strip()


def _words(traceback: str) -> str:
    """The failure's own lines of a pytest traceback (``E   …``), and where it was raised."""
    lines = traceback.rstrip().splitlines()
    said = [line[1:].strip() for line in lines if line.startswith("E ")]
    return "\n".join([*said, lines[-1].strip()]) if said else ""


def digest(junit: Path) -> str:
    """The digest of `junit`'s failures, or "" when none failed."""
    parts = []
    for name, message in failures(junit):
        lines = message.splitlines()
        shown = lines if len(lines) <= LINES else [*lines[:5], "[...]", *lines[-(LINES - 6) :]]
        parts.append("\n".join([f"--- {name}", *("  " + line for line in shown)]))
    text = "\n".join(["failures, in their own words:", *parts]) if parts else ""
    return text if len(text) <= LIMIT else text[: LIMIT - 5] + "\n[...]"


def main(argv: list[str]) -> int:
    """Print the digest of the report named in `argv`; 2 on a wrong call."""
    if len(argv) != 1:
        print("usage: python -m tests.failure_digest JUNIT_XML", file=sys.stderr)
        return 2
    text = digest(Path(argv[0]))
    if text:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
