"""Version-aware task leadership: the pure choice, then real-server scenarios.

The choice (preferred versions, rendezvous, the per-task step) is tested as
plain functions.  The scenarios run several workers, each with its own
coordinator (its own session), against the shared standalone server, and
check what the server holds (leader nodes), what each worker believes
(`is_leader`) and what `lead()` bodies see.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from packaging.version import Version

import aiocoord
from aiocoord import ConfigError, ConnectionState, LeadershipLost, NodeDataError, NoNodeError
from aiocoord.recipes.task_leadership import (
    TaskChange,
    TaskLeadership,
    Worker,
    task_leadership,
)
from aiocoord.recipes.task_leadership._choice import (
    Action,
    TaskState,
    assign,
    next_step,
    preferred_versions,
    rendezvous_rank,
)
from aiocoord.recipes.task_leadership._records import decode_worker, encode_worker
from aiocoord.recipes.task_leadership._versions import maven_version_key
from aiocoord.recipes.task_leadership._writes import WriteBatcher
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from aiocoord.zk import CreateMode
from tests.helpers import eventually, recording

TASKS = [f"task-{i:02d}" for i in range(30)]
SETTLE = 0.05
ROOT = "/app"


# --- the pure choice ------------------------------------------------------------------------


def newest(*versions: str, prefer: Any = "newest") -> set[str]:
    return set(preferred_versions(versions, prefer=prefer, version_key=maven_version_key).versions)


def test_preferred_versions_follow_maven_order() -> None:
    assert newest("1.0", "1.1", "1.1-SNAPSHOT", "1.0.1") == {"1.1"}
    assert newest("1.0", "1.1", "1.1-SNAPSHOT", prefer="oldest") == {"1.0"}
    assert newest("1.10", "1.9") == {"1.10"}  # numbers, not text
    assert newest("2.0-rc1", "2.0-beta3", "1.9") == {"2.0-rc1"}
    assert newest("1", "1.0", "1-ga", "0.9") == {"1", "1.0", "1-ga"}  # equal versions share
    assert newest("1.0-sp", "1.0") == {"1.0-sp"}
    assert newest() == set()


def test_cycle_in_maven_order_is_decided_the_same_whatever_the_order() -> None:
    cycle = ("1", "1-a", "1-0.rc")
    key = maven_version_key
    assert key("1") < key("1-a") < key("1-0.rc") < key("1")  # not a total order
    results = {
        preferred_versions(p, prefer="newest", version_key=key)
        for p in itertools.permutations(cycle)
    }
    assert len(results) == 1
    (result,) = results
    assert result.cyclic
    assert set(result.versions) == {"1-a"}  # Copeland tie, then the greatest text
    oldest = preferred_versions(cycle, prefer="oldest", version_key=key)
    assert oldest.cyclic
    assert set(oldest.versions) == {"1"}
    # A version every other one beats never wins through the fallback.
    assert newest("9", "10", "10-a", "10-0.rc") == {"10-a"}
    # With a version above the cycle there is no cycle at the top: no fallback.
    top = preferred_versions(("2", *cycle), prefer="newest", version_key=key)
    assert not top.cyclic
    assert set(top.versions) == {"2"}


def test_custom_version_key_pep440() -> None:
    got = preferred_versions(["1.0", "1.0rc1", "1.0.post1"], prefer="newest", version_key=Version)
    assert set(got.versions) == {"1.0.post1"}


def test_rendezvous_is_stable_spreads_evenly_and_moves_little() -> None:
    assert rendezvous_rank("report", "w1") == rendezvous_rank("report", "w1")
    digest = hashlib.blake2b(b"report\0w1", digest_size=8).digest()
    assert rendezvous_rank("report", "w1") == int.from_bytes(
        digest, "big"
    )  # the documented formula
    workers = {"w1": "1.0", "w2": "1.0", "w3": "1.0"}
    tasks = [f"t{i}" for i in range(600)]
    before = assign(tasks, workers, version_key=maven_version_key).leaders
    counts = {w: list(before.values()).count(w) for w in workers}
    assert set(counts.values()) == {200}  # balanced: the loads differ by at most one
    after = assign(tasks, {**workers, "w4": "1.0"}, version_key=maven_version_key).leaders
    moved = [t for t in tasks if before[t] != after[t]]
    assert sum(after[t] == "w4" for t in moved) == 150  # the newcomer's share
    assert 150 <= len(moved) <= 150 + 37  # and a few more (tests/unit/test_task_choice.py)
    # A newer version takes everything; order of the mapping does not matter.
    newer = assign(tasks, {"w9": "1.1", **workers}, version_key=maven_version_key)
    assert set(newer.leaders.values()) == {"w9"}
    assert newer.candidates == {"w9"}
    assert assign(tasks, {}, version_key=maven_version_key).leaders == {}


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (TaskState(usable=False, desired=True), Action.IDLE),
        (TaskState(usable=True, desired=True), Action.ACQUIRE),
        (TaskState(usable=True, desired=True, view_current=False), Action.IDLE),
        (TaskState(usable=True, desired=True, blocked=True), Action.IDLE),
        (TaskState(usable=True, desired=True, held=True), Action.GRANT),
        (TaskState(usable=True, desired=True, held=True, granted=True), Action.IDLE),
        (TaskState(usable=True, held=True, granted=True, desired_for=0.0), Action.WAIT),
        (TaskState(usable=True, held=True, granted=True, desired_for=5.0), Action.REVOKE),
        (TaskState(usable=True, held=True, desired_for=5.0), Action.DELETE),
        (
            TaskState(usable=True, held=True, desired_for=5.0, view_current=False),
            Action.IDLE,
        ),
        (TaskState(usable=True, held=True, granted=True, verify=True), Action.VERIFY),
        # Without the leader watch nothing starts; a hand-over goes on.
        (TaskState(usable=True, desired=True, watching=False), Action.IDLE),
        (TaskState(usable=True, desired=True, held=True, watching=False), Action.IDLE),
        (TaskState(usable=True, held=True, desired_for=5.0, watching=False), Action.DELETE),
        (TaskState(usable=True, held=True, verify=True, watching=False), Action.VERIFY),
        (TaskState(usable=True, granted=True), Action.REVOKE),
        (TaskState(usable=True, desired=True, stale=True), Action.DROP_STALE),
        (TaskState(usable=False, granted=True, held=True, stopping=True), Action.REVOKE),
        (TaskState(usable=False, held=True, stopping=True), Action.IDLE),
        (TaskState(usable=True, held=True, desired=True, stopping=True), Action.DELETE),
        (TaskState(usable=True, stale=True, stopping=True), Action.DROP_STALE),
        (TaskState(usable=True, desired=True, stopping=True), Action.EXIT),
    ],
)
def test_next_step(state: TaskState, expected: Action) -> None:
    assert next_step(state, settle=1.0).action is expected


def test_next_step_waits_out_the_settle_delay() -> None:
    step = next_step(TaskState(usable=True, held=True, granted=True, desired_for=0.25), settle=1)
    assert step.action is Action.WAIT
    assert step.delay == pytest.approx(0.75)


# --- arguments and records ------------------------------------------------------------------


def test_worker_defaults_and_validation() -> None:
    me = Worker(version="2.4.1")
    assert me.version == "2.4.1"
    assert len(me.id) == 36 and me.host
    assert me.pid > 0 and me.started > 0
    assert Worker("1.0", id="pod-1", host="h").id == "pod-1"
    for bad in ("", "   ", "1.0 beta", "1.0\n"):
        with pytest.raises(ConfigError) as info:
            Worker(version=bad)
        assert info.value.field == "version"
    with pytest.raises(ConfigError) as info:
        Worker(version=None)  # type: ignore[arg-type]
    assert info.value.field == "version"
    for bad_id in ("a/b", "", "..", "x\x00"):
        with pytest.raises(ConfigError) as info:
            Worker("1.0", id=bad_id)
        assert info.value.field == "id"
    with pytest.raises(ConfigError):
        Worker("1.0", host=3)  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        me.version = "3"


def test_task_leadership_arguments() -> None:
    coord = aiocoord.connect("127.0.0.1:1")  # never entered: arguments are checked first
    me = Worker("1.0")

    def make(**kw: Any) -> TaskLeadership:
        args: dict[str, Any] = {"worker": me, "tasks": ["a"], **kw}
        return task_leadership(coord, ROOT, **args)

    assert isinstance(make(), TaskLeadership)
    assert make(tasks=["a", "b", "a"]).tasks == ("a", "b")
    with pytest.raises(TypeError, match="coord"):
        task_leadership("zk", ROOT, worker=me, tasks=[])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="worker"):
        make(worker="1.0")
    with pytest.raises(TypeError, match="tasks"):
        make(tasks="report")
    with pytest.raises(ConfigError) as info:
        make(tasks=["ok", "a/b"])
    assert info.value.field == "tasks"
    with pytest.raises(ConfigError) as info:
        make(prefer="latest")
    assert info.value.field == "prefer"
    for settle in (-1, math.inf, "1", True):
        with pytest.raises(ConfigError) as info:
            make(settle=settle)
        assert info.value.field == "settle"
    with pytest.raises(ConfigError) as info:
        make(version_key=Version, worker=Worker("not-a-pep440-version"))
    assert info.value.field == "version"
    with pytest.raises(ValueError, match="root"):
        task_leadership(coord, "no-slash", worker=me, tasks=[])


def test_corrupt_worker_records_are_node_data_errors() -> None:
    good = b'{"id":"w","version":"1.0","host":"h","pid":1,"started":1.5}'
    assert decode_worker("/p/w", "w", good, maven_version_key).version == "1.0"
    for data in (
        b"\x80\x81",
        b"not json",
        b"[1]",
        b'{"id":"other","version":"1.0","host":"h","pid":1,"started":1}',
        b'{"id":"w","version":"","host":"h","pid":1,"started":1}',
        b'{"id":"w","version":"1.0","host":"h","pid":true,"started":1}',
        b'{"id":"w","version":"1.0","host":"h","pid":1,"started":NaN}',
        b'{"id":"w","version":"1.0","pid":1,"started":1}',
    ):
        with pytest.raises(NodeDataError) as info:
            decode_worker("/p/w", "w", data, maven_version_key)
        assert info.value.path == "/p/w"


# --- real servers -----------------------------------------------------------------------------


class Fleet:
    """Workers, each on its own coordinator, all under one chroot; and a sampler."""

    def __init__(self, hosts: str, chroot: str, stack: AsyncExitStack, tg: anyio.abc.TaskGroup):
        self.hosts = hosts
        self.chroot = chroot
        self.stack = stack
        self.tg = tg
        self.workers: dict[str, TaskLeadership] = {}
        self.double: list[tuple[str, list[str]]] = []
        self._stops: dict[str, tuple[anyio.Event, anyio.Event]] = {}
        self.samples = 0

    async def connect(
        self, hosts: str | None = None, *, session_timeout: float = 3.0
    ) -> aiocoord.Coordinator:
        return await self.stack.enter_async_context(
            aiocoord.connect(
                hosts or self.hosts, namespace=self.chroot, session_timeout=session_timeout
            )
        )

    async def start(
        self,
        worker_id: str,
        version: str,
        *,
        tasks: list[str] = TASKS,
        hosts: str | None = None,
        settle: float = SETTLE,
        **kw: Any,
    ) -> TaskLeadership:
        """Run a worker in a task of its own (its own process, in effect) until `stop()`."""
        stop = anyio.Event()
        stopped = anyio.Event()

        async def run(*, task_status: anyio.abc.TaskStatus[TaskLeadership]) -> None:
            try:
                async with (
                    aiocoord.connect(
                        hosts or self.hosts, namespace=self.chroot, session_timeout=3.0
                    ) as coord,
                    task_leadership(
                        coord,
                        ROOT,
                        worker=Worker(version, id=worker_id),
                        tasks=tasks,
                        settle=settle,
                        **kw,
                    ) as tl,
                ):
                    task_status.started(tl)
                    await stop.wait()
            finally:
                stopped.set()

        tl: TaskLeadership = await self.tg.start(run)
        self.workers[worker_id] = tl
        self._stops[worker_id] = (stop, stopped)
        return tl

    async def stop(self, worker_id: str) -> None:
        """Leave: close the worker's task leadership, then its coordinator."""
        self.workers.pop(worker_id, None)
        stop, stopped = self._stops.pop(worker_id)
        stop.set()
        await stopped.wait()

    def local_leaders(self, task: str) -> list[str]:
        return [w for w, tl in self.workers.items() if tl.is_leader(task)]

    async def sample(self) -> None:
        """Poll every worker's is_leader for every task, between any two scheduler steps."""
        while True:
            for task in TASKS:
                leaders = self.local_leaders(task)
                if len(leaders) > 1:
                    self.double.append((task, leaders))
            self.samples += 1
            await anyio.lowlevel.checkpoint()

    async def settled(
        self, expected: Callable[[], dict[str, str]], *, timeout: float = 10.0
    ) -> dict[str, str]:
        """Wait until the server and every worker agree with `expected()` ({task: worker})."""
        any_tl = next(iter(self.workers.values()))

        async def check() -> bool:
            want = expected()
            if len(want) != len(TASKS):
                return False
            if any(self.local_leaders(t) != [w] for t, w in want.items()):
                return False
            return await any_tl.leaders() == want

        await eventually(check, timeout=timeout, every=0.02)
        return expected()


