"""`StatusView`: what a recipe an application runs says of itself, for a status page.

Each recipe an application keeps running (a cache, a group membership, a
persistent or TTL node, service discovery, a job worker) answers
``status_view()`` from memory, without a request, with one `StatusView`.
The FastAPI integration's ``/coordination/status`` lists the views of every
recipe it runs (`aiocoord.integrations.fastapi.Coordination.run`), so it
needs no knowledge of each recipe: an object of the application's own that
has ``status_view()`` is listed the same way.

`facts` are shown to anyone who can read the status; `private` (ids of
processes, addresses, session ids) only with ``status_detail=True``, the
way the status redacts hosts, lock owners and worker ids.  Values are
JSON: str, int, float, bool, None, and lists and dicts of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ("Reports", "StatusView", "view_of")


@dataclass(frozen=True, slots=True)
class StatusView:
    """One recipe as a status page shows it.

    `kind` names the recipe as its factory does (``"tree_cache"``,
    ``"job_worker"``); `path` is its node or root; `state` a word in capitals
    (``"FRESH"``, ``"STALE"``, ``"PRESENT"``, ``"REGISTERED"``, ``"CLOSED"``...).
    """

    kind: str
    path: str
    state: str
    facts: Mapping[str, Any] = field(default_factory=dict)
    private: Mapping[str, Any] = field(default_factory=dict)

    def as_json(self, detail: bool) -> dict[str, Any]:
        """``{"kind", "path", "state", **facts}``, and `private` too with `detail`.

        A fact or private value named ``kind``, ``path`` or ``state`` does not
        replace those three.
        """
        out: dict[str, Any] = {**self.facts, **(self.private if detail else {})}
        out |= {"kind": self.kind, "path": self.path, "state": self.state}
        return {key: out[key] for key in ("kind", "path", "state", *out) if key in out}


def view_of(recipe: Reports, detail: bool) -> dict[str, Any]:
    """`recipe`'s view as JSON; a ``status_view()`` that raises is shown, not raised.

    One broken entry must not take the whole status page down with it: it is
    listed as ``{"kind": <its class>, "state": "ERROR", "error": <repr>}``.
    """
    try:
        view = recipe.status_view()
        if not isinstance(view, StatusView):
            raise TypeError(f"status_view() returned {type(view).__name__}, not a StatusView")
        return view.as_json(detail)
    except Exception as exc:  # a status page reports, it does not fail
        return {"kind": type(recipe).__name__, "path": None, "state": "ERROR", "error": repr(exc)}


@runtime_checkable
class Reports(Protocol):
    """An object that describes itself for a status page, from memory (never blocks)."""

    def status_view(self) -> StatusView: ...
