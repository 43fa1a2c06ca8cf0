"""The blocking façade on real servers: threads contending, losses signalled, refusals, closing.

Plain (synchronous) tests: the threads are the callers, as in a Flask or Celery
process.  Every wait is bounded (``Event.wait(timeout)``, ``join(timeout)``,
the façade's own ``timeout=``) under the plugin's 120 s ceiling.
"""

from __future__ import annotations

import _thread
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pytest

from aiocoord import (
    BlockingInEventLoopError,
    ConfigError,
    CoordinatorClosedError,
    InvalidPathError,
    JobCancelled,
    JobStatus,
    LeadershipLost,
    LockLost,
    LockNotAcquired,
    ServiceInstance,
    blocking,
)
from aiocoord.testing import ZooKeeperServer, expire_session

pytestmark = pytest.mark.timeout(90)

BOUND = 20.0  # seconds any one wait of these tests may take on a loaded machine


def _loop_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "aiocoord-blocking"}


@pytest.fixture
def connect(zk_server: ZooKeeperServer, zk_chroot: str) -> Iterator[Callable[..., Any]]:
    """Open blocking coordinators on the test server under the test's chroot; closes them all."""
    opened: list[blocking.BlockingCoordinator] = []

    def open_one(**settings: Any) -> blocking.BlockingCoordinator:
        settings.setdefault("session_timeout", 4.0)
        coord = blocking.connect(zk_server.connect_string, namespace=zk_chroot, **settings)
        opened.append(coord)
        return coord

    yield open_one
    for coord in opened:
        coord.close()


@pytest.fixture
def coord(connect: Callable[..., blocking.BlockingCoordinator]) -> blocking.BlockingCoordinator:
    return connect()


def _in_threads(n: int, work: Callable[[int], None]) -> None:
    """Run ``work(i)`` in `n` threads at once; re-raise the first failure."""
    with ThreadPoolExecutor(n) as pool:
        for future in [pool.submit(work, i) for i in range(n)]:
            future.result(timeout=BOUND * 3)


# --- locks ----------------------------------------------------------------------------------


def test_eight_threads_on_one_mutex_never_hold_it_together(
    coord: blocking.BlockingCoordinator,
) -> None:
    lock = coord.mutex("/locks/ledger", participant_id="web-1")
    guard = threading.Lock()
    inside: list[int] = []
    tokens: list[int] = []
    most = 0

    def work(i: int) -> None:
        nonlocal most
        for _ in range(4):
            with lock as held:
                with guard:
                    inside.append(i)
                    most = max(most, len(inside))
                    assert held.token is not None
                    tokens.append(held.token)
                held.check()
                time.sleep(0.002)  # hold it across a switch of threads
                with guard:
                    inside.remove(i)

    _in_threads(8, work)
    assert most == 1
    assert len(tokens) == 32 and tokens == sorted(tokens)  # each later holder's token is larger
    assert lock.participants() == []


def test_a_thread_asking_again_for_its_own_lock_is_refused(
    coord: blocking.BlockingCoordinator,
) -> None:
    lock = coord.mutex("/locks/again")
    with lock, pytest.raises(RuntimeError, match="wait for itself"):
        coord.mutex("/locks/again").acquire()
    rw = coord.read_write_lock("/locks/rw")
    with rw.read(), pytest.raises(RuntimeError, match="wait for itself"):
        rw.write().acquire()
    # Released, it may be taken again; another thread is not refused.
    with lock:
        other = threading.Thread(target=lambda: lock.acquire().release())  # waits: we hold it
        other.start()
        other.join(0.2)
        assert other.is_alive()
    other.join(BOUND)
    assert not other.is_alive()


def test_a_right_may_be_released_by_another_thread(coord: blocking.BlockingCoordinator) -> None:
    lock = coord.mutex("/locks/handed")
    held = lock.acquire()
    releaser = threading.Thread(target=held.release)
    releaser.start()
    releaser.join(BOUND)
    assert not held.lost.is_set()  # given up, not lost
    with pytest.raises(RuntimeError, match="already released"):
        held.release()
    with lock.acquire() as again:  # free again; a Held is a context manager of its own
        again.check()
    with pytest.raises(RuntimeError, match="did not enter"):
        lock.__exit__(None, None, None)


