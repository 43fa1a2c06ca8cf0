"""The package's layout: private modules stay private, layers point down, no cycles.

Every module under ``aiocoord/`` is parsed with `ast` (imports under
``TYPE_CHECKING`` and inside functions included) and its imports resolved
(relative ones too).  Three rules follow:

1. Each folder owns its private modules (names starting with ``_``): code
   outside it uses what the folder's ``__init__`` and public modules export
   (for recipes, their ``describe`` API).  The folders are every package
   found on disk, so a new one is covered without being named here.
2. The package is built in `LAYERS`: a module imports only from its own unit
   or from a lower layer, never from a higher one nor from another unit of its
   own layer.  Every unit found on disk must have a layer.
3. No import cycle: no two modules import each other, directly or through
   other modules.
4. No module reaches into another package's objects through their
   underscored attributes (``client._session``); see `attribute_violations`.

And a public module's private names (``_helper``) are its own.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "aiocoord"

# Imports that cross a folder's boundary.  This list stays empty; aiocoord/cli may
# never appear in it.  Each entry: (importing module, private module).
ALLOWED: frozenset[tuple[str, str]] = frozenset({})

# The units of the package from the bottom up: a module may import its own unit and
# the layers below its own.  A unit is a top-level module (``aiocoord.settings``), a
# top-level folder (``aiocoord.zk``), or a recipe folder (``aiocoord.recipes.mutex``);
# ``aiocoord.recipes`` is the recipes' shared modules (``_tenure``, ``_sequential``).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("aiocoord.errors",),
    # Base helpers, each needing only the errors (the backoff: nothing of ours).
    (
        "aiocoord._backoff",
        "aiocoord._broadcast",
        "aiocoord._embedded_record",
        "aiocoord._lifecycle",
        "aiocoord._paths",
        "aiocoord._settings_env",
        "aiocoord._status_view",  # what a recipe says of itself on a status page
    ),
    ("aiocoord.settings",),
    ("aiocoord.zk",),
    # The record codec: node data is bounded by ZooKeeper's packet limit (zk.client.MAX_DATA).
    ("aiocoord._records",),
    ("aiocoord.session",),
    # Argument checks: "coord must be a Coordinator", seconds.
    ("aiocoord._checks",),
    ("aiocoord.recipes",),
    ("aiocoord.recipes._queue",),  # the one sequential-node queue under every lock
    ("aiocoord.recipes.cache",),  # the one home for watching a node or a subtree
    # Nodes kept while a block runs, groups, discovery; shared values and barriers.
    ("aiocoord.recipes.membership", "aiocoord.recipes.values"),
    (
        "aiocoord.recipes.cas_lock",
        "aiocoord.recipes.leader_latch",
        "aiocoord.recipes.mutex",
        "aiocoord.recipes.task_leadership",
    ),
    ("aiocoord.recipes.cron",),  # runs its jobs under task leadership
    ("aiocoord.scheduler",),  # elects its assigner with a leader latch
    ("aiocoord.inspection", "aiocoord.metrics"),
    ("aiocoord.integrations",),
    ("aiocoord.blocking",),  # the session and the recipes from threaded code, through a portal
    ("aiocoord",),  # the public face re-exports the library; nothing in it imports the face
    # The tools: a real ZooKeeper server, test servers and faults, the command.
    ("aiocoord.server",),
    ("aiocoord.testing",),
    ("aiocoord.cli",),
    ("aiocoord.__main__",),
)
# Import cycles allowed: none.  Each entry would be the modules of one cycle.
ALLOWED_CYCLES: frozenset[frozenset[str]] = frozenset()
# Underscored attributes read on another package's objects: none, ever (rule 4).
# Each entry would be (module, attribute expression).
ALLOWED_ATTRIBUTES: frozenset[tuple[str, str]] = frozenset()
# The session's own units: they may use its underscored attributes.
SESSION_UNITS = ("aiocoord.zk", "aiocoord.session")
# Python documents these names of a NamedTuple as public (underscored only so as
# not to clash with field names).
NAMEDTUPLE_API = frozenset({"_asdict", "_field_defaults", "_fields", "_make", "_replace"})

Graph = dict[str, set[str]]


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def _folders(package: Path = PACKAGE) -> list[str]:
    """Every folder of the package (each one owns its private modules), found on disk."""
    return sorted(
        _module_name(p, package) for p in package.rglob("__init__.py") if p.parent != package
    )


@functools.cache
def _import_statements(path: Path) -> tuple[tuple[str | None, int, tuple[str, ...]], ...]:
    """Each import statement of the file at `path` (module, level, names), wherever it stands."""
    found: list[tuple[str | None, int, tuple[str, ...]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module, node.level, tuple(a.name for a in node.names)))
    return tuple(found)


def _targets(name: str, path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """Each import of `name` (at `path`): the module it names, resolved, and the names taken."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    root = name.partition(".")[0]
    found: list[tuple[str, tuple[str, ...]]] = []
    for module, level, names in _import_statements(path):
        if level:
            base = package.split(".")
            base = base[: len(base) - (level - 1)]
            target = ".".join(base + ([module] if module else []))
        else:
            target = module or ""
        if target == root or target.startswith(root + "."):
            found.append((target, names))
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module of the package that `name` (at `path`) imports, its packages included."""
    found: set[str] = set()
    for target, names in _targets(name, path):
        found.add(target)
        # `from folder import _module` imports a module too.
        found.update(f"{target}.{n}" for n in names if f"{target}.{n}" in modules)
    return found


def _owner(module: str, modules: dict[str, Path]) -> str:
    """The module that defines `module` (a name inside a module resolves to that module)."""
    while module not in modules and "." in module:
        module = module.rpartition(".")[0]
    return module


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `name` depends on: for ``from x import y``, module ``x.y`` if it is one, else ``x``.

    A package imported only to reach its submodules is not a dependency: its
    ``__init__`` runs first anyway, and it is the submodule's code that is used.
    """
    found: set[str] = set()
    for target, names in _targets(name, path):
        if not names:
            found.add(_owner(target, modules))
        for n in names:
            sub = f"{target}.{n}"
            found.add(sub if sub in modules else _owner(target, modules))
    found.discard(name)
    return found


