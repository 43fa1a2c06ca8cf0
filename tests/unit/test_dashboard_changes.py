"""The dashboard's change log: what two successive reads of a tree say happened."""

from __future__ import annotations

from typing import Any

from aiocoord.integrations._dashboard_changes import changes, recipes


def tree(*children: dict[str, Any]) -> dict[str, Any]:
    return {"path": "/app", "kind": "node", "children": [*children]}


def latch(leader: str | None, token: int = 0x1F) -> dict[str, Any]:
    parts = [] if leader is None else [{"id": leader, "token": token}]
    return {"path": "/app/leader", "kind": "leader_latch", "leader": leader, "participants": parts}


def lock(held: bool, owner: str | None, token: int | None = 0x20) -> dict[str, Any]:
    return {"path": "/app/lock", "kind": "cas_lock", "held": held, "owner": owner, "token": token}


def tasks(leaders: dict[str, str], workers: dict[str, str]) -> dict[str, Any]:
    return {
        "path": "/app/tasks",
        "kind": "task_leadership",
        "workers": [{"id": w, "version": v} for w, v in workers.items()],
        "leaders": {
            t: {"leader": w, "version": workers[w], "token": 1} for t, w in leaders.items()
        },
    }


def texts(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, str]]:
    return [(c["path"], c["text"]) for c in changes(old, new)]


def test_a_first_read_reports_nothing_and_recipes_are_found_below_plain_nodes() -> None:
    read = tree({"path": "/app/x", "kind": "node", "children": [latch("a")]}, lock(True, "p"))
    assert texts(None, read) == []
    assert sorted(recipes(read)) == ["/app/leader", "/app/lock"]


def test_leader_changes() -> None:
    assert texts(tree(latch("a")), tree(latch("b", 0x2A))) == [
        ("/app/leader", "leader a → b (token 0x2a)")
    ]
    assert texts(tree(latch("a")), tree(latch(None))) == [("/app/leader", "leader a → nobody")]
    assert texts(tree(latch("a")), tree(latch("a"))) == []


def test_lock_acquired_released_taken_over() -> None:
    free, held_a, held_b = lock(False, None, None), lock(True, "a", 0x20), lock(True, "b", 0x30)
    assert texts(tree(free), tree(held_a)) == [("/app/lock", "acquired by a (token 0x20)")]
    assert texts(tree(held_a), tree(lock(False, "a"))) == [("/app/lock", "released by a")]
    assert texts(tree(held_a), tree(held_b)) == [("/app/lock", "taken over: a → b (token 0x30)")]
    assert texts(tree(held_a), tree(held_a)) == []


def test_task_hand_overs_and_workers() -> None:
    old = tasks({"t": "w1", "u": "w1"}, {"w1": "1.0"})
    new = tasks({"t": "w2", "v": "w2"}, {"w2": "2.0"})
    assert texts(tree(old), tree(new)) == [
        ("/app/tasks", "worker w2 (2.0) joined"),
        ("/app/tasks", "worker w1 left"),
        ("/app/tasks", "task t: handed over w1 → w2 (2.0)"),
        ("/app/tasks", "task u: released by w1"),
        ("/app/tasks", "task v: led by w2 (2.0)"),
    ]


def test_recipes_appear_go_and_turn_unreadable() -> None:
    assert texts(tree(), tree(latch("a"))) == [("/app/leader", "leader latch appeared")]
    assert texts(tree(latch("a")), tree()) == [("/app/leader", "leader latch gone")]
    bad = {"path": "/app/lock", "kind": "cas_lock", "error": "newer format"}
    assert texts(tree(lock(True, "a")), tree(bad)) == [("/app/lock", "unreadable: newer format")]
    assert texts(tree(bad), tree(lock(True, "a"))) == [("/app/lock", "readable again")]
    barrier = {"path": "/app/barrier", "kind": "barrier", "jobs": {}}
    assert texts(tree(), tree(barrier)) == [("/app/barrier", "barrier appeared")]
    # A kind without a comparison is not compared field by field.
    assert texts(tree(barrier), tree(barrier | {"jobs": {"x": 1}})) == []


def test_scheduler_assigner_and_workers() -> None:
    def sched(assigner: str | None, *nodes: str) -> dict[str, Any]:
        workers = [{"node": n, "id": n.split("-")[0]} for n in nodes]
        return {"path": "/app/jobs", "kind": "scheduler", "assigner": assigner, "workers": workers}

    assert texts(tree(sched("a", "a-1")), tree(sched("b", "b-2"))) == [
        ("/app/jobs", "worker b-2 (b) joined"),
        ("/app/jobs", "worker a-1 left"),
        ("/app/jobs", "assigner a → b"),
    ]
