"""The caches' pure half: snapshot differences, and what each observation changes."""

from __future__ import annotations

import pytest

from aiocoord.errors import CacheOverflowError, NoAuthError, NoNodeError
from aiocoord.recipes.cache._tree import (
    CacheEvent,
    CacheEventType,
    Read,
    Snapshot,
    TreeState,
    diff,
)
from aiocoord.zk import EventType, Node, Stat

C, U, D = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED


def node(data: bytes = b"", *, czxid: int = 1, mzxid: int | None = None, kids: int = 0) -> Node:
    mzxid = czxid if mzxid is None else mzxid
    stat = Stat(czxid, mzxid, 0, 0, mzxid - czxid, 0, 0, 0, len(data), kids, czxid)
    return Node(data, stat)


def kinds(events: list[CacheEvent]) -> list[tuple[CacheEventType, str]]:
    return [(e.type, e.path) for e in events]


# --- diff -------------------------------------------------------------------------------------


def test_diff_of_equal_snapshots_is_empty() -> None:
    state = {"/r": node(czxid=1), "/r/a": node(b"x", czxid=2)}
    events, kept = diff(state, dict(state))
    assert events == []
    assert kept == state


def test_diff_gives_exactly_the_differences_deletions_first_deepest_first() -> None:
    old = {
        "/r": node(czxid=1),
        "/r/a": node(czxid=2, kids=1),
        "/r/a/x": node(czxid=3),
        "/r/b": node(b"1", czxid=4),
        "/r/same": node(b"s", czxid=5),
    }
    new = {
        "/r": node(czxid=1),
        "/r/b": node(b"2", czxid=4, mzxid=9),
        "/r/c": node(czxid=10, kids=1),
        "/r/c/y": node(czxid=11),
        "/r/same": node(b"s", czxid=5),
    }
    events, kept = diff(old, new)
    assert kinds(events) == [
        (D, "/r/a/x"),
        (D, "/r/a"),
        (U, "/r/b"),
        (C, "/r/c"),
        (C, "/r/c/y"),
    ]
    assert events[2].previous == old["/r/b"] and events[2].node == new["/r/b"]
    assert events[0].node is None and events[0].previous == old["/r/a/x"]
    assert kept == new


def test_diff_deleted_and_recreated_is_deleted_then_created() -> None:
    old = {"/r": node(czxid=1), "/r/a": node(b"v", czxid=2)}
    new = {"/r": node(czxid=1), "/r/a": node(b"v", czxid=7)}
    events, _ = diff(old, new)
    assert kinds(events) == [(D, "/r/a"), (C, "/r/a")]
    assert events[0].previous == old["/r/a"] and events[1].node == new["/r/a"]


def test_diff_never_reports_an_older_version() -> None:
    old = {"/r": node(b"new", czxid=1, mzxid=8), "/r/x": node(czxid=5)}
    new = {"/r": node(b"old", czxid=1, mzxid=3), "/r/x": node(czxid=4)}
    events, kept = diff(old, new)
    assert events == []
    assert kept == old


def test_diff_sorts_parents_before_children_whatever_the_characters() -> None:
    new = {"/r": node(), "/r/a-b": node(czxid=2), "/r/a": node(czxid=3), "/r/a/c": node(czxid=4)}
    events, _ = diff({}, new)
    paths = [e.path for e in events]
    assert paths.index("/r/a") < paths.index("/r/a/c")
    events, _ = diff(new, {})
    paths = [e.path for e in events]
    assert paths.index("/r/a/c") < paths.index("/r/a")


# --- snapshots --------------------------------------------------------------------------------


def test_snapshot_tracks_children_and_drops_subtrees() -> None:
    snap = Snapshot("/r", {"/r": node(), "/r/a": node(), "/r/a/b": node(), "/r/c": node()})
    assert snap.kids == {"/r": {"a", "c"}, "/r/a": {"b"}}
    assert [p for p, _ in snap.drop("/r/a")] == ["/r/a/b", "/r/a"]
    assert snap.kids == {"/r": {"c"}}
    assert snap.drop("/r/missing") == []


def test_snapshot_of_the_namespace_root() -> None:
    snap = Snapshot("/", {"/": node(), "/a": node(), "/a/b": node()})
    assert snap.kids == {"/": {"a"}, "/a": {"b"}}
    assert [p for p, _ in snap.drop("/")] == ["/a/b", "/a", "/"]


# --- the state, fed in the connection's order -------------------------------------------------


def load(state: TreeState, tree: dict[str, Node]) -> list[CacheEvent]:
    """Answer a full re-read from `tree` (a server that does not change meanwhile)."""
    events: list[CacheEvent] = []
    todo = state.begin()
    while todo:
        read = todo.pop(0)
        if read.children:
            prefix = read.path.rstrip("/") + "/"
            answer: object = sorted(
                p[len(prefix) :]
                for p in tree
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            )
        else:
            answer = tree.get(read.path) or NoNodeError(path=read.path)
        step = state.on_answer(read, answer)  # type: ignore[arg-type]
        events += step.events
        todo += step.reads
        if step.fresh:
            assert not todo
    return events


def tree_of(*paths: str, czxid: int = 1) -> dict[str, Node]:
    out = {}
    for i, path in enumerate(paths):
        kids = sum(
            1
            for p in paths
            if p.startswith(path.rstrip("/") + "/") and p.count("/") == path.count("/") + 1
        )
        out[path] = node(path.encode(), czxid=czxid + i, kids=kids)
    return out


