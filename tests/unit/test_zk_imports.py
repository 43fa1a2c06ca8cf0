"""No import cycle inside ``aiocoord/zk`` or between it and ``aiocoord/session.py``.

Every module is parsed with `ast`; imports under ``TYPE_CHECKING`` and inside
functions count.  Importing the package ``aiocoord.zk`` itself (its
``__init__``) is not an edge: every submodule runs it first anyway.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "aiocoord"


def _graph() -> dict[str, set[str]]:
    files = {f"aiocoord.zk.{p.stem}": p for p in (PACKAGE / "zk").glob("*.py")}
    files = {name.removesuffix(".__init__"): p for name, p in files.items()}
    files["aiocoord.session"] = PACKAGE / "session.py"
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = (
                    node.module or ""
                    if not node.level
                    else ".".join(part for part in (base, node.module) if part)
                )
                found |= {
                    t for a in node.names for t in (f"{target}.{a.name}", target) if t in files
                }
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in files}
        graph[name] = found - {name, "aiocoord.zk"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for dep in sorted(graph[name]):
            if (found := visit(dep, [*path, name])) is not None:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        if (found := visit(name, [])) is not None:
            return found
    return None


def test_no_import_cycle_in_zk_or_with_the_session() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_check_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    graph = _graph()
    assert "aiocoord.zk._session" in graph["aiocoord.zk._sending"]  # TYPE_CHECKING counts
    assert "aiocoord.zk._sending" not in graph["aiocoord.zk._session"]
