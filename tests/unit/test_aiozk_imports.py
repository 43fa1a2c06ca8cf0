"""Only `aiocoord/zk/_wire.py` imports aiozk: the rest of the package sees typed values.

Walks every module of the package with `ast` (no import needed), so a new
``import aiozk`` anywhere else, even inside a function, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import aiocoord

PACKAGE = Path(aiocoord.__file__).parent
ALLOWED = {PACKAGE / "zk" / "_wire.py"}


def _imports_aiozk(tree: ast.AST) -> list[int]:
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "aiozk" or name.startswith("aiozk.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_the_wire_module_imports_aiozk() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 20
    offenders = {
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path in modules
        if path not in ALLOWED
        for line in _imports_aiozk(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    }
    assert offenders == set()
    assert _imports_aiozk(ast.parse((PACKAGE / "zk" / "_wire.py").read_text(encoding="utf-8")))


def test_the_walk_sees_every_form_of_import() -> None:
    source = """
import aiozk
import os, aiozk.protocol as p
from aiozk import protocol
from aiozk.protocol.stat import Stat
def late():
    import aiozk.recipes
from .aiozk import nothing
from aiozkish import nothing_either
"""
    assert _imports_aiozk(ast.parse(source)) == [2, 3, 4, 5, 7]
