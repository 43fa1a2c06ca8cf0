"""One backoff: no wait under aiocoord/ doubles by a formula of its own.

Every retry that waits longer after each failure in a row does it through
`aiocoord._backoff` (`Backoff`, or its formula `grown`, which caps and never
overflows), so that a change of the rule is made once.  This check finds the
two shapes a doubling written out takes (``first * 2**failures`` and
``min(wait * 2, most)``) in the package's code, comments and strings left out.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from aiocoord._backoff import Backoff, grown

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "aiocoord"
HOME = PACKAGE / "_backoff.py"
_DOUBLING = re.compile(
    r"\b2(?:\.0)?\s*\*\*\s*[A-Za-z_(]|\bpow\(\s*2(?:\.0)?\s*,"  # first * 2**failures, pow(2, n)
    r"|\*=\s*2(?:\.0)?\b|\b(\w+)\s*=\s*\1\s*\*\s*2(?:\.0)?\b"  # wait *= 2, wait = wait * 2
    r"|min\([^()]*\*\s*2(?:\.0)?\s*[,)]"  # min(wait * 2, most), min(most, wait * 2)
)


def _code(source: str) -> str:
    """`source` with its comments and strings blanked, line by line."""
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            (row, col), (end_row, end_col) = token.start, token.end
            for number in range(row, end_row + 1):
                line = lines[number - 1]
                start = col if number == row else 0
                stop = end_col if number == end_row else len(line)
                lines[number - 1] = line[:start] + " " * (stop - start) + line[stop:]
    return "\n".join(lines)


def doublings(source: str) -> list[int]:
    """The lines of `source` that double a wait by a formula of their own."""
    code = _code(source).splitlines()
    return [n for n, line in enumerate(code, 1) if _DOUBLING.search(line)]


def test_no_module_doubles_a_wait_of_its_own() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != HOME
        for line in doublings(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use aiocoord._backoff (Backoff or grown) at:\n" + "\n".join(found)


def test_the_check_finds_every_shape_and_spares_constants() -> None:
    source = (
        "LIMIT = 2**31 - 1  # a constant\n"
        "wait = min(2.0, 0.05 * 2**failures)\n"
        "pause = 0.1 if joined else min(pause * 2, 2.0)\n"
        "text = 'min(pause * 2, 2.0)'  # in a string\n"
        "# wait = first * 2**n\n"
        "wait = min(most, wait * 2)\n"
        "wait *= 2\n"
        "wait = wait * 2.0\n"
        "delay = pow(2, tries)\n"
        "MASK = (1 << 40) - 1\n"
        "LIMIT = 10**DIGITS\n"
        "timeout = self._timeout() * 2\n"
        "call(*args, **kwargs)\n"
    )
    assert doublings(source) == [2, 3, 6, 7, 8, 9]


def test_the_forms_it_replaced_wait_the_same() -> None:
    """`grown` and a jitter-free `Backoff` give the waits the written-out doublings gave."""
    assert [grown(0.05, n, 2.0) for n in range(1, 8)] == [
        min(2.0, 0.05 * 2**n) for n in range(1, 8)
    ]
    registering = Backoff(0.04, 1.0, jitter=0.0)
    assert [registering.delay() for _ in range(7)] == [min(1.0, 0.02 * 2**n) for n in range(1, 8)]
    standing, pause, waits = Backoff(0.1, 2.0, jitter=0.0), 0.05, []
    for joined in (False, False, True, False, False, False, False, False):
        pause = 0.1 if joined else min(pause * 2, 2.0)
        if joined:
            standing.reset()
        waits.append((pause, standing.delay()))
    assert all(old == new for old, new in waits), waits


def test_grown_never_overflows_where_the_written_out_forms_did() -> None:
    """``0.02 * 2**failures`` raised OverflowError after about 1,070 failures in a row."""
    with pytest.raises(OverflowError):
        _ = 0.02 * 2**5000
    assert grown(0.02, 5000, 1.0) == 1.0
