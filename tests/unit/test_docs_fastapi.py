"""docs/fastapi.md says what a user gets: the extra runs the documented command, the 503
body is the real one, and its code imports every module it uses."""

from __future__ import annotations

import ast
import builtins
import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "fastapi.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_the_fastapi_extra_installs_the_server_the_doc_runs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = project["optional-dependencies"]["fastapi"]
    assert any(re.match(r"uvicorn\b", requirement) for requirement in extra), extra
    text = DOC.read_text()
    assert "uvicorn app:app" in text and "pip install 'aiocoord[fastapi]'" in text


def test_the_documented_503_body_is_the_real_one() -> None:
    """FastAPI wraps an HTTPException's detail: the body is {"detail": {...}} (see
    test_fastapi's require_leader test for the live answer)."""
    text = " ".join(DOC.read_text().split())
    assert '`{"detail": {"error": "not the leader", "path": ..., "leader": ' in text
    assert '`{"error": "not the leader"' not in text


def test_the_doc_code_imports_the_modules_it_uses() -> None:
    blocks = _python_blocks(DOC.read_text())
    assert blocks
    for block in blocks:
        tree = ast.parse(block)
        bound: set[str] = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        # Names the reader fills in (refresh_reports) are fine; a module used unimported is not.
        missing = sorted(
            name for name in used - bound if importlib.util.find_spec(name) is not None
        )
        assert not missing, f"used without an import: {missing}\n{block}"