def _graph(package: Path = PACKAGE) -> Graph:
    modules = _modules(package)
    return {name: _edges(name, path, modules) for name, path in modules.items()}


# --- 1. private modules ------------------------------------------------------------------


def _private_to(module: str, folder: str) -> bool:
    """Whether `module` is a private module inside `folder` (at any depth below it)."""
    if not module.startswith(folder + "."):
        return False
    return any(part.startswith("_") for part in module[len(folder) + 1 :].split("."))


def violations(package: Path = PACKAGE) -> set[tuple[str, str]]:
    modules = _modules(package)
    folders = _folders(package)
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


def private_names(package: Path = PACKAGE) -> set[tuple[str, str]]:
    """Each private name (``_x``) of a public module imported by another module.

    A public module's private helpers are its own, wherever the importer is
    (``cli.jobs_command`` took ``_unreachable`` from ``cli.dashboard``): a
    helper two modules share belongs in a module of its own.
    """
    modules = _modules(package)
    found: set[tuple[str, str]] = set()
    for name, path in modules.items():
        for target, names in _targets(name, path):
            public = target in modules and not _private_to(target, target.partition(".")[0])
            for n in names:
                helper = n.startswith("_") and not n.startswith("__")
                if public and helper and f"{target}.{n}" not in modules:
                    found.add((name, f"{target}.{n}"))
    return found


def test_no_module_imports_a_private_name_of_a_public_module() -> None:
    found = sorted(private_names())
    assert not found, "private names imported:\n" + "\n".join(
        f"  {a} imports {b}" for a, b in found
    )


def test_the_private_name_check_catches_a_helper(tmp_path: Path) -> None:
    """The check itself can fail; a private module's names stay usable inside its folder."""
    package = _package(
        tmp_path,
        {
            "wing/__init__.py": "",
            "wing/dashboard.py": "def _unreachable(): pass\n",
            "wing/jobs.py": "from .dashboard import _unreachable\nfrom ._conn import _Pending\n",
            "wing/_conn.py": "class _Pending: pass\n",
        },
    )
    assert private_names(package) == {
        ("aiocoord.wing.jobs", "aiocoord.wing.dashboard._unreachable")
    }


