"""Every ```python block of README.md and docs/ runs against a real ZooKeeper, or says it is a fragment.

A block runs in one of two ways (docs/contributing.md says the same to writers):

- a whole program (it calls ``anyio.run(`` or ``asyncio.run(``, or tests
  ``__name__ == "__main__"``) runs as a subprocess, as a reader would run it;
- any other block runs as the body of an async function (top-level ``await``,
  ``async with`` and ``async for`` allowed), with ``aiocoord`` imported, ``coord``
  a connected coordinator, and the stand-ins below for the reader's own work.

Both see ``AIOCOORD_HOSTS`` set to the test server and a fresh ``AIOCOORD_NAMESPACE``.
A block marked ``<!-- fragment -->`` on the line before its fence is only compiled.
A failing block is reported by file and line; tracebacks point into the Markdown.
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import secrets
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.testing import ZooKeeperServer

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FRAGMENT = "<!-- fragment -->"
BLOCK_TIMEOUT = 20.0
PROGRAM_TIMEOUT = 60.0
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_PROGRAM = re.compile(r"\banyio\.run\(|\basyncio\.run\(|__name__ == .__main__.")
# Fence languages that would slip past this test: Python is written ```python.
_OTHER_PYTHON = {"py", "py3", "python3", "pycon", "pyi"}


async def _stand_in(*args: Any, **kwargs: Any) -> None:
    """The reader's own work, which the docs call but do not define."""


# Names the docs call for "your code here"; each is an async function that does nothing.
STAND_INS = (
    "run_as_leader",
    "run_query",
    "run_report",
    "write_report",
    "refresh_reports",
    "append_to_ledger",
)


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, the line of its opening fence, its text."""

    path: Path
    line: int
    info: str
    code: str
    fragment: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def program(self) -> bool:
        return bool(_PROGRAM.search(self.code))

    def source(self) -> str:
        """The code with its Markdown line numbers: line 1 of the code is the line after the fence."""
        return "\n" * self.line + self.code


def blocks_of(path: Path, text: str | None = None) -> Iterator[Block]:
    """Every fenced block of a Markdown page, with whether the line before it marks a fragment."""
    lines = (path.read_text() if text is None else text).splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        end = i + 1
        while end < len(lines) and not (
            lines[end].strip().startswith(fence) and not lines[end].strip().strip(fence[0])
        ):
            end += 1
        body = "\n".join(line[indent:] for line in lines[i + 1 : end])
        marked = i > 0 and lines[i - 1].strip() == FRAGMENT
        yield Block(path, i + 1, opening["info"].lower(), body + "\n", marked)
        i = end + 1


def python_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks_of(page) if b.info == "python"]


def _compile(block: Block) -> Any:
    return compile(
        block.source(), str(block.path.relative_to(ROOT)), "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )


def _failure(block: Block, exc: BaseException) -> str:
    trace = "".join(traceback.format_exception(exc))
    return (
        f"{block.where}: this block does not run (mark it {FRAGMENT} on the line before "
        f"the fence if it is not meant to)\n{trace}"
    )


async def run_block(block: Block, coord: aiocoord.Coordinator) -> None:
    """Run a block as an async function's body; raise AssertionError naming its file and line."""
    namespace: dict[str, Any] = {"__name__": "__docs__", "aiocoord": aiocoord, "coord": coord}
    namespace.update(dict.fromkeys(STAND_INS, _stand_in))
    try:
        with anyio.fail_after(BLOCK_TIMEOUT):
            result = eval(_compile(block), namespace)
            if result is not None:  # a coroutine when the block awaits at top level
                await result
    except Exception as exc:
        raise AssertionError(_failure(block, exc)) from None


def run_program(block: Block, env: dict[str, str], tmp: Path) -> None:
    """Run a whole-program block as a reader would: ``python file.py``."""
    script = tmp / "program.py"
    script.write_text(block.source())
    done = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=PROGRAM_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (
        f"{block.where}: this program exits {done.returncode}\n"
        f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    )


