"""`StatusView.as_json` and `view_of`: what one recipe's entry in the status page looks like."""

from __future__ import annotations

from aiocoord._status_view import StatusView, view_of


class Broken:
    def status_view(self) -> StatusView:
        raise RuntimeError("its own defect")


class Fine:
    def status_view(self) -> StatusView:
        return StatusView("tree_cache", "/config", "FRESH", {"nodes": 2, "kind": "x"}, {"id": "p"})


def test_a_view_that_raises_is_listed_as_an_error_not_raised() -> None:
    assert view_of(Broken(), detail=False) == {
        "kind": "Broken",
        "path": None,
        "state": "ERROR",
        "error": "RuntimeError('its own defect')",
    }


def test_facts_do_not_replace_kind_path_or_state_and_private_needs_detail() -> None:
    assert view_of(Fine(), detail=False) == {
        "kind": "tree_cache",
        "path": "/config",
        "state": "FRESH",
        "nodes": 2,
    }
    assert view_of(Fine(), detail=True)["id"] == "p"
    assert list(view_of(Fine(), detail=True))[:3] == ["kind", "path", "state"]