def test_first_read_reads_each_node_once_and_lists_only_parents() -> None:
    tree = tree_of("/r", "/r/a", "/r/a/x", "/r/b")
    state = TreeState("/r", max_depth=None, max_nodes=10)
    sent: list[Read] = []
    todo = state.begin()
    while todo:
        read = todo.pop(0)
        sent.append(read)
        if read.children:
            answer: object = ["a", "b"] if read.path == "/r" else ["x"]
        else:
            answer = tree[read.path]
        todo += state.on_answer(read, answer).reads  # type: ignore[arg-type]
    assert sorted((r.path, r.children) for r in sent) == [
        ("/r", False),
        ("/r", True),
        ("/r/a", False),
        ("/r/a", True),
        ("/r/a/x", False),
        ("/r/b", False),
    ]
    assert state.served.nodes == tree and state.building is None


def test_max_depth_stops_the_listing() -> None:
    tree = tree_of("/r", "/r/a", "/r/a/x")
    state = TreeState("/r", max_depth=1, max_nodes=10)
    load(state, tree)
    assert set(state.served.nodes) == {"/r", "/r/a"}
    assert state.on_event(EventType.CREATED, "/r/a/y").reads == []
    assert state.on_event(EventType.CREATED, "/r/b").reads == [Read("/r/b")]
    assert state.on_event(EventType.CREATED, "/elsewhere").reads == []


def test_notifications_outside_a_reread_publish_at_once() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    load(state, tree_of("/r", "/r/a"))
    read = state.on_event(EventType.DATA_CHANGED, "/r/a").reads[0]
    newer = node(b"v2", czxid=2, mzxid=20)
    assert kinds(state.on_answer(read, newer).events) == [(U, "/r/a")]
    # An answer older than what is held (it cannot come in order; never reported anyway).
    assert state.on_answer(read, node(b"v1", czxid=2, mzxid=10)).events == []
    assert state.served.nodes["/r/a"] == newer
    assert kinds(state.on_event(EventType.DELETED, "/r/a").events) == [(D, "/r/a")]
    read = state.on_event(EventType.CREATED, "/r/a").reads[0]
    assert kinds(state.on_answer(read, node(czxid=30)).events) == [(C, "/r/a")]
    # Created again behind our back (the deletion's notification missed): both said.
    assert kinds(state.on_answer(read, node(czxid=40)).events) == [(D, "/r/a"), (C, "/r/a")]
    # A read that finds the node gone says so.
    assert kinds(state.on_answer(read, NoNodeError(path="/r/a")).events) == [(D, "/r/a")]


def test_reread_publishes_only_the_differences_at_its_end() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    load(state, tree_of("/r", "/r/a", "/r/b", "/r/c"))
    before = dict(state.served.nodes)
    after = dict(before)
    del after["/r/b"]
    after["/r/c"] = node(b"new c", czxid=50)  # deleted and created again
    after["/r/a"] = node(b"a2", czxid=before["/r/a"].stat.czxid, mzxid=60)
    after["/r"] = node(czxid=1, kids=2)
    events = load(state, after)
    assert kinds(events) == [(D, "/r/c"), (D, "/r/b"), (U, "/r/a"), (C, "/r/c")]
    assert state.served.nodes["/r/c"] == after["/r/c"]
    assert "/r/b" not in state.served.nodes and state.served.kids["/r"] == {"a", "c"}


def test_notifications_during_a_reread_build_the_next_state_silently() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    load(state, tree_of("/r", "/r/a"))
    root_read = state.begin()[0]
    # A child created (and read) before the re-read lists the root.
    read = state.on_event(EventType.CREATED, "/r/n").reads[0]
    assert state.on_answer(read, node(czxid=70)).events == []
    step = state.on_answer(root_read, node(czxid=1, kids=2))
    list_read = step.reads[0]
    step = state.on_answer(list_read, ["a", "n"])
    a_read, n_read = step.reads
    state.on_answer(n_read, node(czxid=70))
    step = state.on_answer(a_read, state.served.nodes["/r/a"])
    assert step.fresh and kinds(step.events) == [(C, "/r/n")]


def test_a_reread_given_up_ignores_its_late_answers() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    load(state, tree_of("/r"))
    read = state.begin()[0]
    state.abort()
    step = state.on_answer(read, NoNodeError(path="/r"))
    assert step.events == [] and not step.fresh and "/r" in state.served.nodes


def test_a_missing_root_is_an_empty_cache_filled_when_it_appears() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    assert load(state, {}) == []
    assert state.served.nodes == {}
    read = state.on_event(EventType.CREATED, "/r").reads[0]
    assert kinds(state.on_answer(read, node()).events) == [(C, "/r")]


def test_unreadable_node_is_left_out_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    state = TreeState("/r", max_depth=None, max_nodes=10)
    tree = tree_of("/r", "/r/open", "/r/secret")
    todo = state.begin()
    while todo:
        read = todo.pop(0)
        if read.path == "/r/secret":
            answer: object = NoAuthError(path=read.path)
        elif read.children:
            answer = ["open", "secret"]
        else:
            answer = tree[read.path]
        todo += state.on_answer(read, answer).reads  # type: ignore[arg-type]
    assert set(state.served.nodes) == {"/r", "/r/open"}
    assert state.unreadable == {"/r/secret"}
    state.on_answer(Read("/r/secret"), NoAuthError(path="/r/secret"))
    assert [r.getMessage() for r in caplog.records].count(
        "cache of /r: no permission to read /r/secret; left out"
    ) == 1


def test_more_than_max_nodes_raises() -> None:
    state = TreeState("/r", max_depth=None, max_nodes=2)
    with pytest.raises(CacheOverflowError, match="max_nodes=2"):
        load(state, tree_of("/r", "/r/a", "/r/b"))
