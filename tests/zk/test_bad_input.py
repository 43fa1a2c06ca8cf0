"""The bad-input sweep: every public entry point given what it must refuse, on a real server.

Wrong types, empty and oversized strings, bad paths, payloads over ZooKeeper's
1 MB limit, foreign and corrupt data in every recipe's nodes, a namespace that
does not exist or cannot exist, and servers that answer garbage or nothing.
Each gets a clear error (a `CoordError`, or `TypeError` / `ValueError` naming
the argument for a programming error), and ZooKeeper is left as it was: the
tree under the test's path (paths, data, data versions, owners) is compared
before and after, and no node appears at the top level.
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import (
    CasLock,
    ConfigError,
    ConnectionLostError,
    ConnectionState,
    CoordError,
    Coordinator,
    InvalidPathError,
    JobFailed,
    LeaderLatch,
    NodeDataError,
    NoNodeError,
    Settings,
    TaskLeadership,
    Worker,
    ZkClient,
    cas_lock,
    connect,
    leader_latch,
    once_per,
    task_leadership,
)
from aiocoord.errors import NoChildrenForEphemeralsError
from aiocoord.recipes.task_leadership import MavenVersion, maven_version_key
from aiocoord.scheduler import Scheduler
from aiocoord.scheduler._records import (
    JobsLayout,
    ResultRecord,
    encode_job,
    encode_result,
    job_limit,
    room_for_data,
)
from aiocoord.testing import FaultProxy, GarbageListener, SilentListener, ZooKeeperServer
from aiocoord.zk import CreateMode, CreateOp, DeleteOp, SetDataOp
from aiocoord.zk.client import MAX_DATA
from aiocoord.zk.paths import join
from tests.helpers import recording

pytestmark = pytest.mark.anyio

Tree = dict[str, tuple[bytes, int, int]]

NON_UTF8 = b"\xff\xfe\xfa"
FOREIGN = (
    NON_UTF8,
    b"not json at all",
    b"[1, 2, 3]",
    b'{"format": "someone-else/7"}',
    b"\x00" * 64,
)


async def tree(client: ZkClient, root: str) -> Tree:
    """Every node under `root`: data, data version and ephemeral owner."""
    out: Tree = {}

    async def walk(path: str) -> None:
        try:
            node = await client.get(path)
            kids = await client.children(path)
        except NoNodeError:
            return
        out[path] = (node.data, node.stat.version, node.stat.ephemeral_owner)
        for kid in kids:
            await walk(join(path, kid))

    await walk(root)
    return out


@asynccontextmanager
async def unchanged(raw: Coordinator, root: str) -> AsyncIterator[None]:
    """Assert that the block leaves the tree under `root` as it was, and adds nothing at "/"."""
    before = await tree(raw.client, root)
    tops = set(await raw.client.children("/"))
    yield
    after = await tree(raw.client, root)
    # The server reaps empty containers (recipe parents) whenever it likes: an empty
    # leaf that vanished is not a change made by the block.
    reaped = {
        path
        for path, node in before.items()
        if path not in after
        and node == (b"", 0, 0)
        and not any(p.startswith(path + "/") for p in before)
    }
    assert after == {p: n for p, n in before.items() if p not in reaped}, (
        f"ZooKeeper changed: {sorted((set(after) ^ set(before)) - reaped)}"
    )
    assert set(await raw.client.children("/")) <= tops


@pytest.fixture
async def raw(zk_server: ZooKeeperServer) -> AsyncIterator[Coordinator]:
    """A coordinator on the whole tree: the foreign client, and the observer of snapshots."""
    async with aiocoord.connect(zk_server.connect_string, session_timeout=4.0) as coord:
        yield coord


def expect(
    failures: list[str],
    label: str,
    call: Callable[[], object],
    kinds: type[BaseException] | tuple[type[BaseException], ...],
    names: str,
) -> None:
    """Record in `failures` unless `call()` raises one of `kinds` with `names` in its message."""
    try:
        result = call()
    except kinds as exc:
        if names.lower() not in str(exc).lower():
            failures.append(f"{label}: {type(exc).__name__}({exc}) does not name {names!r}")
        return
    except BaseException as exc:
        failures.append(f"{label}: {type(exc).__name__}: {exc} (wanted {kinds})")
        return
    failures.append(f"{label}: no error, returned {type(result).__name__}")


async def _echo(text: str) -> str:
    return text


async def _not_json(sock: socket.socket) -> None:
    pass


LONG = "x" * 5000
x: Any = "x"  # wrong types, typed Any so the calls type-check
five: Any = 5
nothing: Any = None
not_async: Any = len


# --- arguments ------------------------------------------------------------------------------


async def test_settings_and_connect_refuse_bad_arguments(zk_server: ZooKeeperServer) -> None:
    h = zk_server.connect_string
    cases: list[tuple[str, Callable[[], object], Any, str]] = [
        ("connect(123)", lambda: connect(five), ConfigError, "hosts"),
        ("connect('')", lambda: connect(""), ConfigError, "hosts"),
        ("connect('h:99999')", lambda: connect("h:99999"), ConfigError, "hosts"),
        ("connect('h:x')", lambda: connect("h:x"), ConfigError, "hosts"),
        ("chroot '/a//b'", lambda: connect(h + "/a//b"), ConfigError, "hosts"),
        ("session_timeout='x'", lambda: connect(h, session_timeout="x"), ConfigError, "session_timeout"),
        ("session_timeout=nan", lambda: connect(h, session_timeout=math.nan), ConfigError, "session_timeout"),
        ("session_timeout=-1", lambda: connect(h, session_timeout=-1), ConfigError, "session_timeout"),
        ("connect_timeout=0", lambda: connect(h, connect_timeout=0), ConfigError, "connect_timeout"),
        ("request_timeout=inf", lambda: connect(h, request_timeout=math.inf), ConfigError, "request_timeout"),
        ("namespace='rel'", lambda: connect(h, namespace="rel"), ConfigError, "namespace"),
        ("namespace=5", lambda: connect(h, namespace=five), ConfigError, "namespace"),
        ("namespace='/zookeeper'", lambda: connect(h, namespace="/zookeeper"), ConfigError, "namespace"),
        ("namespace too long", lambda: connect(h, namespace="/" + LONG), ConfigError, "namespace"),
        ("namespace and chroot", lambda: connect(h + "/a", namespace="/b"), ConfigError, "chroot"),
        ("auth='x'", lambda: connect(h, auth="x"), ConfigError, "auth"),
        ("unknown setting", lambda: connect(h, bogus=1), ConfigError, "bogus"),
        ("tls_ca_file missing", lambda: connect(h, tls_ca_file="/nonexistent"), ConfigError, "tls_ca_file"),
        ("read_only='maybe'", lambda: connect(h, read_only="maybe"), ConfigError, "read_only"),
        ("session_lost_fraction=2", lambda: connect(h, session_lost_fraction=2), ConfigError, "session_lost_fraction"),
        ("Settings(hosts=None)", lambda: Settings(hosts=nothing), ConfigError, "hosts"),
        ("Settings override hosts=5", lambda: connect(Settings(hosts=h), hosts=five), ConfigError, "hosts"),
        ("Coordinator('x')", lambda: Coordinator(x), TypeError, "settings"),
    ]  # fmt: skip
    failures: list[str] = []
    for label, call, kinds, names in cases:
        expect(failures, label, call, kinds, names)
    assert not failures, "\n".join(failures)


async def test_recipe_constructors_refuse_bad_arguments(zk_server: ZooKeeperServer) -> None:
    c = Coordinator(Settings(hosts=zk_server.connect_string))  # never entered: nothing is sent
    w = Worker("1.0")
    sched = Scheduler(c, "/jobs")
    sched.job("echo")(_echo)
    timed: Any = {"timeout": 5}  # once_per takes no timeout (its options do not list one)
    bad_path: list[tuple[str, object]] = [
        ("int", 5), ("empty", ""), ("relative", "rel"), ("trailing /", "/a/"),
        ("double /", "/a//b"), ("dot", "/a/./b"), ("NUL", "/a\x00"),
        ("reserved", "/zookeeper/x"), ("oversized", "/" + LONG),
    ]  # fmt: skip
    cases: list[tuple[str, Callable[[], object], Any, str]] = []
    for what, path in bad_path:
        p: Any = path
        cases += [
            (f"leader_latch path {what}", partial(leader_latch, c, p), InvalidPathError, "path"),
            (f"LeaderLatch path {what}", partial(LeaderLatch, c, p), InvalidPathError, "path"),
            (f"cas_lock path {what}", partial(cas_lock, c, p), InvalidPathError, "path"),
            (f"CasLock path {what}", partial(CasLock, c, p), InvalidPathError, "path"),
            (f"once_per path {what}", partial(once_per, c, p, 60), InvalidPathError, "path"),
            (f"task_leadership root {what}", partial(task_leadership, c, p, worker=w, tasks=["a"]), InvalidPathError, "root"),
        ]  # fmt: skip
    cases += [
        ("LeaderLatch coord", lambda: LeaderLatch(x, "/a"), TypeError, "coord"),
        ("LeaderLatch root", lambda: LeaderLatch(c, "/"), InvalidPathError, "root"),
        ("participant_id=5", lambda: leader_latch(c, "/a", participant_id=five), TypeError, "participant_id"),
        ("participant_id=''", lambda: leader_latch(c, "/a", participant_id=""), ConfigError, "participant_id"),
        ("participant_id oversized", lambda: leader_latch(c, "/a", participant_id=LONG), ConfigError, "participant_id"),
        ("participant_id surrogate", lambda: leader_latch(c, "/a", participant_id="\ud800"), ConfigError, "participant_id"),
        ("layout='x'", lambda: leader_latch(c, "/a", layout="x"), ConfigError, "layout"),
        ("lose_on_suspend='y'", lambda: leader_latch(c, "/a", lose_on_suspend=x), TypeError, "lose_on_suspend"),
        ("CasLock coord", lambda: CasLock(x, "/l"), TypeError, "coord"),
        ("owner=5", lambda: cas_lock(c, "/l", owner=five), TypeError, "owner"),
        ("owner=''", lambda: cas_lock(c, "/l", owner=""), ConfigError, "owner"),
        ("owner oversized", lambda: cas_lock(c, "/l", owner=LONG), ConfigError, "owner"),
        ("lease=0", lambda: cas_lock(c, "/l", lease=0), ConfigError, "lease"),
        ("lease=-1", lambda: cas_lock(c, "/l", lease=-1), ConfigError, "lease"),
        ("lease=nan", lambda: cas_lock(c, "/l", lease=math.nan), ConfigError, "lease"),
        ("lease=inf", lambda: cas_lock(c, "/l", lease=math.inf), ConfigError, "lease"),
        ("lease='5'", lambda: cas_lock(c, "/l", lease=x), TypeError, "lease"),
        ("lease=True", lambda: cas_lock(c, "/l", lease=True), TypeError, "lease"),
        ("skew >= lease/2", lambda: cas_lock(c, "/l", lease=6, skew=3), ConfigError, "skew"),
        ("skew=-1", lambda: cas_lock(c, "/l", skew=-1), ConfigError, "skew"),
        ("skew='x'", lambda: cas_lock(c, "/l", skew=x), TypeError, "skew"),
        ("blocking='x'", lambda: cas_lock(c, "/l", blocking=x), TypeError, "blocking"),
        ("blocking=False timeout=5", lambda: cas_lock(c, "/l", blocking=False, timeout=5), ConfigError, "timeout"),
        ("blocking=False timeout=inf", lambda: cas_lock(c, "/l", blocking=False, timeout=math.inf), ConfigError, "timeout"),
        ("blocking=False timeout='x'", lambda: cas_lock(c, "/l", blocking=False, timeout=x), TypeError, "timeout"),
        ("hold blocking=False timeout=5", lambda: CasLock(c, "/l").hold(blocking=False, timeout=5), ConfigError, "timeout"),
        ("hold timeout=-1", lambda: CasLock(c, "/l").hold(timeout=-1), ConfigError, "timeout"),
        ("hold blocking='x'", lambda: CasLock(c, "/l").hold(blocking=x), TypeError, "blocking"),
        ("once_per timeout=5", lambda: once_per(c, "/o", 60, **timed), ConfigError, "timeout"),
        ("interval=0", lambda: once_per(c, "/o", 0), ConfigError, "interval"),
        ("interval=nan", lambda: once_per(c, "/o", math.nan), ConfigError, "interval"),
        ("interval=inf", lambda: once_per(c, "/o", math.inf), ConfigError, "interval"),
        ("interval='x'", lambda: once_per(c, "/o", x), TypeError, "interval"),
        ("once_per owner=''", lambda: once_per(c, "/o", 60, owner=""), ConfigError, "owner"),
        ("TaskLeadership coord", lambda: TaskLeadership(x, "/t", worker=w, tasks=["a"]), TypeError, "coord"),
        ("worker='x'", lambda: task_leadership(c, "/t", worker=x, tasks=["a"]), TypeError, "worker"),
        ("tasks='abc'", lambda: task_leadership(c, "/t", worker=w, tasks="abc"), TypeError, "tasks"),
        (
            "lose_on_suspend='y'",
            lambda: task_leadership(c, "/t", worker=w, tasks=["a"], lose_on_suspend=x),
            TypeError,
            "lose_on_suspend",
        ),
        ("tasks=5", lambda: task_leadership(c, "/t", worker=w, tasks=five), TypeError, "tasks"),
        ("tasks=['']", lambda: task_leadership(c, "/t", worker=w, tasks=[""]), ConfigError, "tasks"),
        ("tasks=['a/b']", lambda: task_leadership(c, "/t", worker=w, tasks=["a/b"]), ConfigError, "tasks"),
        ("tasks=['..']", lambda: task_leadership(c, "/t", worker=w, tasks=[".."]), ConfigError, "tasks"),
        ("tasks=[5]", lambda: task_leadership(c, "/t", worker=w, tasks=[five]), ConfigError, "tasks"),
        ("tasks oversized", lambda: task_leadership(c, "/t", worker=w, tasks=[LONG]), ConfigError, "tasks"),
        ("prefer='x'", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], prefer=x), ConfigError, "prefer"),
        ("version_key=5", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], version_key=x), TypeError, "version_key"),
        ("version_key refuses", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], version_key=int), ConfigError, "version"),
        ("settle=-1", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], settle=-1), ConfigError, "settle"),
        ("settle=nan", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], settle=math.nan), ConfigError, "settle"),
        ("settle='x'", lambda: task_leadership(c, "/t", worker=w, tasks=["a"], settle=x), ConfigError, "settle"),
        ("Worker(5)", lambda: Worker(five), ConfigError, "version"),
        ("Worker('')", lambda: Worker(""), ConfigError, "version"),
        ("Worker('1 2')", lambda: Worker("1 2"), ConfigError, "version"),
        ("Worker('1\\n')", lambda: Worker("1\n"), ConfigError, "version"),
        ("Worker huge number", lambda: Worker("1" * 100_000), ConfigError, "version"),
        ("Worker id='a/b'", lambda: Worker("1", id="a/b"), ConfigError, "id"),
        ("Worker id=''", lambda: Worker("1", id=""), ConfigError, "id"),
        ("Worker id oversized", lambda: Worker("1", id=LONG), ConfigError, "id"),
        ("Worker id=5", lambda: Worker("1", id=five), ConfigError, "id"),
        ("Worker host=5", lambda: Worker("1", host=five), ConfigError, "host"),
        ("maven_version_key(None)", lambda: maven_version_key(nothing), ConfigError, "version"),
        ("maven_version_key('')", lambda: maven_version_key(""), ConfigError, "version"),
        ("MavenVersion(5)", lambda: MavenVersion(five), ConfigError, "version"),
        ("CreateMode('x')", lambda: CreateMode(x), ValueError, "createmode"),
        ("Scheduler coord", lambda: Scheduler(x, "/j"), TypeError, "coord"),
        ("Scheduler root '/'", lambda: Scheduler(c, "/"), InvalidPathError, "root"),
        ("Scheduler root 'rel'", lambda: Scheduler(c, "rel"), InvalidPathError, "root"),
        ("Scheduler root 5", lambda: Scheduler(c, five), InvalidPathError, "root"),
        ("Scheduler strategy='x'", lambda: Scheduler(c, "/j", strategy=x), ValueError, "strategy"),
        ("Scheduler strategy=5", lambda: Scheduler(c, "/j", strategy=five), TypeError, "strategy"),
        ("Scheduler result_ttl=0", lambda: Scheduler(c, "/j", result_ttl=0), ConfigError, "result_ttl"),
        ("Scheduler result_ttl=nan", lambda: Scheduler(c, "/j", result_ttl=math.nan), ConfigError, "result_ttl"),
        ("Scheduler result_ttl='x'", lambda: Scheduler(c, "/j", result_ttl=x), TypeError, "result_ttl"),
        ("Scheduler result_ttl=True", lambda: Scheduler(c, "/j", result_ttl=True), TypeError, "result_ttl"),
        ("job name ''", lambda: sched.job("")(_echo), ValueError, "name"),
        ("job name 'a/b'", lambda: sched.job("a/b")(_echo), ValueError, "name"),
        ("job name 5", lambda: sched.job(five)(_echo), TypeError, "name"),
        ("job name oversized", lambda: sched.job(LONG)(_echo), ValueError, "name"),
        ("job handler not async", lambda: sched.job("sync")(not_async), TypeError, "async"),
        ("job handler hints not JSON", lambda: sched.job("sock")(_not_json), TypeError, "sock"),
        ("job registered twice", lambda: sched.job("echo")(_echo), ValueError, "already registered"),
        ("worker capacity=0", lambda: sched.worker(capacity=0), ConfigError, "capacity"),
        ("worker capacity='x'", lambda: sched.worker(capacity=x), ConfigError, "capacity"),
        ("worker capacity=True", lambda: sched.worker(capacity=True), ConfigError, "capacity"),
        ("worker worker_id='a b'", lambda: sched.worker(worker_id="a b"), ConfigError, "worker_id"),
        ("worker worker_id oversized", lambda: sched.worker(worker_id=LONG), ConfigError, "worker_id"),
        ("worker participant_id='a b'", lambda: sched.worker(participant_id="a b"), ConfigError, "participant_id"),
        ("worker participant_id=5", lambda: sched.worker(participant_id=five), ConfigError, "participant_id"),
        ("worker participant_id and worker_id", lambda: sched.worker(participant_id="a", worker_id="b"), ConfigError, "participant_id"),
        ("worker drain_timeout=-1", lambda: sched.worker(drain_timeout=-1), ConfigError, "drain_timeout"),
        ("worker drain_timeout=nan", lambda: sched.worker(drain_timeout=math.nan), ConfigError, "drain_timeout"),
        ("worker drain_timeout='x'", lambda: sched.worker(drain_timeout=x), TypeError, "drain_timeout"),
    ]  # fmt: skip
    failures: list[str] = []
    for label, call, kinds, names in cases:
        expect(failures, label, call, kinds, names)
    assert not failures, "\n".join(failures)


async def test_seconds_that_are_not_finite_are_refused(zk_server: ZooKeeperServer) -> None:
    """NaN slipped through ``x < 0`` checks: ``liveness_grace=nan`` silently disabled liveness."""
    fastapi = pytest.importorskip("aiocoord.integrations.fastapi")
    from aiocoord.integrations.fastapi import Coordination

    h = zk_server.connect_string
    c = Coordinator(Settings(hosts=h))  # never entered: nothing is sent
    cases: list[tuple[str, Callable[[], object], Any, str]] = [
        ("liveness_grace=nan", lambda: fastapi.lifespan(h, liveness_grace=math.nan), ConfigError, "liveness_grace"),
        ("liveness_grace=inf", lambda: fastapi.lifespan(h, liveness_grace=math.inf), ConfigError, "liveness_grace"),
        ("liveness_grace=-1", lambda: fastapi.lifespan(h, liveness_grace=-1), ConfigError, "liveness_grace"),
        ("liveness_grace='1'", lambda: fastapi.lifespan(h, liveness_grace=x), TypeError, "liveness_grace"),
        ("Coordination grace=nan", lambda: Coordination(c, grace=math.nan), ConfigError, "liveness_grace"),
        ("status_detail='y'", lambda: fastapi.lifespan(h, status_detail=x), TypeError, "status_detail"),
        ("retire_on_signal=1", lambda: fastapi.lifespan(h, retire_on_signal=five), TypeError, "retire_on_signal"),
    ]  # fmt: skip
    failures: list[str] = []
    for label, call, kinds, names in cases:
        expect(failures, label, call, kinds, names)
    with FaultProxy(*zk_server.address) as proxy:
        for seconds in (math.nan, math.inf, -1.0):
            expect(
                failures,
                f"FaultProxy.delay({seconds})",
                partial(proxy.delay, seconds),
                ValueError,
                "delay",
            )
    assert not failures, "\n".join(failures)


async def test_client_requests_refuse_bad_arguments(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """Every `ZkClient` request with a bad argument fails before anything is sent."""
    cl = coordinator.client
    calls: list[tuple[str, Callable[[], Any], Any, str]] = [
        ("create(5)", lambda: cl.create(five), InvalidPathError, "path"),
        ("create('rel')", lambda: cl.create("rel"), InvalidPathError, "path"),
        ("create('/a/')", lambda: cl.create("/a/"), InvalidPathError, "path"),
        ("create('/zookeeper/x')", lambda: cl.create("/zookeeper/x"), InvalidPathError, "path"),
        ("create oversized path", lambda: cl.create("/" + LONG), InvalidPathError, "path"),
        ("create(data='str')", lambda: cl.create("/a", x), TypeError, "data"),
        ("create(data=None)", lambda: cl.create("/a", nothing), TypeError, "data"),
        ("create(mode='x')", lambda: cl.create("/a", mode=x), TypeError, "mode"),
        ("create(ttl=) without a TTL mode", lambda: cl.create("/a", ttl=5), ValueError, "ttl"),
        ("create TTL mode, ttl=0", lambda: cl.create("/a", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=0), ValueError, "ttl"),
        ("create_protected('rel')", lambda: cl.create_protected("rel", b""), InvalidPathError, "path"),
        ("get(None)", lambda: cl.get(nothing), InvalidPathError, "path"),
        ("exists('')", lambda: cl.exists(""), InvalidPathError, "path"),
        ("children(5)", lambda: cl.children(five), InvalidPathError, "path"),
        ("set(data='str')", lambda: cl.set("/", x), TypeError, "data"),
        ("set(version='1')", lambda: cl.set("/", b"", version=x), ValueError, "version"),
        ("delete(version=-2)", lambda: cl.delete("/x", version=-2), ValueError, "version"),
        ("ensure_path('/a//b')", lambda: cl.ensure_path("/a//b"), InvalidPathError, "path"),
        ("delete_all('a')", lambda: cl.delete_all("a"), InvalidPathError, "path"),
        ("multi('x')", lambda: cl.multi(x), TypeError, "ops"),
        ("multi([1])", lambda: cl.multi([five]), TypeError, "multi"),
        ("multi bad path", lambda: cl.multi([CreateOp("/ok"), CreateOp("rel")]), InvalidPathError, "path"),
        ("multi bad data", lambda: cl.multi([CreateOp("/ok"), SetDataOp("/", x)]), TypeError, "data"),
        ("multi bad version", lambda: cl.multi([CreateOp("/ok"), DeleteOp("/", x)]), ValueError, "version"),
        ("watch(5)", lambda: cl.watch(five), InvalidPathError, "path"),
        ("sync(5)", lambda: cl.sync(five), InvalidPathError, "path"),
        ("ephemerals(5)", lambda: cl.ephemerals(five), InvalidPathError, "path"),
    ]  # fmt: skip
    failures: list[str] = []
    with anyio.fail_after(20):
        async with recording(coordinator) as rec, unchanged(raw, zk_chroot):
            for label, call, kinds, names in calls:
                try:
                    result = call()
                    if hasattr(result, "__aenter__"):
                        async with result:
                            pass
                    else:
                        await result
                except kinds as exc:
                    if names.lower() not in str(exc).lower():
                        failures.append(f"{label}: {exc!r} does not name {names!r}")
                    continue
                except BaseException as exc:
                    failures.append(f"{label}: {exc!r} (wanted {kinds})")
                    continue
                failures.append(f"{label}: no error")
        assert rec.states == [ConnectionState.CONNECTED]  # never dropped
    assert not failures, "\n".join(failures)


async def test_payloads_over_one_megabyte_fail_before_reaching_the_server(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """ZooKeeper drops the connection on a packet over jute.maxbuffer: refuse it here instead.

    A dropped connection suspends every recipe on the session (leaders lose
    their terms), so a too-large write must fail alone, as a `ValueError`.
    """
    cl = coordinator.client
    big = b"x" * MAX_DATA  # the data fits the limit; with the path and headers, the packet does not
    with anyio.fail_after(20):
        await cl.create("/there", b"")
        async with recording(coordinator) as rec, unchanged(raw, zk_chroot):
            requests: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
                ("create 1 MB", lambda: cl.create("/big", big)),
                ("create over 1 MB", lambda: cl.create("/big", big + b"x")),
                ("set 1 MB", lambda: cl.set("/there", big)),
                ("multi of 2 x 0.6 MB", lambda: cl.multi([CreateOp("/m1", big[:600_000]), CreateOp("/m2", big[:600_000])])),
                ("protected create 1 MB", lambda: cl.create_protected("/p", big)),
            ]  # fmt: skip
            for label, request in requests:
                with pytest.raises(ValueError, match="at most") as info:
                    await request()
                assert "1048575" in str(info.value), label
            assert rec.states == [ConnectionState.CONNECTED]  # the connection never dropped
        # Just under the limit still works, on the same connection.
        await cl.create("/fits", big[:1_000_000])
        assert len((await cl.get("/fits")).data) == 1_000_000
        assert rec.states == [ConnectionState.CONNECTED]


async def test_scheduler_requests_refuse_bad_input_before_writing(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    sched = Scheduler(coordinator, "/jobs")
    sched.job("echo")(_echo)
    too_big = "x" * job_limit(JobsLayout("/jobs"))  # fits a node, not the assigner's transaction
    calls: list[tuple[str, Callable[[], Awaitable[Any]], Any, str]] = [
        ("submit unknown name", lambda: sched.submit("nope", {"text": "a"}), ValueError, "name"),
        ("submit name=5", lambda: sched.submit(five, {"text": "a"}), TypeError, "name"),
        ("submit payload wrong type", lambda: sched.submit("echo", {"text": 5}), ValueError, "payload"),
        ("submit payload missing key", lambda: sched.submit("echo", {}), ValueError, "payload"),
        ("submit payload extra key", lambda: sched.submit("echo", {"text": "a", "b": 1}), ValueError, "extra"),
        ("submit payload not a mapping", lambda: sched.submit("echo", five), TypeError, "mapping"),
        ("submit payload over 1 MB", lambda: sched.submit("echo", {"text": "x" * (1 << 20)}), ValueError, "1 MB"),
        ("submit payload at the node limit", lambda: sched.submit("echo", {"text": too_big}), ValueError, "1 MB"),
        ("submit job_id ''", lambda: sched.submit("echo", {"text": "a"}, job_id=""), ValueError, "job_id"),
        ("submit job_id 'a/b'", lambda: sched.submit("echo", {"text": "a"}, job_id="a/b"), ValueError, "job_id"),
        ("submit job_id oversized", lambda: sched.submit("echo", {"text": "a"}, job_id=LONG), ValueError, "job_id"),
        ("submit job_id=5", lambda: sched.submit("echo", {"text": "a"}, job_id=five), TypeError, "job_id"),
        ("result job_id 'a/b'", lambda: sched.result("a/b"), ValueError, "job_id"),
        ("result job_id=None", lambda: sched.result(nothing), TypeError, "job_id"),
        ("status job_id ''", lambda: sched.status(""), ValueError, "job_id"),
        ("status of a job never submitted", lambda: sched.status("never"), NoNodeError, "no job"),
    ]  # fmt: skip
    failures: list[str] = []
    with anyio.fail_after(20):
        async with recording(coordinator) as rec, unchanged(raw, zk_chroot):
            for label, call, kinds, names in calls:
                try:
                    await call()
                except kinds as exc:
                    if names.lower() not in str(exc).lower():
                        failures.append(f"{label}: {exc!r} does not name {names!r}")
                    continue
                except BaseException as exc:
                    failures.append(f"{label}: {exc!r} (wanted {kinds})")
                    continue
                failures.append(f"{label}: no error")
        assert rec.states == [ConnectionState.CONNECTED]
    assert not failures, "\n".join(failures)


async def test_submit_without_a_server_raises_connection_lost(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A submit that cannot reach ZooKeeper in time says so with a `CoordError`.

    It raised a bare `TimeoutError` from its wait for the connection (found by
    campaign seed 10, under load).
    """
    with FaultProxy(*zk_server.address) as proxy, anyio.fail_after(20):
        async with connect(proxy.connect_string, namespace=zk_chroot, session_timeout=1.0) as coord:
            sched = Scheduler(coord, "/jobs")
            sched.job("echo")(_echo)
            proxy.pause()
            with pytest.raises(ConnectionLostError, match="could not submit"):
                await sched.submit("echo", {"text": "a"})
            proxy.resume()