def test_an_interrupted_wait_withdraws(coord: blocking.BlockingCoordinator) -> None:
    """Ctrl-C (KeyboardInterrupt) while a thread waits for a lock leaves no waiter behind."""
    assert threading.current_thread() is threading.main_thread()
    lock = coord.mutex("/locks/interrupted")
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            holding.set()
            release.wait(BOUND)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(BOUND)
    with coord.tree_cache("/locks") as queue:

        def interrupt_once_queued() -> None:
            queue.wait_for(lambda nodes: len(_queue(nodes)) == 2, timeout=BOUND)
            _thread.interrupt_main()

        interrupter = threading.Thread(target=interrupt_once_queued)
        interrupter.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            lock.acquire()  # waits behind the holder until interrupted
        interrupter.join(BOUND)
        # At once, not when the holder lets go (after BOUND): a wait in the main thread
        # lets a pending Ctrl-C through.
        assert time.monotonic() - start < BOUND / 2
        # The interrupted acquisition withdrew: only the holder's node is left.
        queue.wait_for(lambda nodes: len(_queue(nodes)) == 1, timeout=BOUND)
    release.set()
    holder.join(BOUND)
    with coord.mutex("/locks/interrupted", timeout=BOUND):  # free: nobody took it for nothing
        pass


def _queue(nodes: dict[str, Any]) -> list[str]:
    return [p for p in nodes if p.startswith("/locks/interrupted/")]


def test_mutex_timeout_raises_lock_not_acquired(coord: blocking.BlockingCoordinator) -> None:
    with coord.mutex("/locks/t"):
        seen: list[BaseException] = []

        def contend() -> None:
            try:
                coord.mutex("/locks/t", timeout=0.3).acquire()
            except BaseException as exc:
                seen.append(exc)

        thread = threading.Thread(target=contend)
        thread.start()
        thread.join(BOUND)
        assert [type(e) for e in seen] == [LockNotAcquired]


def test_semaphore_never_more_than_max_leases(coord: blocking.BlockingCoordinator) -> None:
    sem = coord.semaphore("/sem/db", max_leases=3)
    guard = threading.Lock()
    inside = 0
    most = 0

    def work(i: int) -> None:
        nonlocal inside, most
        for _ in range(3):
            with sem as held:
                assert held.token is not None
                with guard:
                    inside += 1
                    most = max(most, inside)
                time.sleep(0.01)
                with guard:
                    inside -= 1

    _in_threads(8, work)
    assert 1 <= most <= 3
    assert sem.participants() == []


def test_read_write_lock_readers_share_writers_do_not(
    coord: blocking.BlockingCoordinator,
) -> None:
    rw = coord.read_write_lock("/locks/catalog")
    both_read = threading.Barrier(2, timeout=BOUND)

    def reader(i: int) -> None:
        with rw.read():
            both_read.wait()  # two readers at once: a barrier only both can pass

    _in_threads(2, reader)
    with rw.write() as held:
        assert held.token is not None
        blocked = threading.Event()

        def late_reader() -> None:
            with rw.read():
                blocked.set()

        thread = threading.Thread(target=late_reader)
        thread.start()
        assert not blocked.wait(0.3)  # a reader waits while the writer holds
    assert blocked.wait(BOUND)
    thread.join(BOUND)


def test_a_lost_session_sets_lost_and_check_raises(
    coord: blocking.BlockingCoordinator,
) -> None:
    def body() -> None:
        with coord.mutex("/locks/expiring") as held:
            assert not held.lost.is_set()
            held.check()
            start = time.monotonic()
            assert anyio.run(expire_session, coord)
            assert held.lost.wait(BOUND)  # the thread learns of it by itself
            assert time.monotonic() - start < BOUND
            assert held.reason in ("suspended", "session lost")
            with pytest.raises(LockLost):
                held.check()

    with pytest.raises(LockLost, match="lost"):
        body()  # and leaving the block raises it, as the async block does
    # The coordinator made a new session by itself and the lock can be taken again.
    coord.wait_connected(timeout=BOUND)
    with coord.mutex("/locks/expiring", timeout=BOUND) as again:
        again.check()

    def failing_body() -> None:
        with coord.mutex("/locks/expiring", timeout=BOUND) as held:
            assert anyio.run(expire_session, coord)
            assert held.lost.wait(BOUND)
            raise ValueError("the body's own error")

    coord.wait_connected(timeout=BOUND)
    with pytest.raises(ValueError, match="own error"):
        failing_body()  # the body's exception wins over the loss, as in the async API


