"""What changed between two reads of a tree: leaders, lock holders, task and cron job hand-overs,
workers.

Pure functions over the plain dicts of ``aiocoord inspect`` (`inspect_path`):
the dashboard's watcher calls `changes` after each read and keeps the lines
it returns, so a page opened later still sees the recent hand-overs.  Only
what a reader acts on is reported (who leads, who holds, who joined or left),
never queue lengths, which change too often to be read as a log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ("Change", "changes", "recipes")

Info = dict[str, Any]
Change = dict[str, str]

# The kinds compared field by field; any other recipe is only reported appearing and going.
_LABELS = {
    "leader_latch": "leader latch",
    "cas_lock": "lock",
    "mutex": "mutex",
    "task_leadership": "task leadership",
    "cron": "cron",
    "scheduler": "scheduler",
}


def recipes(info: Info | None) -> dict[str, Info]:
    """Every recipe in an `inspect_path` result, by path (plain nodes left out)."""
    return {} if info is None else dict(_walk(info))


def _walk(info: Info) -> Iterator[tuple[str, Info]]:
    if info.get("kind") != "node":
        yield info["path"], info
        return
    for child in info.get("children", []):
        yield from _walk(child)


def _who(name: object) -> str:
    return "nobody" if name is None else str(name)


def changes(old: Info | None, new: Info | None) -> list[Change]:
    """The changes from the read `old` to the read `new`, in path order.

    Each is ``{"path", "kind", "text"}``.  With no earlier read (`old` None)
    there is nothing to compare and nothing is reported.
    """
    if old is None:
        return []
    before, after = recipes(old), recipes(new)
    out: list[Change] = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        kind = (now or was or {}).get("kind", "?")
        label = _LABELS.get(kind, kind.replace("_", " "))
        if was is None or now is None or was.get("kind") != now.get("kind"):
            text = f"{label} appeared" if was is None else f"{label} gone"
            out.append({"path": path, "kind": kind, "text": text})
            continue
        if "error" in was or "error" in now:
            if was.get("error") != now.get("error"):
                text = f"unreadable: {now['error']}" if "error" in now else "readable again"
                out.append({"path": path, "kind": kind, "text": text})
            continue
        compare = _COMPARE.get(kind)
        if compare is not None:
            out += [{"path": path, "kind": kind, "text": t} for t in compare(was, now)]
    return out


def _latch(was: Info, now: Info) -> list[str]:
    if was["leader"] == now["leader"]:
        return []
    token = now["participants"][0]["token"] if now["participants"] else None
    suffix = f" (token 0x{token:x})" if token is not None else ""
    return [f"leader {_who(was['leader'])} → {_who(now['leader'])}{suffix}"]


def _lock(was: Info, now: Info) -> list[str]:
    held = (was["held"], was["owner"]), (now["held"], now["owner"])
    if held[0] == held[1] and was["token"] == now["token"]:
        return []
    token = f" (token 0x{now['token']:x})" if now["token"] is not None else ""
    if now["held"] and not was["held"]:
        return [f"acquired by {_who(now['owner'])}{token}"]
    if was["held"] and not now["held"]:
        return [f"released by {_who(was['owner'])}"]
    if now["held"]:
        return [f"taken over: {_who(was['owner'])} → {_who(now['owner'])}{token}"]
    return []  # free before and after: a recorded run, not a change of holder


def _mutex(was: Info, now: Info) -> list[str]:
    if was["holder"] == now["holder"] and was["token"] == now["token"]:
        return []
    if now["token"] is None:
        return [f"released by {_who(was['holder'])}"]
    return [f"holder {_who(was['holder'])} → {_who(now['holder'])} (token 0x{now['token']:x})"]


def _workers(was: Info, now: Info, key: str) -> list[str]:
    def ids(info: Info) -> dict[str, str]:
        return {w[key]: str(w.get("version", w.get("id", ""))) for w in info["workers"]}

    before, after = ids(was), ids(now)
    joined = [f"worker {w} ({after[w]}) joined" for w in sorted(after.keys() - before.keys())]
    left = [f"worker {w} left" for w in sorted(before.keys() - after.keys())]
    return joined + left


def _tasks(was: Info, now: Info, *, field: str = "leader", what: str = "task") -> list[str]:
    out: list[str] = []
    before, after = was["leaders"], now["leaders"]
    for task in sorted(before.keys() | after.keys()):
        if "error" in before.get(task, {}) or "error" in after.get(task, {}):
            continue  # an unreadable leader record says nothing about who leads
        a, b = before.get(task, {}).get(field), after.get(task, {}).get(field)
        if a == b:
            continue
        if a is not None and b is not None:
            out.append(f"{what} {task}: handed over {a} → {b} ({after[task]['version']})")
        elif b is not None:
            out.append(f"{what} {task}: led by {b} ({after[task]['version']})")
        else:
            out.append(f"{what} {task}: released by {a}")
    return _workers(was, now, "id") + out


def _cron(was: Info, now: Info) -> list[str]:
    """Workers joining and leaving, and who leads each job (as for task leadership)."""

    def leaders(info: Info) -> dict[str, Info]:
        return {
            job: entry["leader"]
            for job, entry in info["jobs"].items()
            if entry.get("leader") is not None and "error" not in entry
        }

    return _tasks(
        {"workers": was["workers"], "leaders": leaders(was)},
        {"workers": now["workers"], "leaders": leaders(now)},
        field="worker",
        what="job",
    )


def _scheduler(was: Info, now: Info) -> list[str]:
    out = _workers(was, now, "node")
    if was["assigner"] != now["assigner"]:
        out.append(f"assigner {_who(was['assigner'])} → {_who(now['assigner'])}")
    return out


_COMPARE = {
    "leader_latch": _latch,
    "cas_lock": _lock,
    "mutex": _mutex,
    "task_leadership": _tasks,
    "cron": _cron,
    "scheduler": _scheduler,
}
