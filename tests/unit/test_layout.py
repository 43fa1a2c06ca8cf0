"""The package's layout: no module reaches into another folder's private modules.

Each folder below owns its private modules (names starting with ``_``); code
outside it uses what the folder's ``__init__`` and public modules export (for
recipes, their ``describe`` API).  Every module under ``aiocoord/`` is parsed
with `ast` (imports under ``TYPE_CHECKING`` and inside functions included),
relative imports are resolved, and every crossing is listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "aiocoord"

# Imports that cross a folder's boundary today, outside aiocoord/cli, while the
# restructuring moves them behind public names.  This list must shrink to empty;
# aiocoord/cli may never appear in it.  Each entry: (importing module, private module).
ALLOWED: frozenset[tuple[str, str]] = frozenset({})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _folders() -> list[str]:
    """The folders that own private modules: each recipe folder and the top-level wings."""
    recipes = [
        f"aiocoord.recipes.{p.name}"
        for p in sorted((PACKAGE / "recipes").iterdir())
        if (p / "__init__.py").is_file()
    ]
    wings = ["scheduler", "zk", "integrations", "cli", "inspection", "server", "testing"]
    return recipes + [f"aiocoord.{w}" for w in wings if (PACKAGE / w / "__init__.py").is_file()]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package that `name` (at `path`) imports, resolved."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from folder import _module` imports a module too.
            found.update(
                f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules
            )
    return {m for m in found if m == "aiocoord" or m.startswith("aiocoord.")}


def _private_to(module: str, folder: str) -> bool:
    """Whether `module` is a private module inside `folder` (at any depth below it)."""
    if not module.startswith(folder + "."):
        return False
    return any(part.startswith("_") for part in module[len(folder) + 1 :].split("."))


def violations() -> set[tuple[str, str]]:
    modules = _modules()
    folders = _folders()
    found: set[tuple[str, str]] = set()
    for name, path in modules.items():
        for imported in _imports(name, path, modules):
            for folder in folders:
                inside = name == folder or name.startswith(folder + ".")
                if not inside and _private_to(imported, folder):
                    found.add((name, imported))
    return found


def test_no_module_imports_another_folders_private_modules() -> None:
    found = violations()
    new = sorted(found - ALLOWED)
    for importer, private in sorted(found):
        mark = "allowed for now" if (importer, private) in ALLOWED else "VIOLATION"
        print(f"{mark}: {importer} imports {private}")
    assert not new, "private modules imported across folders:\n" + "\n".join(
        f"  {importer} imports {private}" for importer, private in new
    )


def test_the_cli_is_never_allowed_an_exception() -> None:
    assert not [entry for entry in ALLOWED if entry[0].startswith("aiocoord.cli")]


def test_allowed_list_only_holds_imports_still_there() -> None:
    """An entry whose import is gone must leave the list, so that it only shrinks."""
    stale = sorted(ALLOWED - violations())
    assert not stale, f"remove from ALLOWED (fixed): {stale}"


def test_the_walk_finds_a_crossing() -> None:
    """The check itself can fail: a private import from outside the folder is caught."""
    assert _private_to("aiocoord.recipes.cas_lock._record", "aiocoord.recipes.cas_lock")
    assert not _private_to("aiocoord.recipes.cas_lock.describe", "aiocoord.recipes.cas_lock")
    assert not _private_to("aiocoord.recipes._change_signal", "aiocoord.recipes.cas_lock")
    modules = _modules()
    walk = _imports("aiocoord.inspection._walk", PACKAGE / "inspection" / "_walk.py", modules)
    assert "aiocoord.recipes.cas_lock" in walk and "aiocoord.zk.paths" in walk
    assert "aiocoord.inspection" in _folders()
    assert "aiocoord.recipes.leader_latch._latch" in _imports(
        "aiocoord.recipes.leader_latch",
        PACKAGE / "recipes" / "leader_latch" / "__init__.py",
        modules,
    )