# --- the CAS lock and once_per --------------------------------------------------------------


def test_cas_lock_and_once_per_from_threads(coord: blocking.BlockingCoordinator) -> None:
    with coord.cas_lock("/locks/revenue", owner="web-1", lease=10.0) as held:
        assert held.token is not None
        with pytest.raises(LockNotAcquired):
            coord.cas_lock("/locks/revenue", owner="web-2", blocking=False).acquire()

    runs: list[int] = []
    slots = coord.once_per("/jobs/report", interval=3600)

    def work(i: int) -> None:
        with slots as slot:
            if slot.acquired:
                slot.check()
                runs.append(i)

    _in_threads(4, work)
    assert len(runs) == 1  # one caller per window across the fleet
    with slots as slot:
        assert not slot.acquired and slot.last_run is not None


def test_once_per_body_error_is_recorded_and_raised_unchanged(
    coord: blocking.BlockingCoordinator,
) -> None:
    slots = coord.once_per("/jobs/flaky", interval=3600)
    error = ValueError("boom")

    def body() -> None:
        with slots as slot:
            assert slot.acquired
            raise error

    with pytest.raises(ValueError, match="boom") as caught:
        body()
    assert caught.value is error
    assert caught.value.__traceback__ is not None
    # The loop's frames it went through are gone: the traceback is the body's own.
    assert not any("aiocoord/blocking" in str(entry.path) for entry in caught.traceback)
    with slots as slot:
        assert slot.acquired  # a failure does not close the window


# --- leadership ---------------------------------------------------------------------------


def test_leadership_from_threads(connect: Callable[..., blocking.BlockingCoordinator]) -> None:
    a, b = connect(), connect()
    with a.leader_latch("/app/leader", participant_id="a") as first:
        assert first.wait(timeout=BOUND)
        assert first.has_leadership
        with b.leader_latch("/app/leader", participant_id="b") as second:
            assert not second.has_leadership
            with pytest.raises(TimeoutError), second.leadership(timeout=0.3):
                pass
            assert [p.id for p in second.participants()] == ["a", "b"]
            with first.leadership(timeout=0) as term:
                first_token = term.token
                term.check()
            entered = threading.Event()
            tokens: list[int | None] = []

            def follow() -> None:
                with second.leadership(timeout=BOUND) as term:
                    tokens.append(term.token)
                    entered.set()

            thread = threading.Thread(target=follow)
            thread.start()
            assert not entered.wait(0.2)
            first.close()  # a leaves the election: b leads
            assert entered.wait(BOUND)
            thread.join(BOUND)
            assert tokens[0] is not None and tokens[0] > (first_token or 0)


def test_leadership_lost_on_expiry_is_signalled(coord: blocking.BlockingCoordinator) -> None:
    with coord.leader_latch("/app/lead") as latch:

        def body() -> None:
            with latch.leadership(timeout=BOUND) as term:
                assert anyio.run(expire_session, coord)
                assert term.lost.wait(BOUND)
                with pytest.raises(LeadershipLost):
                    term.check()

        with pytest.raises(LeadershipLost):
            body()


# --- caches and membership ------------------------------------------------------------------


