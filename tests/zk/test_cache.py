"""Caches against a real server: first read, live changes, order, subscribers, bounds, ACLs."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import pytest

import aiocoord
from aiocoord import CacheEvent, CacheEventType, Node
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer, four_letter_word
from aiocoord.zk import ACL, OPEN_ACL_UNSAFE
from tests.helpers import eventually

C, U, D = CacheEventType.CREATED, CacheEventType.CHANGED, CacheEventType.DELETED

CONFIG = "/zookeeper/config"  # followed by every coordinator (the ensemble tracker)


async def server_tree(client: aiocoord.ZkClient, root: str) -> dict[str, tuple[bytes, int, int]]:
    """Every node under `root` as the server has it: (data, czxid, version)."""
    out: dict[str, tuple[bytes, int, int]] = {}
    todo = [root]
    while todo:
        path = todo.pop()
        try:
            node = await client.get(path)
            names = await client.children(path)
        except aiocoord.NoNodeError:
            continue
        out[path] = (node.data, node.stat.czxid, node.stat.version)
        todo += [f"{path.rstrip('/')}/{name}" for name in names]
    return out


def cached(tree: aiocoord.TreeCache) -> dict[str, tuple[bytes, int, int]]:
    return {p: (n.data, n.stat.czxid, n.stat.version) for p, n in tree.nodes().items()}


class Recorder:
    """Every event of one subscription, and a wake-up for each."""

    def __init__(self, cache: aiocoord.TreeCache) -> None:
        self.events: list[CacheEvent] = []
        self._stream = cache.events()
        self._more = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        async for event in self._stream:
            self.events.append(event)
            self._more.set()
            self._more = anyio.Event()

    async def wait_for(self, type_: CacheEventType, path: str | None = None) -> CacheEvent:
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.type is type_ and (path is None or event.path == path):
                    return event
            seen = len(self.events)
            await self._more.wait()

    def node_events(self) -> list[tuple[CacheEventType, str]]:
        return [(e.type, e.path) for e in self.events if e.type in (C, U, D)]


@asynccontextmanager
async def recording(cache: aiocoord.TreeCache) -> AsyncIterator[Recorder]:
    rec = Recorder(cache)
    async with anyio.create_task_group() as tg:
        await tg.start(rec.run)
        yield rec
        tg.cancel_scope.cancel()


async def converged(writer: aiocoord.ZkClient, tree: aiocoord.TreeCache, root: str) -> None:
    """Wait until the cache equals the server (writes have stopped)."""

    async def equal() -> bool:
        return cached(tree) == await server_tree(writer, root)

    await eventually(equal)


async def drain(stream: AsyncIterator[CacheEvent], got: list[CacheEvent]) -> None:
    async for event in stream:
        got.append(event)


@pytest.fixture(params=["standalone", pytest.param("ensemble", marks=pytest.mark.ensemble)])
async def topology(
    request: pytest.FixtureRequest, zk_chroot: str
) -> AsyncIterator[aiocoord.Coordinator]:
    """A coordinator on the standalone server, or on the 3-member ensemble."""
    name = "zk_server" if request.param == "standalone" else "zk_ensemble"
    server: ZooKeeperServer | ZooKeeperEnsemble = request.getfixturevalue(name)
    async with aiocoord.connect(
        server.connect_string, namespace=zk_chroot, session_timeout=4.0
    ) as coord:
        yield coord


# --- first read and live changes --------------------------------------------------------------


@pytest.mark.anyio
async def test_first_read_is_held_on_entry_then_changes_stream_in_order(
    topology: aiocoord.Coordinator,
) -> None:
    client = topology.client
    with anyio.fail_after(20):
        await client.create("/svc/api/i-1", b"a", make_parents=True)
        await client.create("/svc/api/i-2", b"b")
        await client.create("/svc/web", b"")
        async with aiocoord.tree_cache(topology, "/svc") as tree:
            assert not tree.stale
            assert cached(tree) == await server_tree(client, "/svc")
            assert tree.children("/svc") == ["api", "web"]
            assert tree.children("/svc/api") == ["i-1", "i-2"]
            assert tree.children("/svc/nothing") == []
            node = tree.get("/svc/api/i-1")
            assert node is not None and node.data == b"a"
            assert tree.get("/svc/api/i-9") is None
            async with recording(tree) as rec:
                await client.create("/svc/api/i-3", b"c")
                await client.set("/svc/api/i-1", b"a2")
                await client.delete("/svc/api/i-2")
                await client.create("/svc/api/i-3/deep", b"d")
                await rec.wait_for(C, "/svc/api/i-3/deep")
                assert rec.node_events() == [
                    (C, "/svc/api/i-3"),
                    (U, "/svc/api/i-1"),
                    (D, "/svc/api/i-2"),
                    (C, "/svc/api/i-3/deep"),
                ]
                changed = rec.events[1]
                assert changed.previous is not None and changed.previous.data == b"a"
                assert changed.node is not None and changed.node.data == b"a2"
                assert rec.events[2].node is None and rec.events[2].previous is not None
            assert cached(tree) == await server_tree(client, "/svc")
            assert repr(tree) == f"<TreeCache /svc nodes={len(tree)} FRESH>"
        assert repr(tree).endswith("CLOSED>")


@pytest.mark.anyio
async def test_a_missing_root_is_empty_and_fills_when_created(
    coordinator: aiocoord.Coordinator,
) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with aiocoord.tree_cache(coordinator, "/later") as tree:
            assert tree.nodes() == {}
            assert await client.exists("/later") is None  # entering created nothing
            async with recording(tree) as rec:
                await client.create("/later/a/b", b"x", make_parents=True)
                await rec.wait_for(C, "/later/a/b")
                assert rec.node_events() == [(C, "/later"), (C, "/later/a"), (C, "/later/a/b")]
                await client.delete_all("/later")
                await rec.wait_for(D, "/later")
                assert rec.node_events()[3:] == [(D, "/later/a/b"), (D, "/later/a"), (D, "/later")]
            assert tree.nodes() == {}


@pytest.mark.anyio
async def test_versions_only_rise_and_the_cache_ends_equal_to_the_server(
    topology: aiocoord.Coordinator,
) -> None:
    client = topology.client
    with anyio.fail_after(30):
        await client.create("/hot", b"")
        for i in range(5):
            await client.create(f"/hot/n{i}", b"0")
        async with (
            aiocoord.connect(topology.settings) as writer,
            aiocoord.tree_cache(topology, "/hot") as tree,
            recording(tree) as rec,
        ):

            async def write(i: int) -> None:
                for v in range(30):
                    await writer.client.set(f"/hot/n{i}", str(v + 1).encode())

            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(write, i)
            await converged(writer.client, tree, "/hot")
            await client.create("/hot/end")  # events come in order: all before it are seen
            await rec.wait_for(C, "/hot/end")
            last: dict[str, int] = {}
            for event in rec.events:
                if event.type is U:
                    assert event.node is not None and event.previous is not None
                    assert event.node.stat.version > last.get(event.path, -1)
                    assert event.node.stat.version > event.previous.stat.version
                    last[event.path] = event.node.stat.version
            assert all(last[f"/hot/n{i}"] == 30 for i in range(5))


@pytest.mark.anyio
async def test_max_depth_keeps_the_levels_asked_for(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        await client.create("/d/a/b/c", make_parents=True)
        async with aiocoord.tree_cache(coordinator, "/d", max_depth=1) as tree:
            assert set(tree.nodes()) == {"/d", "/d/a"}
            async with recording(tree) as rec:
                await client.create("/d/a/b/c2")
                await client.create("/d/e")
                await rec.wait_for(C, "/d/e")
                assert rec.node_events() == [(C, "/d/e")]


# --- node cache -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_node_cache_follows_one_node_without_creating_it(
    topology: aiocoord.Coordinator,
) -> None:
    client = topology.client
    with anyio.fail_after(20):
        async with aiocoord.node_cache(topology, "/flags") as flags:
            assert flags.current is None
            assert await client.exists("/flags") is None
            assert "absent" in repr(flags)
            seen: list[Node | None] = []
            changes = flags.changes()
            await client.create("/flags", b"on")
            await client.create("/flags/child", b"")  # below: no change of the node
            await client.set("/flags", b"off")
            await client.delete("/flags/child")
            await client.delete("/flags")
            await client.create("/flags", b"back")
            async for node in changes:
                seen.append(node)
                if len(seen) == 4:
                    break
            assert [n.data if n else None for n in seen] == [b"on", b"off", None, b"back"]
            assert flags.current is not None and flags.current.data == b"back"
            assert flags.children("/flags") == []  # a node cache keeps no children


# --- subscribers ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_many_subscribers_each_get_every_event_and_a_laggard_is_told(
    topology: aiocoord.Coordinator,
) -> None:
    client = topology.client
    with anyio.fail_after(20):
        await client.create("/subs", b"")
        async with aiocoord.tree_cache(topology, "/subs", backlog=8) as tree:
            laggard = tree.events()  # never read while the changes come
            async with recording(tree) as first, recording(tree) as second:
                for i in range(20):
                    await client.create(f"/subs/n{i:02}", b"")
                await first.wait_for(C, "/subs/n19")
                await second.wait_for(C, "/subs/n19")
                expected = [(C, f"/subs/n{i:02}") for i in range(20)]
                assert first.node_events() == expected == second.node_events()
            got: list[CacheEvent] = []
            with pytest.raises(aiocoord.SubscriberLagged):
                await drain(laggard, got)
            assert [e.path for e in got] == [f"/subs/n{i:02}" for i in range(8)]


@pytest.mark.anyio
async def test_one_watch_on_the_server_per_cache(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer
) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        for i in range(3):
            await client.create(f"/w/n{i}/x", make_parents=True)
        async with aiocoord.tree_cache(coordinator, "/w") as tree:
            async with recording(tree), recording(tree):
                answer = four_letter_word(*zk_server.address, "wchc")
                mine = answer.split(f"0x{coordinator.session_id:x}", 1)[1].split("0x", 1)[0]
                # The coordinator's own watch on the ensemble's config is not the cache's.
                assert [w for w in mine.split() if w != CONFIG] == [
                    client._session.server_path("/w")
                ]


@pytest.mark.anyio
async def test_no_one_shot_watch_and_ones_below_the_root_do_not_silence_it(
    coordinator: aiocoord.Coordinator,
) -> None:
    """ZooKeeper 3.8.0 silences a recursive watch when the same session sets a one-shot
    watch on its very path (ZOOKEEPER-4466): the cache sets none; below its root is fine."""
    client = coordinator.client
    with anyio.fail_after(20):
        await client.create("/trap/a", b"", make_parents=True)
        async with aiocoord.tree_cache(coordinator, "/trap") as tree, recording(tree) as rec:
            await client.set("/trap/a", b"1")
            await rec.wait_for(U, "/trap/a")
            snapshot = client._session.watches.snapshot()
            held = {kind.value: paths for kind, paths in snapshot.items() if paths}
            # The coordinator's own data watch on the ensemble's config is not the cache's.
            if held.get("data") == [CONFIG]:
                del held["data"]
            assert held == {"persistent_recursive": [client._session.server_path("/trap")]}
            _, watch = await client.get_watch("/trap/a")  # one of ours, below the root
            await client.set("/trap/a", b"2")
            await watch.wait()
            await client.create("/trap/b", b"")
            await rec.wait_for(C, "/trap/b")
            assert rec.node_events() == [(U, "/trap/a"), (U, "/trap/a"), (C, "/trap/b")]


# --- bounds and bad input ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_bad_input_and_too_many_nodes(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with pytest.raises(aiocoord.InvalidPathError):
        aiocoord.tree_cache(coordinator, "relative/path")
    with pytest.raises(aiocoord.InvalidPathError):
        aiocoord.node_cache(coordinator, "flags")
    with pytest.raises(aiocoord.ConfigError, match="max_nodes"):
        aiocoord.tree_cache(coordinator, "/x", max_nodes=0)
    with pytest.raises(TypeError, match="max_depth"):
        aiocoord.tree_cache(coordinator, "/x", max_depth="2")  # type: ignore[arg-type]
    with anyio.fail_after(20):
        for i in range(5):
            await client.create(f"/big/n{i}", make_parents=True)
        with pytest.raises(aiocoord.CacheOverflowError, match="max_nodes=4"):
            async with aiocoord.tree_cache(coordinator, "/big", max_nodes=4):
                pass
        tree = aiocoord.tree_cache(coordinator, "/big", max_nodes=7)
        await tree.start()
        with pytest.raises(aiocoord.InvalidPathError):
            tree.get("big/n1")
        stream = tree.events()
        await client.create("/big/n5")
        await client.create("/big/n6")  # the 8th node
        got: list[CacheEvent] = []
        with pytest.raises(aiocoord.CacheOverflowError):
            await drain(stream, got)
        assert [(e.type, e.path) for e in got] == [(C, "/big/n5")]
        assert repr(tree).endswith("CLOSED>")
        with pytest.raises(aiocoord.CacheOverflowError):  # leaving says what stopped it
            await tree.aclose()
        await tree.aclose()  # raised once


@pytest.mark.anyio
async def test_a_node_the_session_may_not_read_is_reported_not_fatal(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "aiocoord.recipes.cache")
    async with (
        aiocoord.connect(zk_server.connect_string, namespace=zk_chroot, auth="owner:pw") as owner,
        aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other,
    ):
        with anyio.fail_after(20):
            await owner.client.create("/acl", acl=OPEN_ACL_UNSAFE)
            await owner.client.create("/acl/open", b"o", acl=OPEN_ACL_UNSAFE)
            await owner.client.create("/acl/secret", b"s", acl=[ACL(ACL.ALL, "auth", "")])
            async with aiocoord.tree_cache(other, "/acl") as tree, recording(tree) as rec:
                assert set(tree.nodes()) == {"/acl", "/acl/open"}
                assert tree.unreadable == {"/acl/secret"}
                assert "no permission to read /acl/secret" in caplog.text
                await owner.client.set("/acl/secret", b"s2")
                await owner.client.create("/acl/more", b"m", acl=OPEN_ACL_UNSAFE)
                await rec.wait_for(C, "/acl/more")
                assert rec.node_events() == [(C, "/acl/more")]
                assert caplog.text.count("no permission to read /acl/secret") == 1
                assert not tree.stale


@pytest.mark.anyio
async def test_leaving_removes_the_watch_and_ends_the_streams(
    coordinator: aiocoord.Coordinator,
) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with aiocoord.tree_cache(coordinator, "/gone") as tree:
            stream = tree.events()
        assert [e async for e in stream] == []
        assert not client._session.watches.watched(client._session.server_path("/gone"))


def test_cache_benchmark_still_runs() -> None:
    """``python -m benchmarks.bench_cache`` with tiny parameters, so that it does not rot."""
    root = Path(__file__).resolve().parents[2]
    args = ["--sizes", "200", "--passes", "1", "--changes", "5", "--no-fsync"]
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_cache", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=root,
    ).stdout
    assert "initial load, 311 nodes: aiocoord" in out
    assert "requests per change event" in out
    assert "watches held by the cache's session: 1 " in out
    assert "0 events (nothing changed)" in out
    assert "memory per cached node" in out