def _env(server: ZooKeeperServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIOCOORD_")}
    env["AIOCOORD_HOSTS"] = server.connect_string
    env["AIOCOORD_NAMESPACE"] = f"/docs-{secrets.token_hex(4)}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


BLOCKS = python_blocks()
RUNNABLE = [b for b in BLOCKS if not b.fragment and not b.program]
PROGRAMS = [b for b in BLOCKS if not b.fragment and b.program]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """One loop is enough here: the recipes' own tests run on asyncio and uvloop."""
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
async def test_block_runs(
    block: Block, zk_server: ZooKeeperServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("AIOCOORD_")]:
        monkeypatch.delenv(name)
    for name, value in _env(zk_server).items():
        if name.startswith("AIOCOORD_"):
            monkeypatch.setenv(name, value)
    with anyio.fail_after(BLOCK_TIMEOUT + 10):
        async with aiocoord.connect() as coord:
            await run_block(block, coord)


@pytest.mark.parametrize("block", PROGRAMS, ids=[b.where for b in PROGRAMS])
def test_program_runs(block: Block, zk_server: ZooKeeperServer, tmp_path: Path) -> None:
    run_program(block, _env(zk_server), tmp_path)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_block_compiles(block: Block) -> None:
    """Fragments too are Python: a sketch that is not belongs in a ```text block."""
    try:
        _compile(block)
    except SyntaxError as exc:
        pytest.fail(_failure(block, exc))


def test_python_is_fenced_as_python() -> None:
    """A block fenced ```py (or python3, pycon) would escape this test."""
    wrong = [b.where for page in PAGES for b in blocks_of(page) if b.info in _OTHER_PYTHON]
    assert not wrong, f"fence these as ```python: {wrong}"


def test_fragment_markers_stand_before_python_blocks() -> None:
    """A marker that marks nothing (a blank line crept in, or the fence is not python) is a mistake."""
    stray = []
    for page in PAGES:
        found = list(blocks_of(page))
        marked = {b.line - 1 for b in found if b.fragment and b.info == "python"}
        inside = {n for b in found for n in range(b.line, b.line + b.code.count("\n") + 2)}
        stray += [
            f"{page.relative_to(ROOT)}:{n}"
            for n, line in enumerate(page.read_text().splitlines(), start=1)
            if line.strip() == FRAGMENT and n not in marked and n not in inside
        ]
    assert not stray, f"{FRAGMENT} not on the line before a ```python fence: {stray}"


def test_the_pages_have_runnable_blocks() -> None:
    """The test would pass vacuously if the parser found nothing."""
    assert len(RUNNABLE) >= 8 and PROGRAMS, (len(RUNNABLE), len(PROGRAMS))


@pytest.mark.anyio
async def test_a_failing_block_is_named_by_file_and_line(coordinator: aiocoord.Coordinator) -> None:
    page = ROOT / "docs" / "example.md"
    block = Block(page, 7, "python", "x = 1\nawait undefined_helper(x)\n", fragment=False)
    with pytest.raises(AssertionError) as failed:
        await run_block(block, coordinator)
    message = str(failed.value)
    assert message.startswith("docs/example.md:7: this block does not run")
    assert 'File "docs/example.md", line 9' in message
    assert "NameError: name 'undefined_helper' is not defined" in message


def test_blocks_and_fragments_are_found() -> None:
    text = (
        "# t\n\n```python\nx = 1\n```\n\n"
        f"{FRAGMENT}\n```python\nawait it()\n```\n\n"
        "- item\n\n  ```python\n  y = 2\n  ```\n\n```bash\nls\n```\n"
    )
    page = ROOT / "docs" / "t.md"
    found = list(blocks_of(page, text))
    assert [(b.line, b.info, b.code, b.fragment) for b in found] == [
        (3, "python", "x = 1\n", False),
        (8, "python", "await it()\n", True),
        (14, "python", "y = 2\n", False),
        (18, "bash", "ls\n", False),
    ]


API_MODULES = (
    "aiocoord",
    "aiocoord.server",
    "aiocoord.testing",
    "aiocoord.integrations.fastapi",
    "aiocoord.metrics",
)


def documented_api() -> set[str]:
    """Identifiers the API pages render: ``::: name`` and the names in its ``members:`` list."""
    found: set[str] = set()
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        current = ""
        for line in page.read_text().splitlines():
            if line.startswith(":::"):
                current = line[3:].strip()
                found.add(current)
            elif current and (member := re.fullmatch(r"\s+- (\w+)", line)):
                found.add(f"{current}.{member[1]}")
    return found


def test_every_public_name_is_in_the_api_reference() -> None:
    """A new export needs a ``::: aiocoord.Name`` line on one of the docs/api pages."""
    documented = documented_api()
    missing = []
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        missing += [
            f"{module_name}.{n}" for n in module.__all__ if f"{module_name}.{n}" not in documented
        ]
    assert not missing, f"not in any docs/api page: {missing}"