async def test_scheduler_jobs_and_results_at_the_size_limit(
    coordinator: Coordinator, zk_chroot: str
) -> None:
    """The largest job submit accepts can be assigned and run, with the longest ids there are.

    A result too large to be written fails its job (`JobFailed`), and the worker
    carries on.
    """
    sched = Scheduler(coordinator, "/jobs")
    sched.job("echo")(_echo)

    @sched.job("make")
    async def make(size: int) -> str:
        return "y" * size

    layout = JobsLayout("/jobs")
    longest = "w" * 200
    record = len(encode_job("echo", {"text": ""}))
    text = "x" * (job_limit(layout) - record - 8)  # `submitted` may print a few digits more
    with anyio.fail_after(30):
        async with sched.worker(capacity=2, worker_id=longest) as worker:
            job_id = await sched.submit("echo", {"text": text}, job_id="j" * 200)
            assert await sched.result(job_id) == text
            room = room_for_data(layout.result("r" * 200))
            fits = room - len(
                encode_result(
                    ResultRecord("make", True, "", worker=worker.id or "", finished=time.time())
                )
            )
            ok = await sched.submit("make", {"size": fits - 8}, job_id="r" * 200)
            assert len(await sched.result(ok)) == fits - 8
            with pytest.raises(JobFailed, match="at most") as info:
                await sched.result(await sched.submit("make", {"size": room}))
            assert info.value.type == "ValueError"
            assert await sched.result(await sched.submit("echo", {"text": "still"})) == "still"


