"""mkdocs hook: inline code that names a public aiocoord object links to its API entry.

Docstrings and pages write `Coordinator`, `cas_lock()` or `aiocoord.testing.FaultProxy`
as plain inline code; this turns each such name into an optional cross-reference that
mkdocs-autorefs resolves once every page is rendered (a name with no API entry stays
plain code).  The public names are read from the ``__all__`` of the modules the API
reference documents, so a new export is linked as soon as it is documented.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

# Documented modules, most general first: a bare name means the first module that exports it.
MODULES = (
    "aiocoord",
    "aiocoord.testing",
    "aiocoord.integrations.fastapi",
    "aiocoord.metrics",
)

# Links, preformatted text and headings are left alone (no links inside links or headings).
_SKIP = re.compile(
    r"(<a\b.*?</a>|<pre\b.*?</pre>|<h[1-6]\b.*?</h[1-6]>|<autoref\b.*?</autoref>)", re.S
)
_CODE = re.compile(r"<code>((?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*)(\(\))?</code>")

_targets: dict[str, str] = {}


def exported(module: str) -> tuple[str, ...]:
    """The names in a module's ``__all__``, read from its source without importing it."""
    base = ROOT.joinpath(*module.split("."))
    source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            return tuple(value)
    return ()


def targets() -> dict[str, str]:
    """Inline-code text -> API identifier, for every documented public name."""
    found: dict[str, str] = {}
    for module in MODULES:
        for name in exported(module):
            found.setdefault(name, f"{module}.{name}")
            found[f"{module}.{name}"] = f"{module}.{name}"
    return found


def on_config(config: Any) -> Any:
    _targets.clear()
    _targets.update(targets())
    return config


def _link(match: re.Match[str]) -> str:
    identifier = _targets.get(match[1])
    if identifier is None:
        return match[0]
    return f'<autoref identifier="{identifier}" optional>{match[0]}</autoref>'


def on_page_content(html: str, **kwargs: Any) -> str:
    parts = _SKIP.split(html)
    # split() with one group alternates: text, skipped, text, skipped, ...
    return "".join(part if i % 2 else _CODE.sub(_link, part) for i, part in enumerate(parts))
