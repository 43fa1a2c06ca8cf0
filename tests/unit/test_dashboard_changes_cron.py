"""The dashboard's change log for a cron (job hand-overs, workers) and a mutex (holders)."""

from __future__ import annotations

from typing import Any

from aiocoord.integrations._dashboard_changes import changes


def tree(*children: dict[str, Any]) -> dict[str, Any]:
    return {"path": "/app", "kind": "node", "children": [*children]}


def cron(leaders: dict[str, str | None], workers: dict[str, str]) -> dict[str, Any]:
    jobs: dict[str, Any] = {
        job: {
            "schedule": "every 0:00:01",
            "leader": None if w is None else {"worker": w, "version": workers[w], "token": 1},
        }
        for job, w in leaders.items()
    }
    jobs["broken"] = {"error": "not JSON"}
    return {
        "path": "/app/cron",
        "kind": "cron",
        "workers": [{"id": w, "version": v} for w, v in workers.items()],
        "jobs": jobs,
    }


def mutex(holder: str | None, token: int | None) -> dict[str, Any]:
    return {"path": "/app/lock", "kind": "mutex", "holder": holder, "token": token}


def texts(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [c["text"] for c in changes(old, new)]


def test_cron_job_hand_overs_and_workers() -> None:
    old = {"w1": "1.0"}
    new = {"w1": "1.0", "w2": "1.1"}
    before = tree(cron({"tick": "w1", "boom": "w1", "idle": None}, old))
    after = tree(cron({"tick": "w2", "boom": "w1", "idle": "w2"}, new))
    assert texts(before, after) == [
        "worker w2 (1.1) joined",
        "job idle: led by w2 (1.1)",
        "job tick: handed over w1 → w2 (1.1)",
    ]
    assert texts(after, after) == []
    gone = tree(cron({"tick": None, "boom": "w1", "idle": None}, old))
    assert texts(after, gone) == [
        "worker w2 left",
        "job idle: released by w2",
        "job tick: released by w2",
    ]


def test_mutex_holders() -> None:
    assert texts(tree(mutex("a", 5)), tree(mutex("a", 5))) == []
    assert texts(tree(mutex("a", 5)), tree(mutex("b", 9))) == ["holder a → b (token 0x9)"]
    assert texts(tree(mutex("a", 5)), tree()) == ["mutex gone"]
    assert texts(tree(), tree(mutex("a", 5))) == ["mutex appeared"]