def test_every_folder_is_checked() -> None:
    folders = _folders()
    for folder in ("recipes", "testing", "scheduler", "zk", "integrations", "cli", "inspection"):
        assert f"aiocoord.{folder}" in folders
    recipes = [p for p in (PACKAGE / "recipes").iterdir() if (p / "__init__.py").is_file()]
    assert recipes and all(f"aiocoord.recipes.{p.name}" in folders for p in recipes)


def test_the_walk_finds_a_crossing() -> None:
    """The check itself can fail: a private import from outside the folder is caught."""
    assert _private_to("aiocoord.recipes.cas_lock._record", "aiocoord.recipes.cas_lock")
    assert not _private_to("aiocoord.recipes.cas_lock.describe", "aiocoord.recipes.cas_lock")
    assert not _private_to("aiocoord.recipes._change_signal", "aiocoord.recipes.cas_lock")
    assert _private_to("aiocoord.recipes._change_signal", "aiocoord.recipes")
    modules = _modules()
    walk = _imports("aiocoord.inspection._walk", PACKAGE / "inspection" / "_walk.py", modules)
    assert "aiocoord.recipes.cas_lock" in walk and "aiocoord.zk.paths" in walk
    assert "aiocoord.recipes.leader_latch._latch" in _imports(
        "aiocoord.recipes.leader_latch",
        PACKAGE / "recipes" / "leader_latch" / "__init__.py",
        modules,
    )


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A synthetic ``aiocoord`` package under `tmp_path`: its ``__init__`` and `files`."""
    package = tmp_path / "aiocoord"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_a_new_folder_is_checked_without_being_named(tmp_path: Path) -> None:
    """A folder added tomorrow is covered: its private modules are its own."""
    package = _package(
        tmp_path,
        {
            "brand_new/__init__.py": "from ._inner import x\n",
            "brand_new/_inner.py": "x = 1\n",
            "other.py": "from .brand_new._inner import x\n",
        },
    )
    assert "aiocoord.brand_new" in _folders(package)
    assert violations(package) == {("aiocoord.other", "aiocoord.brand_new._inner")}


# --- 2. layers ---------------------------------------------------------------------------


def _unit(module: str, package: Path = PACKAGE) -> str:
    """The unit of `module`: its top-level module or folder, or its recipe folder."""
    parts = module.split(".")
    if len(parts) == 1:
        return module
    recipe = len(parts) > 2 and parts[1] == "recipes"
    if recipe and (package / "recipes" / parts[2] / "__init__.py").is_file():
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _layer_of() -> dict[str, int]:
    return {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def layer_violations(graph: Graph, package: Path = PACKAGE) -> set[tuple[str, str]]:
    """Each import (importer, imported) of a higher layer, or of another unit of the same layer."""
    layer = _layer_of()
    found: set[tuple[str, str]] = set()
    for importer, imported in sorted((a, b) for a, targets in graph.items() for b in targets):
        here, there = _unit(importer, package), _unit(imported, package)
        if here != there and layer.get(here, -1) <= layer.get(there, -1):
            found.add((importer, imported))
    return found


def _unplaced(package: Path = PACKAGE) -> list[str]:
    """The units found on disk that `LAYERS` does not place."""
    return sorted({_unit(name, package) for name in _modules(package)} - set(_layer_of()))


def test_every_unit_has_a_layer() -> None:
    """A new top-level module or folder must be given its place in `LAYERS`."""
    units = {_unit(name) for name in _modules()}
    listed = set(_layer_of())
    assert sum(len(layer) for layer in LAYERS) == len(listed), "a unit is listed twice"
    assert not _unplaced(), f"give these a layer in LAYERS: {_unplaced()}"
    gone = sorted(listed - units)
    assert not gone, f"remove from LAYERS (no such module or folder): {gone}"


def test_a_new_unit_needs_a_layer(tmp_path: Path) -> None:
    """The check itself can fail: a module or folder added tomorrow has no layer yet."""
    package = _package(
        tmp_path,
        {
            "errors.py": "",
            "brand_new.py": "",
            "wing/__init__.py": "",
            "recipes/__init__.py": "",
            "recipes/_shared.py": "",
            "recipes/queue/__init__.py": "",
        },
    )
    assert _unplaced(package) == [
        "aiocoord.brand_new",
        "aiocoord.recipes.queue",
        "aiocoord.wing",
    ]


def test_no_layer_imports_a_higher_one() -> None:
    found = sorted(layer_violations(_graph()))
    layer = _layer_of()
    assert not found, "imports against the layer order:\n" + "\n".join(
        f"  {a} (layer {layer.get(_unit(a), '?')}) imports {b} (layer {layer.get(_unit(b), '?')})"
        for a, b in found
    )


def test_the_layer_check_catches_an_upward_import() -> None:
    """The check itself can fail: a lower layer importing a higher one, or a sibling unit."""
    graph: Graph = {
        "aiocoord.settings": {"aiocoord.zk.paths"},  # settings sit below zk
        "aiocoord.zk.client": {"aiocoord._paths", "aiocoord.errors", "aiocoord.zk._wire"},
        "aiocoord.recipes.mutex._mutex": {"aiocoord.recipes.cas_lock"},  # same layer
        "aiocoord.recipes.cron._cron": {"aiocoord.recipes.task_leadership"},
    }
    assert layer_violations(graph) == {
        ("aiocoord.settings", "aiocoord.zk.paths"),
        ("aiocoord.recipes.mutex._mutex", "aiocoord.recipes.cas_lock"),
    }
    assert _unit("aiocoord.recipes._tenure") == "aiocoord.recipes"
    assert _unit("aiocoord.recipes.cron._cron") == "aiocoord.recipes.cron"
    assert _unit("aiocoord.cli.demo.run") == "aiocoord.cli"


# --- 3. cycles ---------------------------------------------------------------------------


def cycles(graph: Graph) -> set[frozenset[str]]:
    """The import cycles of `graph`: its strongly connected parts of two modules or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for start in sorted(graph):
        if start in index:
            continue
        # Tarjan's algorithm, iterative: each frame is a module and its targets left to visit.
        frames = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while frames:
            node, targets = frames[-1]
            target = next((t for t in targets if t in graph), None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    frames.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            frames.pop()
            if frames:
                parent = frames[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                part: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.add(frozenset(part))
    return found


def _show(cycle: frozenset[str], graph: Graph) -> str:
    return "  " + ", ".join(
        f"{a} -> {b}" for a in sorted(cycle) for b in sorted(graph[a]) if b in cycle
    )


def test_no_import_cycles() -> None:
    graph = _graph()
    found = cycles(graph)
    for cycle in sorted(found, key=sorted):
        mark = "allowed for now" if cycle in ALLOWED_CYCLES else "CYCLE"
        print(f"{mark}: {_show(cycle, graph)}")
    new = sorted(found - ALLOWED_CYCLES, key=sorted)
    assert not new, "import cycles:\n" + "\n".join(_show(c, graph) for c in new)


def test_allowed_cycles_are_still_there() -> None:
    """A cycle that is gone must leave `ALLOWED_CYCLES`, so that the list only shrinks."""
    stale = sorted(ALLOWED_CYCLES - cycles(_graph()), key=sorted)
    assert not stale, f"remove from ALLOWED_CYCLES (fixed): {[sorted(c) for c in stale]}"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, {frozenset({"a", "b"})}),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, {frozenset({"a", "b", "c"})}),
        ({"a": {"b", "c"}, "b": {"c"}, "c": set()}, set()),
        (
            {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c", "a"}},
            {frozenset({"a", "b"}), frozenset({"c", "d"})},
        ),
    ],
)
def test_the_cycle_check_finds_cycles(graph: Graph, expected: set[frozenset[str]]) -> None:
    assert cycles(graph) == expected