def test_caches_serve_reads_to_threads(coord: blocking.BlockingCoordinator) -> None:
    client = coord.coordinator.client
    coord.run(client.create, "/config", b"")
    coord.run(client.create, "/config/flags", b"v1")
    with coord.node_cache("/config/flags") as node, coord.tree_cache("/config") as tree:
        current = node.current
        assert current is not None and current.data == b"v1"
        assert tree.children("/config") == ["flags"]
        assert set(tree.nodes()) == {"/config", "/config/flags"}
        coord.run(client.set, "/config/flags", b"v2")
        seen = node.wait_for_node(lambda n: n is not None and n.data == b"v2", timeout=BOUND)
        assert seen is not None and seen.data == b"v2"
        coord.run(client.create, "/config/extra", b"x")
        tree.wait_for(lambda nodes: "/config/extra" in nodes, timeout=BOUND)
        got = tree.get("/config/extra")
        assert got is not None and got.data == b"x"
        with pytest.raises(TimeoutError):
            tree.wait_for(lambda nodes: "/config/never" in nodes, timeout=0.2)


def test_persistent_node_and_discovery(coord: blocking.BlockingCoordinator) -> None:
    client = coord.coordinator.client
    with coord.persistent_node("/registry/web-1", data=b"up") as node:
        assert node.present
        assert coord.run(client.get, "/registry/web-1").data == b"up"
        node.set_data(b"busy")
        assert coord.run(client.get, "/registry/web-1").data == b"busy"
    assert coord.run(client.exists, "/registry/web-1") is None
    with coord.service_discovery("/services", watch=False) as sd:
        me = sd.register(ServiceInstance(name="api", id="i-1", address="10.0.0.5", port=8080))
        assert [i.id for i in sd.instances("api")] == ["i-1"]
        assert sd.names() == ["api"]
        sd.unregister(me)
        assert sd.instances("api") == []


# --- the scheduler --------------------------------------------------------------------------


def test_scheduler_submit_and_result_against_a_worker(
    connect: Callable[..., blocking.BlockingCoordinator],
) -> None:
    before = set(threading.enumerate())
    workers, clients = connect(), connect()
    ran_in: list[str] = []
    served = workers.scheduler("/app/jobs")

    @served.job("sum")
    async def add(a: int, b: int) -> int:
        return a + b

    @served.job("upper")
    def upper(text: str) -> str:  # a plain function: run in a worker thread
        ran_in.append(threading.current_thread().name)
        return text.upper()

    sched = clients.scheduler("/app/jobs")

    # The client registers the same names for validation only: these never run here.
    @sched.job("sum")
    async def add_hints(a: int, b: int) -> int:
        raise NotImplementedError

    @sched.job("upper")
    def upper_hints(text: str) -> str:
        raise NotImplementedError

    with pytest.raises(ValueError, match="payload"):
        sched.submit("sum", {"a": "not a number", "b": 2})
    with served.worker(capacity=4):
        ids = [sched.submit("sum", {"a": i, "b": 1}) for i in range(5)]
        assert [sched.result(job_id, timeout=BOUND) for job_id in ids] == [1, 2, 3, 4, 5]
        assert sched.status(ids[0]) is JobStatus.DONE
        text = sched.submit("upper", {"text": "hi"})
        assert sched.result(text, timeout=BOUND) == "HI"
        assert ran_in and ran_in[0] != "aiocoord-blocking"
        later = sched.submit("sum", {"a": 1, "b": 1}, delay=3600)
        assert sched.status(later) is JobStatus.SCHEDULED
        assert sched.cancel(later) is JobStatus.CANCELLED
        with pytest.raises(JobCancelled):
            sched.result(later, timeout=BOUND)
        with pytest.raises(TimeoutError):
            sched.result(sched.submit("sum", {"a": 0, "b": 0}, delay=3600), timeout=0.2)
    workers.close()
    clients.close()
    # Closing joined the loop threads and the worker thread the plain function ran in.
    assert set(threading.enumerate()) - before == set()


# --- refusals, bad arguments, closing -------------------------------------------------------


