"""`import aiocoord` stays light: the errors load, everything else on first use.

Each check runs in a fresh interpreter, so modules an earlier test imported do not
hide an eager import.  The lazy table in ``aiocoord/__init__.py`` is checked
against its ``TYPE_CHECKING`` imports (what type checkers see) and `__all__`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aiocoord

INIT = Path(__file__).resolve().parents[2] / "aiocoord" / "__init__.py"

# Modules a plain `import aiocoord` must not load: the optional wings, the
# session and recipes with what they pull in, and the heavy third-party packages.
HEAVY = (
    "aiocoord.scheduler",
    "aiocoord.integrations",
    "aiocoord.metrics",
    "aiocoord.cli",
    "aiocoord.inspection",
    "aiocoord.blocking",
    "aiocoord.testing",
    "aiocoord.recipes",
    "aiocoord.session",
    "aiocoord.settings",
    "aiocoord.zk",
    "fastapi",
    "starlette",
    "prometheus_client",
    "pydantic",
    "pydantic_settings",
    "anyio",
    "asyncio",
    "aiozk",
    "uvloop",
)


def _loaded_after(code: str) -> list[str]:
    """The modules loaded in a fresh interpreter after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def _heavy(loaded: list[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return [m for m in loaded if any(m == h or m.startswith(h + ".") for h in heavy)]


def test_import_loads_no_heavy_module() -> None:
    loaded = _loaded_after("import aiocoord")
    assert not _heavy(loaded)
    assert "aiocoord.errors" in loaded


def test_errors_need_nothing_more() -> None:
    loaded = _loaded_after(
        "import aiocoord\nassert issubclass(aiocoord.LockLost, aiocoord.CoordError)"
    )
    assert not _heavy(loaded)


def test_recipes_and_connect_load_neither_pydantic_nor_the_wings() -> None:
    """pydantic loads when a coordinator is built, the scheduler when it is named."""
    loaded = _loaded_after(
        "import aiocoord\naiocoord.LeaderLatch, aiocoord.connect, aiocoord.Mutex"
    )
    assert "aiocoord.recipes.leader_latch" in loaded
    later = (
        "aiocoord.scheduler",
        "aiocoord.integrations",
        "aiocoord.metrics",
        "aiocoord.cli",
        "aiocoord.testing",
        "pydantic",
        "fastapi",
        "prometheus_client",
    )
    assert not _heavy(loaded, later)


def test_every_public_name_resolves_in_a_fresh_interpreter() -> None:
    code = (
        "import aiocoord\n"
        "missing = [n for n in aiocoord.__all__ if getattr(aiocoord, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert set(aiocoord.__all__) <= set(dir(aiocoord))\n"
        "ns = {}\n"
        "exec('from aiocoord import *', ns)\n"
        "assert set(aiocoord.__all__) <= set(ns), set(aiocoord.__all__) - set(ns)\n"
        "from aiocoord import Scheduler, Settings, connect\n"
        "assert Settings.__module__ == 'aiocoord.settings'\n"
        "assert aiocoord.Scheduler is Scheduler and aiocoord.connect is connect\n"
        "assert aiocoord.zk.ZkClient is aiocoord.ZkClient\n"
    )
    assert "aiocoord.scheduler" in _loaded_after(code)


def test_the_blocking_facade_loads_when_named() -> None:
    """`from aiocoord import blocking` and `aiocoord.blocking` both work, and load anyio's portal."""
    loaded = _loaded_after(
        "import aiocoord\n"
        "from aiocoord import blocking\n"
        "assert aiocoord.blocking is blocking and blocking.connect is not None\n"
        "assert blocking.BlockingInEventLoopError is aiocoord.BlockingInEventLoopError\n"
    )
    assert "aiocoord.blocking" in loaded and "anyio.from_thread" in loaded


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        aiocoord.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def _type_checking_imports() -> dict[str, str]:
    """Name -> module (relative to the package) of the imports under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.level == 1 and imp.module
                for alias in imp.names:
                    assert alias.asname == alias.name, "re-export as `X as X`"
                    found[alias.name] = imp.module
    return found


def test_lazy_table_matches_what_type_checkers_see() -> None:
    """A name added to `__all__` needs its import under TYPE_CHECKING and its lazy entry."""
    seen = _type_checking_imports()
    lazy: dict[str, str] = aiocoord._LAZY
    assert lazy == seen
    eager = {n for n in aiocoord.__all__ if getattr(aiocoord, n).__module__ == "aiocoord.errors"}
    assert set(aiocoord.__all__) == eager | set(lazy)
    assert not eager & set(lazy)