# --- foreign data in recipe nodes ------------------------------------------------------------


async def test_foreign_data_in_a_lock_record(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """A lock node holding anything but a lock record: NodeDataError, and it is never overwritten."""
    path = join(zk_chroot, "lock")
    await raw.client.create(path, b"")
    for data in FOREIGN:
        await raw.client.set(path, data)
        with anyio.fail_after(10):
            async with unchanged(raw, zk_chroot):
                lock = CasLock(coordinator, "/lock", owner="me", lease=5.0)
                for label, attempt in [
                    ("try_acquire", lock.try_acquire),
                    ("acquire", lock.acquire),
                    ("status", lock.status),
                ]:
                    with pytest.raises(NodeDataError) as info:
                        await attempt()
                    assert info.value.path == "/lock", label
                with pytest.raises(NodeDataError):
                    async with cas_lock(coordinator, "/lock", owner="me", lease=5.0):
                        pytest.fail("held a lock whose record is foreign")
                with pytest.raises(NodeDataError):
                    async with once_per(coordinator, "/lock", 60.0, owner="me"):
                        pytest.fail("ran a window whose record is foreign")


async def test_foreign_data_in_latch_nodes(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """Foreign and non-UTF-8 nodes in an election: observers say NodeDataError, the latch carries on."""
    for layout, names in [
        ("curator", ["_c_00000000-0000-0000-0000-000000000000-latch-0000000000", "stranger"]),
        ("zookeeper", ["n_0000000000", "stranger"]),
    ]:
        path = join(zk_chroot, f"latch-{layout}")
        await raw.client.create(path, b"")
        for name in names:
            await raw.client.create(join(path, name), NON_UTF8)
        with anyio.fail_after(15):
            async with unchanged(raw, zk_chroot):
                latch = LeaderLatch(
                    coordinator, f"/latch-{layout}", participant_id="me", layout=layout
                )
                with pytest.raises(NodeDataError, match="UTF-8"):
                    await latch.participants()
                with pytest.raises(NodeDataError):
                    await latch.leader()
                async with latch:
                    assert latch.node is not None
                    assert not latch.has_leadership  # a foreign node sorts ahead: it is a contender
                    with pytest.raises(NodeDataError):
                        await latch.participants()
        # Once the foreign contenders go, the latch that was left alone would lead; a new one does.
        for name in names:
            await raw.client.delete(join(path, name))
        with anyio.fail_after(10):
            async with leader_latch(coordinator, f"/latch-{layout}", layout=layout) as latch:
                await latch.wait()


async def test_foreign_data_in_task_nodes(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """A corrupt worker record is ignored, a corrupt leader record blocks only its task."""
    root = join(zk_chroot, "tasks")
    await raw.client.ensure_path(join(root, "workers"), mode=CreateMode.PERSISTENT)
    await raw.client.ensure_path(join(root, "leaders"), mode=CreateMode.PERSISTENT)
    await raw.client.create(join(root, "workers", "ghost"), NON_UTF8)
    await raw.client.create(join(root, "workers", "json"), b'{"id": "json", "version": 5}')
    await raw.client.create(join(root, "leaders", "blocked"), b"not json")
    me = Worker("1.0", id="me")
    with anyio.fail_after(20):
        async with unchanged(raw, zk_chroot):
            async with task_leadership(
                coordinator, "/tasks", worker=me, tasks=["free", "blocked"], settle=0.0
            ) as tl:
                async with tl.lead("free") as term:
                    assert term.worker_id == "me"
                assert sorted(tl.invalid_workers) == ["ghost", "json"]
                assert [w.id for w in await tl.workers()] == ["me"]
                assert await tl.leaders() == {"free": "me"}  # the corrupt one left out
                assert not tl.is_leader("blocked")


async def test_foreign_data_in_scheduler_nodes(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    """A corrupt result is a NodeDataError for its readers; a corrupt job fails alone."""
    sched = Scheduler(coordinator, "/jobs")
    sched.job("echo")(_echo)
    root = join(zk_chroot, "jobs")
    for kind in ("jobs", "results"):
        await raw.client.ensure_path(join(root, kind), mode=CreateMode.PERSISTENT)
    layout = JobsLayout(root)
    await raw.client.ensure_path(layout.result_bucket("corrupt"), mode=CreateMode.PERSISTENT)
    await raw.client.create(layout.result("corrupt"), NON_UTF8)
    with anyio.fail_after(20):
        async with unchanged(raw, zk_chroot):
            with pytest.raises(NodeDataError):
                await sched.result("corrupt")
            with pytest.raises(NodeDataError):
                await sched.status("corrupt")
        await raw.client.ensure_path(layout.job_bucket("foreign"), mode=CreateMode.PERSISTENT)
        await raw.client.create(layout.job("foreign"), b"{not json")
        async with sched.worker(capacity=2):
            with pytest.raises(JobFailed) as info:
                await sched.result("foreign")
            assert info.value.type == "NodeDataError"
            assert await sched.result(await sched.submit("echo", {"text": "ok"})) == "ok"


# --- servers and namespaces ----------------------------------------------------------------------


async def test_a_server_that_speaks_garbage_or_nothing() -> None:
    with GarbageListener() as garbage, SilentListener() as silent:
        for server in (garbage, silent):
            started = time.monotonic()
            with anyio.fail_after(10):
                with pytest.raises(ConnectionLostError) as info:
                    async with connect(server.connect_string, connect_timeout=1.5):
                        pytest.fail("connected to a server that is not ZooKeeper")
            assert time.monotonic() - started < 5.0
            assert str(server.port) in str(info.value)
            assert server.accepted >= 1


async def test_garbage_server_in_the_host_list_is_skipped(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with GarbageListener() as garbage:
        hosts = f"{garbage.connect_string},{zk_server.connect_string}"
        with anyio.fail_after(15):
            async with connect(hosts, namespace=zk_chroot, randomize_hosts=False) as coord:
                assert coord.connected_address == zk_server.address
                assert garbage.accepted >= 1
                async with leader_latch(coord, "/latch") as latch:
                    await latch.wait()


async def test_a_namespace_that_does_not_exist(
    zk_server: ZooKeeperServer, raw: Coordinator, zk_chroot: str
) -> None:
    """A missing namespace is created on connect, as Curator does; one that cannot be is an error."""
    ns = join(zk_chroot, "deep", "ns")
    with anyio.fail_after(15):
        assert await raw.client.exists(ns) is None
        async with connect(zk_server.connect_string, namespace=ns) as coord:
            async with leader_latch(coord, "/latch") as latch:
                await latch.wait()
        assert await raw.client.exists(ns) is not None
        async with connect(f"{zk_server.connect_string}{join(zk_chroot, 'chroot')}") as coord:
            assert await coord.client.children("/") == []
        # Under an ephemeral node no namespace can be made: a clear error, and nothing made.
        await raw.client.create(join(zk_chroot, "eph"), b"", mode=CreateMode.EPHEMERAL)
        async with unchanged(raw, zk_chroot):
            started = time.monotonic()
            with pytest.raises(NoChildrenForEphemeralsError, match="eph"):
                async with connect(
                    zk_server.connect_string,
                    namespace=join(zk_chroot, "eph", "ns"),
                    connect_timeout=5,
                ):
                    pytest.fail("a namespace under an ephemeral node")
            assert time.monotonic() - started < 2.5  # refused at once, not after connect_timeout


async def test_errors_are_coord_errors_or_programming_errors() -> None:
    """Every exception class aiocoord exports is a CoordError (or a builtin where documented)."""
    exported = [getattr(aiocoord, name) for name in aiocoord.__all__]
    errors = [e for e in exported if isinstance(e, type) and issubclass(e, BaseException)]
    assert errors and all(issubclass(e, CoordError) for e in errors)
    for e in (ConfigError, InvalidPathError):
        assert issubclass(e, ValueError)
