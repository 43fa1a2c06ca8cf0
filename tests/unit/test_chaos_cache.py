"""The campaign checker's cache rules, on synthetic logs (no server).

Per path a cache's events must follow from what it served (no version goes
backwards, no change of a version it does not hold, no node back after its
deletion), and its view when its participant stops must be fresh and equal
to the server's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import check
from tests.chaos.records import Record

pytestmark = pytest.mark.unit


def log(*events: tuple[str, float, dict[str, Any]]) -> list[Record]:
    records: list[Record] = [
        {"k": "config", "t": 0.0, "seed": 1, "roles": "cache", "session_timeout": 3.0},
        {"k": "phase", "t": 0.0, "name": "faults", "wall": 1_000_000.0},
        {"k": "cache_view", "t": 1.0, "p": "p1", "inc": 0, "cid": "c", "nodes": {"/a": [5, 5]}},
    ]
    for kind, t, data in events:
        records.append({"k": kind, "t": t, "p": "p1", "inc": 0, **data})
    return records


def ev(t: float, kind: str, path: str, node: list[int] | None, prev: list[int] | None) -> Any:
    return ("cache_ev", t, {"cid": "c", "ev": kind, "path": path, "node": node, "prev": prev})


def test_a_consistent_history_and_an_equal_final_view_pass() -> None:
    report = check(
        log(
            ev(2.0, "CHANGED", "/a", [5, 7], [5, 5]),
            ev(2.1, "STALE", "/", None, None),
            ev(2.2, "DELETED", "/a", None, [5, 7]),
            ev(2.3, "CREATED", "/a", [9, 9], None),
            ev(2.4, "FRESH", "/", None, None),
            ("cache_server", 3.0, {"nodes": {"/a": [9, 9]}}),
            ("cache_final", 4.0, {"cid": "c", "fresh": True, "nodes": {"/a": [9, 9]}}),
        )
    )
    assert report.ok, report.format()
    assert (report.cache_events, report.cache_resyncs, report.cache_final_checked) == (3, 1, 1)


@pytest.mark.parametrize(
    ("event", "why"),
    [
        (ev(2.0, "CHANGED", "/a", [5, 4], [5, 5]), "changed from (5, 5) to (5, 4)"),
        (ev(2.0, "CHANGED", "/a", [5, 9], [5, 3]), "changed from (5, 3) while it held (5, 5)"),
        (ev(2.0, "CREATED", "/a", [6, 6], None), "created while it held (5, 5)"),
        (ev(2.0, "DELETED", "/b", None, [1, 1]), "deleted (1, 1) while it held None"),
    ],
)
def test_an_event_that_does_not_follow_from_the_view_is_a_violation(event: Any, why: str) -> None:
    report = check(log(event))
    assert len(report.cache_backwards) == 1 and why in report.cache_backwards[0]
    assert not report.ok


def test_a_node_back_after_its_deletion_is_a_violation() -> None:
    report = check(
        log(ev(2.0, "DELETED", "/a", None, [5, 5]), ev(2.1, "CREATED", "/a", [5, 6], None))
    )
    assert "created (5, 6) after it deleted (5, 5)" in report.cache_backwards[0]


@pytest.mark.parametrize(
    ("final", "why"),
    [
        ({"cid": "c", "fresh": True, "nodes": {"/a": [5, 5], "/ghost": [6, 6]}}, "1 extra"),
        ({"cid": "c", "fresh": True, "nodes": {"/a": [5, 4]}}, "1 other versions"),
        ({"cid": "c", "fresh": False, "nodes": {"/a": [5, 5]}}, "stale when it stopped"),
        ({"cid": None, "fresh": False, "nodes": None}, "no cache held"),
    ],
)
def test_a_final_view_unlike_the_servers_is_a_violation(final: dict[str, Any], why: str) -> None:
    report = check(
        log(("cache_server", 3.0, {"nodes": {"/a": [5, 5]}}), ("cache_final", 4.0, final))
    )
    assert len(report.cache_final) == 1 and why in report.cache_final[0], report.cache_final
    assert "CACHE FINAL VIEW" in report.format()