def test_a_type_only_import_makes_a_cycle(tmp_path: Path) -> None:
    """Imports under ``TYPE_CHECKING`` and inside functions count: both run somewhere."""
    package = _package(
        tmp_path,
        {
            "low.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import High\n"
            ),
            "high.py": "from .low import low\n",
            "lazy.py": "def f():\n    from . import late\n",
            "late.py": "import aiocoord.lazy\n",
            "fine.py": "from . import low, high\n",
        },
    )
    graph = _graph(package)
    assert graph["aiocoord.low"] == {"aiocoord.high"}
    assert graph["aiocoord.fine"] == {"aiocoord.low", "aiocoord.high"}
    assert cycles(graph) == {
        frozenset({"aiocoord.low", "aiocoord.high"}),
        frozenset({"aiocoord.lazy", "aiocoord.late"}),
    }


# --- 4. underscored attributes ---------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_privates(tree: ast.AST) -> set[str]:
    """The underscored names a module defines for its objects.

    An attribute assigned on ``self`` or ``cls`` (``self._x = ...``, annotated
    or not), a name assigned or annotated in a class body, a function or
    class named so (a method, a helper), and an entry of ``__slots__``.
    """
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else []
                if isinstance(stmt, ast.AnnAssign):
                    targets = [stmt.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.add(target.id)
                        slots = getattr(stmt, "value", None)
                        if target.id == "__slots__" and isinstance(slots, (ast.Tuple, ast.List)):
                            found.update(
                                e.value
                                for e in slots.elts
                                if isinstance(e, ast.Constant) and isinstance(e.value, str)
                            )
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _own(target.value):
                found.add(target.attr)
    return {name for name in found if _private(name)}


def _own(value: ast.expr) -> bool:
    """Whether `value` is the object of the class being defined: ``self``, ``cls``, ``super()``."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _foreign_modules(tree: ast.AST) -> set[str]:
    """The names bound by ``import x`` to a module outside aiocoord (``argparse``, say)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] != "aiocoord":
                    found.add(alias.asname or alias.name.partition(".")[0])
    return found