def test_every_entry_point_refuses_a_running_event_loop(
    coord: blocking.BlockingCoordinator, zk_server: ZooKeeperServer
) -> None:
    lock = coord.mutex("/locks/refuse")
    latch = coord.leader_latch("/app/refuse")
    sched = coord.scheduler("/app/refuse-jobs")
    calls: list[Callable[[], object]] = [
        lambda: blocking.connect(zk_server.connect_string),
        lambda: coord.mutex("/locks/x"),
        lock.acquire,
        lock.__enter__,
        latch.start,
        lambda: latch.wait(1),
        lambda: sched.submit("x"),
        lambda: coord.wait_connected(timeout=1),
        coord.close,
    ]
    threads_before = set(threading.enumerate())

    refused: list[BaseException] = []

    async def from_async_code() -> None:
        for call in calls:
            try:
                call()
            except BlockingInEventLoopError as exc:
                refused.append(exc)

    caller = threading.Thread(target=anyio.run, args=(from_async_code,))
    caller.start()
    caller.join(BOUND)  # at once, in fact: never a deadlock
    assert not caller.is_alive()
    assert len(refused) == len(calls)
    assert "async API" in str(refused[0]) and isinstance(refused[0], RuntimeError)
    assert set(threading.enumerate()) - threads_before == set()  # connect() started no thread

    # From the façade's own loop thread, too (a callback that calls back in).
    async def from_the_loop() -> None:
        coord.mutex("/locks/y").acquire()

    with pytest.raises(BlockingInEventLoopError):
        coord.run(from_the_loop)
    held = lock.acquire()  # in this thread; given back from async code: refused too

    async def release_from_async_code() -> None:
        with pytest.raises(BlockingInEventLoopError):
            held.release()

    anyio.run(release_from_async_code)
    held.release()
    assert not coord.closed


def test_bad_arguments_fail_at_the_call_by_name(
    coord: blocking.BlockingCoordinator, zk_server: ZooKeeperServer
) -> None:
    before = _loop_threads()
    with pytest.raises(ConfigError, match="session_timeout"):
        blocking.connect(zk_server.connect_string, session_timeout=-1)
    with pytest.raises(ValueError, match="loop"):
        blocking.connect(zk_server.connect_string, loop="trio")  # type: ignore[arg-type]
    assert _loop_threads() == before
    with pytest.raises(InvalidPathError):
        coord.mutex("relative")
    with pytest.raises(ConfigError, match="max_leases"):
        coord.semaphore("/s", max_leases=0)
    with pytest.raises(ConfigError, match="lease"):
        coord.cas_lock("/c", lease=-1)
    with pytest.raises(ConfigError, match="timeout"):
        coord.leader_latch("/l").leadership(timeout=-1)
    with pytest.raises(TypeError, match="timeout"):
        coord.wait_connected(timeout="1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="timeout"):
        coord.scheduler("/j").result("id", timeout="soon")  # type: ignore[arg-type]


def test_close_gives_up_rights_and_leaves_no_thread(
    connect: Callable[..., blocking.BlockingCoordinator],
) -> None:
    before = set(threading.enumerate())
    coord = connect(loop="uvloop")
    (loop_thread,) = _loop_threads() - before
    assert loop_thread is coord.loop_thread
    other = connect()
    holding = threading.Event()
    leave = threading.Event()
    outcome: list[BaseException | None] = []
    waiter_outcome: list[BaseException] = []

    def hold() -> None:
        try:
            with coord.mutex("/locks/closing") as held:
                holding.set()
                assert held.lost.wait(BOUND)
                leave.wait(BOUND)
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    def wait_for_it() -> None:
        try:
            coord.mutex("/locks/closing").acquire()
        except BaseException as exc:
            waiter_outcome.append(exc)

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(BOUND)
    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    latch = coord.leader_latch("/app/closing")
    latch.start()
    cache = coord.tree_cache("/")
    cache.start()
    coord.close()
    leave.set()
    holder.join(BOUND)
    waiter.join(BOUND)
    assert [type(e) for e in outcome] == [LockLost]
    assert [type(e) for e in waiter_outcome] == [CoordinatorClosedError]
    assert not loop_thread.is_alive()
    assert coord.closed
    with pytest.raises(CoordinatorClosedError):
        coord.mutex("/locks/closing")
    coord.close()  # twice is fine
    # The session closed on the server: its lock node went with it.
    assert other.mutex("/locks/closing").participants() == []
    other.close()
    # No thread started since is left (threads of earlier tests may have ended meanwhile).
    assert set(threading.enumerate()) - before == set()