def choice(versions: dict[str, str], prefer: Any = "newest") -> dict[str, str]:
    return assign(TASKS, versions, prefer=prefer, version_key=maven_version_key).leaders


@asynccontextmanager
async def fleet(server: ZooKeeperServer, chroot: str) -> AsyncIterator[Fleet]:
    async with anyio.create_task_group() as tg, AsyncExitStack() as stack:
        f = Fleet(server.connect_string, chroot, stack, tg)
        yield f
        for worker_id in list(f.workers):
            await f.stop(worker_id)
        tg.cancel_scope.cancel()


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    with FaultProxy(*zk_server.address) as p:
        yield p


@pytest.mark.anyio
async def test_rolling_upgrade_newest_version_leads_and_tasks_return(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    with anyio.fail_after(40):
        async with fleet(zk_server, zk_chroot) as f:
            for i in range(3):
                await f.start(f"old-{i}", "1.0")
            versions = {"old-0": "1.0", "old-1": "1.0", "old-2": "1.0"}
            first = await f.settled(lambda: choice(versions))
            assert set(first.values()) == set(versions)  # every worker leads some
            f.tg.start_soon(f.sample)

            # A newer worker joins: it takes all 30 tasks, never two leaders at once.
            await f.start("new-a", "1.1")
            versions["new-a"] = "1.1"
            await f.settled(lambda: dict.fromkeys(TASKS, "new-a"))
            assert f.double == []

            # A second one of the same newer version: the tasks split between the two.
            new_b = await f.start("new-b", "1.1", hosts=proxy.connect_string)
            versions["new-b"] = "1.1"
            split = await f.settled(lambda: choice(versions))
            assert set(split.values()) == {"new-a", "new-b"}
            assert f.double == []

            # Both leave: one closes, the other dies and its session expires.
            await f.stop("new-a")
            del versions["new-a"]
            await f.settled(lambda: dict.fromkeys(TASKS, "new-b"))
            coord_b = new_b.coord
            async with recording(coord_b) as rec:
                proxy.reject_new()
                proxy.cut()
                await rec.wait_for(ConnectionState.SUSPENDED, timeout=5)

            # The default keeps leadership through SUSPENDED only while the session provably
            # lives: it ends well within the 3 s session timeout of the last answered request.
            async def stopped_leading() -> bool:
                return new_b.leading == frozenset()

            await eventually(stopped_leading, timeout=3.0)
            assert await expire_session(coord_b, zk_server.address)
            f.workers.pop("new-b")
            del versions["new-b"]
            back = await f.settled(lambda: choice(versions))
            assert back == first  # the same spread as before the upgrade
            assert f.double == []
            assert f.samples > 100
            await f.stop("new-b")  # its coordinator cannot reconnect: closes all the same


@pytest.mark.anyio
async def test_superseded_worker_drops_its_leader_watch_until_needed_again(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    def live_watches(tl: TaskLeadership) -> list[Any]:
        # The leader watch's; the worker node's own watch (it is kept) stays.
        keys = tl.coord.client._session.watches.persistent_keys()
        return [key for key in keys if "/workers/" not in str(key)]

    with anyio.fail_after(30):
        async with fleet(zk_server, zk_chroot) as f:
            old = await f.start("old", "1.0")
            await f.settled(lambda: dict.fromkeys(TASKS, "old"))
            assert old._engine.watching() and live_watches(old)
            f.tg.start_soon(f.sample)

            # Superseded: it leads nothing and is chosen for nothing, so it stops
            # hearing of every leader node written during the hand-over.
            new = await f.start("new", "1.1")
            await f.settled(lambda: dict.fromkeys(TASKS, "new"))
            await f_wait(lambda: not old._engine.watching())
            assert live_watches(old) == []
            assert new._engine.watching()

            # A changes() reader needs every event: the watch comes back while it reads.
            seen: list[TaskChange] = []
            done = anyio.Event()

            async def follow() -> None:
                async for change in old.changes():
                    seen.append(change)
                    if change.task == TASKS[0] and change.leader is None:
                        break
                done.set()

            f.tg.start_soon(follow)
            await f_wait(lambda: len({c.task for c in seen}) == len(TASKS))
            assert {c.leader for c in seen} == {"new"}
            await f_wait(old._engine.watching)
            # Someone else deletes a leader node: the reader hears of it, the leader
            # notices, takes the task again, and nobody else leads it meanwhile.
            observer = await f.connect()
            await observer.client.delete(f"{ROOT}/leaders/{TASKS[0]}")
            await done.wait()
            await f.settled(lambda: dict.fromkeys(TASKS, "new"))
            await f_wait(lambda: not old._engine.watching())

            # Chosen again: the watch comes back first, then the tasks.
            await f.stop("new")
            await f.settled(lambda: dict.fromkeys(TASKS, "old"))
            assert old._engine.watching() and live_watches(old)
            assert f.double == []
            assert f.samples > 100


@pytest.mark.anyio
async def test_same_version_join_moves_only_a_minority(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            versions = {f"w{i}": "2.0" for i in range(3)}
            for w in versions:
                await f.start(w, "2.0")
            before = await f.settled(lambda: choice(versions))
            f.tg.start_soon(f.sample)
            await f.start("w3", "2.0.0")  # equal to 2.0 in Maven's order
            versions["w3"] = "2.0.0"
            after = await f.settled(lambda: choice(versions))
            moved = [t for t in TASKS if before[t] != after[t]]
            assert 0 < len(moved) < len(TASKS) / 2
            assert {after[t] for t in moved} == {"w3"}  # nothing moved between old workers
            assert f.double == []


@pytest.mark.anyio
async def test_prefer_oldest_reverses_the_preference(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            for w, v in (("a", "1.0"), ("b", "1.1"), ("c", "1.1")):
                await f.start(w, v, prefer="oldest")
            await f.settled(lambda: dict.fromkeys(TASKS, "a"))
            await f.stop("a")
            await f.settled(lambda: choice({"b": "1.1", "c": "1.1"}, prefer="oldest"))
            await f.start("z", "0.9-SNAPSHOT", prefer="oldest")
            await f.settled(lambda: dict.fromkeys(TASKS, "z"))


@pytest.mark.anyio
async def test_corrupt_worker_node_is_ignored_with_node_data_error(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            admin = await f.connect()
            await admin.client.create(f"{ROOT}/workers/garbage", b"\x00not json", make_parents=True)
            a = await f.start("a", "1.0")
            await f.start("b", "1.0")
            await f.settled(lambda: choice({"a": "1.0", "b": "1.0"}))
            error = a.invalid_workers["garbage"]
            assert isinstance(error, NodeDataError)
            assert error.path == f"{ROOT}/workers/garbage"
            assert [w.id for w in await a.workers()] == ["a", "b"]
            # A record that names a newer version but cannot be ordered is ignored too:
            # it must not take the tasks away from the valid workers.
            bad = b'{"id":"evil","version":"9 9","host":"h","pid":1,"started":0}'
            await admin.client.create(f"{ROOT}/workers/evil", bad, mode=CreateMode.EPHEMERAL)
            await eventually(lambda: _has_invalid(a, "evil"), timeout=5)
            await f.settled(lambda: choice({"a": "1.0", "b": "1.0"}))
            # A valid newer worker still takes over while the bad records stay.
            await f.start("c", "1.1")
            await f.settled(lambda: dict.fromkeys(TASKS, "c"))


async def _has_invalid(tl: TaskLeadership, name: str) -> bool:
    return name in tl.invalid_workers


@pytest.mark.anyio
async def test_lead_body_drains_before_hand_over_with_larger_token(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            old = await f.start("old", "1.0", tasks=["report"])
            log: list[tuple[str, str, float]] = []
            lost: list[LeadershipLost] = []
            terms: dict[str, int] = {}
            started = anyio.Event()

            async def run(tl: TaskLeadership, name: str) -> None:
                try:
                    async with tl.lead("report") as term:
                        terms[name] = term.token
                        log.append((name, "start", anyio.current_time()))
                        started.set()
                        try:
                            await anyio.sleep_forever()
                        finally:
                            with anyio.CancelScope(shield=True):
                                await anyio.sleep(0.2)  # drain: the next leader must wait
                            log.append((name, "end", anyio.current_time()))
                except LeadershipLost as exc:
                    lost.append(exc)

            f.tg.start_soon(run, old, "old")
            await started.wait()
            assert old.is_leader("report")
            new = await f.start("new", "1.1", tasks=["report"])
            new_started = anyio.Event()

            async def run_new() -> None:
                try:
                    async with new.lead("report") as term:
                        terms["new"] = term.token
                        log.append(("new", "start", anyio.current_time()))
                        new_started.set()
                        await anyio.sleep_forever()
                except LeadershipLost as exc:
                    lost.append(exc)  # "closed", when the fleet stops

            f.tg.start_soon(run_new)
            await new_started.wait()
            assert [(n, e) for n, e, _ in log] == [
                ("old", "start"),
                ("old", "end"),
                ("new", "start"),
            ]
            assert log[2][2] >= log[1][2]
            assert [(e.reason, e.path) for e in lost] == [("handed over", f"{ROOT}/leaders/report")]
            assert terms["new"] > terms["old"]
            assert not old.is_leader("report")
            node = await new.coord.client.get(f"{ROOT}/leaders/report")
            assert node.stat.czxid == terms["new"]
            assert node.stat.ephemeral_owner == new.coord.session_id


@pytest.mark.anyio
async def test_suspended_stops_leading_and_same_session_resumes(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            tl = await f.start(
                "solo", "1.0", tasks=["a", "b"], hosts=proxy.connect_string, lose_on_suspend=True
            )
            lost: list[str] = []
            tokens: list[int] = []

            async def body() -> None:
                while True:
                    try:
                        async with tl.lead("a") as term:
                            tokens.append(term.token)
                            await anyio.sleep_forever()
                    except LeadershipLost as exc:
                        if exc.reason == "closed":
                            return
                        lost.append(exc.reason)

            f.tg.start_soon(body)
            await eventually(lambda: _true(len(tokens) == 1), timeout=5)
            async with recording(tl.coord) as rec:
                mark = rec.mark()
                proxy.cut()
                await rec.wait_for(ConnectionState.SUSPENDED, after=mark, timeout=5)
                assert tl.leading == frozenset()
                await rec.wait_for(ConnectionState.RECONNECTED, after=mark, timeout=5)
            await eventually(lambda: _true(len(tokens) == 2), timeout=5)
            assert lost == ["suspended"]
            assert tokens[0] == tokens[1]  # same session, same node, same token
            await f_wait(lambda: tl.leading == {"a", "b"})


@pytest.mark.anyio
async def test_suspended_revokes_leadership_where_the_state_is_reported(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    """The one loss rule ends task leadership in the session's state callback: a listener
    that follows the states after the recipe already sees the term ended, no task later."""
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            tl = await f.start(
                "solo", "1.0", tasks=["a"], hosts=proxy.connect_string, lose_on_suspend=True
            )
            seen: list[tuple[ConnectionState, bool]] = []
            terms: list[Any] = []

            async def body() -> None:
                with contextlib.suppress(LeadershipLost):
                    async with tl.lead("a") as term:
                        terms.append(term)
                        await anyio.sleep_forever()

            f.tg.start_soon(body)
            await eventually(lambda: _true(len(terms) == 1), timeout=5)

            def on_event(event: aiocoord.ConnectionEvent) -> None:
                seen.append((event.state, tl.is_leader("a")))

            unfollow = tl.coord.client._session.follow_states(on_event, lambda: None)
            try:
                async with recording(tl.coord) as rec:
                    mark = rec.mark()
                    proxy.cut()
                    await rec.wait_for(ConnectionState.SUSPENDED, after=mark, timeout=5)
            finally:
                unfollow()
            assert (ConnectionState.SUSPENDED, False) in seen


async def _true(value: bool) -> bool:
    return value


@pytest.mark.anyio
async def test_session_expiry_registers_again_with_new_tokens(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            # Keeping leadership through SUSPENDED: only LOST ends it.
            tl = await f.start("solo", "1.0", tasks=["a"], lose_on_suspend=False)
            observer = await f.connect()
            lost: list[str] = []
            tokens: list[int] = []

            async def body() -> None:
                while True:
                    try:
                        async with tl.lead("a") as term:
                            tokens.append(term.token)
                            await anyio.sleep_forever()
                    except LeadershipLost as exc:
                        if exc.reason == "closed":
                            return
                        lost.append(exc.reason)

            f.tg.start_soon(body)
            await eventually(lambda: _true(len(tokens) == 1), timeout=5)
            old_session = tl.coord.session_id
            assert await expire_session(tl.coord)
            await eventually(lambda: _true(len(tokens) == 2), timeout=10)
            assert lost == ["session lost"]
            assert tokens[1] > tokens[0]
            new_session = tl.coord.session_id
            assert new_session != old_session
            worker = await observer.client.exists(f"{ROOT}/workers/solo")
            leader = await observer.client.exists(f"{ROOT}/leaders/a")
            assert worker is not None and worker.ephemeral_owner == new_session
            assert leader is not None and leader.czxid == tokens[1]


@pytest.mark.anyio
async def test_add_remove_task_changes_stream_and_clean_exit(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            a = await f.start("a", "1.0", tasks=["x"])
            b = await f.start("b", "1.0", tasks=["x"])
            both = {"a": "1.0", "b": "1.0"}
            winner = assign(["x"], both, version_key=maven_version_key).leaders["x"]
            loser = "b" if winner == "a" else "a"
            seen: list[TaskChange] = []

            async def follow() -> None:
                async for change in f.workers[loser].changes():
                    seen.append(change)

            f.tg.start_soon(follow)
            await f_wait(lambda: any(c.task == "x" and c.leader for c in seen))
            first = [c for c in seen if c.task == "x"][-1]
            assert first.leader == winner
            assert first.version == "1.0"
            assert first.token is not None

            await a.add_task("y")
            await b.add_task("y")
            await f_wait(lambda: any(c.task == "y" and c.leader for c in seen))
            y_leader = next(c.leader for c in seen if c.task == "y" and c.leader)
            y_tl = f.workers[y_leader]
            assert y_tl.is_leader("y")
            assert (await b.leaders())["y"] == y_leader

            reasons: list[str] = []
            entered = anyio.Event()

            async def hold_y() -> None:
                try:
                    async with y_tl.lead("y"):
                        entered.set()
                        await anyio.sleep_forever()
                except LeadershipLost as exc:
                    reasons.append(exc.reason)

            f.tg.start_soon(hold_y)
            await entered.wait()
            for tl in (a, b):
                await tl.remove_task("y")
            assert reasons == ["task removed"]
            assert "y" not in await b.leaders()
            assert not y_tl.is_leader("y")
            with pytest.raises(ValueError, match="'y'"):
                async with y_tl.lead("y"):
                    pass

            # Leaving deletes the worker's nodes: the other takes over at once.
            assert (await b.leaders())["x"] == winner
            await f.stop(winner)
            client = f.workers[loser].coord.client
            assert await client.exists(f"{ROOT}/workers/{winner}") is None
            await f_wait(lambda: f.workers[loser].is_leader("x"))
            await f_wait(lambda: seen[-1] == TaskChange("x", loser, "1.0", seen[-1].token))
            assert [c.leader for c in seen if c.task == "x"][-3:] == [winner, None, loser]


async def f_wait(check: Callable[[], bool], timeout: float = 5.0) -> None:
    async def probe() -> bool:
        return check()

    await eventually(probe, timeout=timeout, every=0.01)


def test_benchmark_runs_with_tiny_parameters(zk_server: ZooKeeperServer) -> None:
    """benchmarks.tasks keeps working: one hand-over of three tasks, no overlap.

    With its observer, which sees each task released and taken over.
    """
    from benchmarks import tasks as bench

    (result,) = bench.run(zk_server.connect_string, tasks=3, runs=1, settle=0.05, observe=True)
    assert result.overlaps == 0
    assert len(result.gaps) == 3
    # Bounds for sanity only: speed is measured by the benchmark itself, and a
    # loaded machine can stall the worker processes for seconds.
    assert all(0 <= gap < 30 for gap in result.gaps), result.gaps
    assert len(result.released_to_created) == len(result.released_to_led) == 3
    # Both changes can arrive in one read: a difference of zero is possible.
    assert all(0 <= t < 30 for t in result.released_to_created), result.released_to_created
    # The new body starts in another process than the observer's, which may read the
    # deletion later than the new leader did on a loaded machine: below zero is possible
    # (the bound is for sanity only, like the others; overlaps are checked above).
    assert all(-30 < t < 30 for t in result.released_to_led), result.released_to_led


@pytest.mark.anyio
async def test_duplicate_worker_id_waits_until_the_first_leaves(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            first = await f.start("same", "1.0", tasks=["a"])
            await f_wait(lambda: first.is_leader("a"))  # entering does not wait for the lead
            # The twin waits for the first to leave within its request timeout: on a loaded
            # machine the first's leaving (its bodies, its nodes, its session) took over 3 s.
            coord = await f.connect(session_timeout=8.0)
            twin = task_leadership(coord, ROOT, worker=Worker("2.0", id="same"), tasks=["a"])
            with anyio.move_on_after(0.5) as waited:
                await twin.__aenter__()
            assert waited.cancelled_caught  # still waiting for the other "same" to go
            assert await coord.client.ephemerals("/") == []  # and nothing of it left behind
            assert first.is_leader("a")

            second = task_leadership(coord, ROOT, worker=Worker("2.0", id="same"), tasks=["a"])
            entered = anyio.Event()

            async def enter_second() -> None:
                async with second:
                    entered.set()
                    async with second.lead("a") as term:
                        assert term.worker_id == "same" and term.version == "2.0"
                        await anyio.sleep_forever()

            f.tg.start_soon(enter_second)
            await f.stop("same")
            await entered.wait()
            await f_wait(lambda: second.is_leader("a"))
            assert [w.version for w in await second.workers()] == ["2.0"]
            f.tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_settle_delay_keeps_a_flapping_worker_from_moving_tasks(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    settle = 1.0
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            for w in ("a", "b"):
                await f.start(w, "1.0", settle=settle)
            before = await f.settled(lambda: choice({"a": "1.0", "b": "1.0"}))
            observer = await f.connect()

            async def tokens() -> dict[str, int]:
                out = {}
                for task in TASKS:
                    stat = await observer.client.exists(f"{ROOT}/leaders/{task}")
                    assert stat is not None
                    out[task] = stat.czxid
                return out

            first = await tokens()
            joined = anyio.current_time()
            await f.start("flap", "1.1", settle=settle)
            await f.stop("flap")  # gone well within the settle delay
            assert anyio.current_time() - joined < settle
            # Proving that nothing happens takes waiting out the delay.
            await anyio.sleep(joined + settle * 1.3 - anyio.current_time())
            assert await tokens() == first  # nobody let go of anything
            assert await f.settled(lambda: before) == before
            # A newer worker that stays takes over once the delay has passed.
            await f.start("stays", "1.1", settle=settle)
            await f.settled(lambda: dict.fromkeys(TASKS, "stays"), timeout=10)


@pytest.mark.anyio
async def test_write_batcher_gathers_writes_and_keeps_each_outcome(
    coordinator: aiocoord.Coordinator,
) -> None:
    client = coordinator.client
    writes = WriteBatcher(client)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(writes.run)
            await client.create("/taken", b"other")
            results: dict[str, Any] = {}

            async def create(path: str) -> None:
                try:
                    results[path] = await writes.create(path, b"me")
                except aiocoord.CoordError as exc:
                    results[path] = exc

            async with anyio.create_task_group() as batch:
                for path in ("/p/a", "/p/b", "/taken", "/p/c"):  # "/p" is made on the way
                    batch.start_soon(create, path)
            assert isinstance(results.pop("/taken"), aiocoord.NodeExistsError)
            for path, (czxid, owner) in results.items():
                stat = await client.exists(path)
                assert stat is not None
                assert (stat.czxid, stat.ephemeral_owner) == (czxid, owner)
                assert owner == coordinator.session_id

            # Without a conflict the creates share one transaction: one czxid for all.
            await client.ensure_path("/q")
            results.clear()
            async with anyio.create_task_group() as batch:
                for path in ("/q/a", "/q/b", "/q/c"):
                    batch.start_soon(create, path)
            assert len({czxid for czxid, _owner in results.values()}) == 1

            failed: list[BaseException] = []

            async def delete(path: str, version: int) -> None:
                try:
                    await writes.delete(path, version)
                except aiocoord.CoordError as exc:
                    failed.append(exc)

            async with anyio.create_task_group() as batch:
                batch.start_soon(delete, "/q/a", 0)
                batch.start_soon(delete, "/q/b", 7)  # wrong version: fails alone
                batch.start_soon(delete, "/q/c", 0)
            assert [type(e) for e in failed] == [aiocoord.BadVersionError]
            assert await client.exists("/q/a") is None
            assert await client.exists("/q/b") is not None
            assert await client.exists("/q/c") is None
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_worker_node_deleted_by_someone_comes_back_with_the_same_record(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The worker node is a `persistent_node`: put back at once, same path and same bytes."""
    with anyio.fail_after(20):
        async with fleet(zk_server, zk_chroot) as f:
            tl = await f.start("solo", "1.0", tasks=["a"])
            observer = await f.connect()
            path = f"{ROOT}/workers/solo"
            before = await observer.client.get(path)
            assert before.data == encode_worker(tl.worker)
            assert before.stat.ephemeral_owner == tl.coord.session_id
            await observer.client.delete(path)

            async def back() -> bool:
                try:
                    node = await observer.client.get(path)
                except NoNodeError:
                    return False
                return node.stat.czxid != before.stat.czxid

            await eventually(back, timeout=5)
            after = await observer.client.get(path)
            assert after.data == before.data
            assert after.stat.ephemeral_owner == tl.coord.session_id
            await f_wait(lambda: tl.is_leader("a"))
            assert [w.id for w in await tl.workers()] == ["solo"]
            await f.stop("solo")
            assert await observer.client.exists(path) is None  # deleted on leaving