def attribute_violations(package: Path = PACKAGE) -> set[tuple[str, str]]:
    """Each read of an underscored attribute of another package's object: (module, expression).

    A *package* here is a unit of the layer rule: a top-level module, a
    top-level folder, or a recipe folder (`_unit`).  An object is *another
    package's* when its class is defined in another unit.  Types are not known
    to `ast`, so a name stands for its owners: ``x._name`` (one leading
    underscore) in a module is fine when ``x`` is ``self``, ``cls`` or
    ``super()``, or when ``_name`` is defined (see `_defined_privates`) by a
    module of the reader's own unit, or is a NamedTuple's public API
    (``_make``, ``_fields``, ...).  Anything else is a violation: ``_name``
    belongs to another unit's objects.  A module outside aiocoord imported as
    ``import argparse`` is no package of ours: its names (``argparse._SubParsersAction``,
    which typeshed gives as the return type of ``add_subparsers``) are its own
    business.  ``aiocoord.zk`` and ``aiocoord.session`` own the session and
    are not checked; every other module is, and nothing is allowed.
    """
    modules = _modules(package)
    trees = {
        name: ast.parse(path.read_text(encoding="utf-8"), str(path))
        for name, path in modules.items()
    }
    defined: dict[str, set[str]] = {}
    for name, tree in trees.items():
        defined.setdefault(_unit(name, package), set()).update(_defined_privates(tree))
    found: set[tuple[str, str]] = set()
    for name, tree in trees.items():
        unit = _unit(name, package)
        if unit in SESSION_UNITS:
            continue
        foreign = _foreign_modules(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _private(node.attr):
                continue
            value = node.value
            if _own(value) or node.attr in defined[unit] or node.attr in NAMEDTUPLE_API:
                continue
            if isinstance(value, ast.Name) and value.id in foreign:
                continue
            found.add((name, ast.unparse(node)))
    return found


def test_no_module_reads_another_packages_underscored_attributes() -> None:
    found = attribute_violations()
    new = sorted(found - ALLOWED_ATTRIBUTES)
    assert not new, "underscored attributes of another package's objects:\n" + "\n".join(
        f"  {module}: {expression}" for module, expression in new
    )


def test_the_attribute_allow_list_is_empty() -> None:
    """What a package lends its neighbours it declares (``client.session``); no exceptions."""
    assert not ALLOWED_ATTRIBUTES


def test_the_attribute_check_catches_a_back_door(tmp_path: Path) -> None:
    """The check itself can fail: a recipe reading ``client._session`` is caught."""
    package = _package(
        tmp_path,
        {
            "zk/__init__.py": "",
            "zk/client.py": (
                "class ZkClient:\n"
                "    def __init__(self, s):\n"
                "        self._session = s\n"
                "    def _peer(self, other):\n"
                "        return other._session\n"  # the session's own unit: fine
            ),
            "session.py": "def f(coord):\n    return coord._session\n",
            "recipes/__init__.py": "",
            "recipes/mutex/__init__.py": "",
            "recipes/mutex/_hold.py": (
                "import argparse\n"
                "class Hold:\n"
                "    __slots__ = ('_slot',)\n"
                "    _kept: int\n"
                "    def __init__(self, client):\n"
                "        self._state = client._session.state\n"  # the back door
                "        self._client = client\n"
                "    def other(self, hold, lease):\n"
                "        hold._slot, hold._kept, lease._dropped()\n"  # its own unit's names
                "        return self._client, super()._x, argparse._SubParsersAction\n"
            ),
            "recipes/mutex/_lease.py": "class Lease:\n    def _dropped(self):\n        pass\n",
            "recipes/cas_lock/__init__.py": "",
            "recipes/cas_lock/_lock.py": "def f(hold):\n    return hold._slot\n",
        },
    )
    assert attribute_violations(package) == {
        ("aiocoord.recipes.mutex._hold", "client._session"),
        ("aiocoord.recipes.cas_lock._lock", "hold._slot"),
    }


# The library's own parts: inside them the session's id, the wait for a connection and
# whether it closed come from the session port (``coord.client.session``), one route per
# need; the Coordinator's properties of the same names are the applications' (and the
# command's and the test tools') view.
LIBRARY_PARTS = ("aiocoord.recipes", "aiocoord.scheduler", "aiocoord.integrations")
PORT_FACTS = frozenset({"session_id", "wait_connected", "closed"})


def coordinator_routes(package: Path = PACKAGE) -> set[tuple[str, str]]:
    """Each ``coord.session_id`` (``wait_connected``, ``closed``) read in the library's parts.

    A receiver is taken for a coordinator when its last name is ``coord`` or
    ``_coord`` (``coord``, ``self._coord``, ``lock.coord``), as the library names them.
    """
    found: set[tuple[str, str]] = set()
    for name, path in _modules(package).items():
        if not any(name == part or name.startswith(part + ".") for part in LIBRARY_PARTS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Attribute) or node.attr not in PORT_FACTS:
                continue
            value = node.value
            last = value.id if isinstance(value, ast.Name) else getattr(value, "attr", "")
            if last in ("coord", "_coord"):
                found.add((name, ast.unparse(node)))
    return found


def test_the_library_reads_the_session_through_its_port() -> None:
    found = sorted(coordinator_routes())
    assert not found, "use coord.client.session for these:\n" + "\n".join(
        f"  {module}: {expression}" for module, expression in found
    )


def test_the_route_check_catches_a_second_route(tmp_path: Path) -> None:
    """The check itself can fail: a recipe asking the Coordinator for its session id."""
    package = _package(
        tmp_path,
        {
            "recipes/__init__.py": "",
            "recipes/mutex/__init__.py": "",
            "recipes/mutex/_mutex.py": (
                "async def f(self, coord, event):\n"
                "    await coord.wait_connected()\n"
                "    return self._coord.session_id, event.session_id, coord.client.session.closed\n"
            ),
            "cli/__init__.py": "",
            "cli/demo.py": "def f(coord):\n    return coord.session_id\n",  # a user's view
        },
    )
    assert coordinator_routes(package) == {
        ("aiocoord.recipes.mutex._mutex", "coord.wait_connected"),
        ("aiocoord.recipes.mutex._mutex", "self._coord.session_id"),
    }
