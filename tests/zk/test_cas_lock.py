"""The version-CAS lock and once_per: the record's decisions, then real servers.

Each scenario names what another client sees: who holds the lock, with what
token, what the record says afterwards.  Leases are short (1–3 s) so the
expiry scenarios stay quick; skews are set explicitly.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import anyio.lowlevel
import pytest

import aiocoord
from aiocoord import (
    ConfigError,
    ConnectionEvent,
    ConnectionState,
    Coordinator,
    LockLost,
    LockNotAcquired,
)
from aiocoord.errors import NodeDataError
from aiocoord.recipes.cas_lock import CasLock, cas_lock, once_per
from aiocoord.recipes.cas_lock._record import (
    FORMAT,
    LockRecord,
    RunInfo,
    Verdict,
    assess,
    decode,
    encode,
    window_start,
)
from aiocoord.testing import FaultProxy, ZooKeeperServer, expire_session
from tests.helpers import eventually, recording

LOCK = "/locks/job"


@asynccontextmanager
async def sessions(
    server: ZooKeeperServer | str, chroot: str, n: int, *, session_timeout: float = 4.0
) -> AsyncIterator[list[Coordinator]]:
    hosts = server if isinstance(server, str) else server.connect_string
    async with AsyncExitStack() as stack:
        coords = []
        for _ in range(n):
            coord = aiocoord.connect(hosts, namespace=chroot, session_timeout=session_timeout)
            coords.append(await stack.enter_async_context(coord))
        yield coords


async def record_of(coord: Coordinator, path: str = LOCK) -> LockRecord | None:
    return decode(path, (await coord.client.get(path)).data)


# --- the record and its decisions (no server) ----------------------------------------------


def held(expires: float, holder: str = "h1") -> LockRecord:
    return LockRecord(held=True, owner="pod-1", holder=holder, lease_expires=expires)


def test_decide_table() -> None:
    now, skew = 1000.0, 0.5
    assert assess(None, now=now, skew=skew, holder="me").verdict is Verdict.FREE
    assert assess(LockRecord(), now=now, skew=skew, holder="me").verdict is Verdict.FREE
    live = assess(held(now + 2), now=now, skew=skew, holder="me")
    assert live.verdict is Verdict.HELD and live.wait == pytest.approx(2.5)
    # Expired on the holder's clock, but not yet past the skew allowance: still held.
    inside = assess(held(now - 0.4), now=now, skew=skew, holder="me")
    assert inside.verdict is Verdict.HELD and inside.wait == pytest.approx(0.1)
    assert assess(held(now - 0.6), now=now, skew=skew, holder="me").verdict is Verdict.EXPIRED
    assert assess(held(now + 5, "me"), now=now, skew=skew, holder="me").verdict is Verdict.OURS
    assert assess(held(now + 5, "me"), now=now, skew=skew, holder="me").take is False


def test_decide_windows() -> None:
    run = RunInfo(window=3600.0, at=3700.0, owner="pod-2", token=7)
    done = LockRecord(last_run=run)
    assert assess(done, now=4000, skew=0, holder="me", window=3600.0).verdict is Verdict.DONE
    # A slow clock still in an earlier window never runs it again.
    assert assess(done, now=3500, skew=0, holder="me", window=0.0).verdict is Verdict.DONE
    assert assess(done, now=7300, skew=0, holder="me", window=7200.0).verdict is Verdict.FREE
    failed = LockRecord(last_run=None, last_failure=RunInfo(3600.0, 3650.0, "p", 7, "Boom"))
    assert assess(failed, now=4000, skew=0, holder="me", window=3600.0).verdict is Verdict.FREE
    assert window_start(7199.9, 3600) == 3600.0
    assert window_start(7200.0, 3600) == 7200.0


def test_record_round_trip_and_format() -> None:
    rec = held(123.5).renewed(expires=130.25, token=42)
    rec = rec.released(token=42, run=RunInfo(0.0, 125.0, "pod-1", 42))
    raw = encode(rec)
    assert json.loads(raw)["format"] == FORMAT == "aiocoord.cas-lock/1"
    assert decode("/x", raw) == rec
    assert decode("/x", b"") is None


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xfe",
        b"locked",
        b"[1, 2]",
        b'{"state": "held"}',
        b'{"format": "other-lock/1", "state": "free"}',
        b'{"format": "aiocoord.cas-lock/2", "state": "free"}',
        b'{"format": "aiocoord.cas-lock/1", "state": "maybe"}',
        b'{"format": "aiocoord.cas-lock/1", "state": "held", "owner": "x"}',
        b'{"format": "aiocoord.cas-lock/1", "state": "free", "token": "7"}',
        b'{"format": "aiocoord.cas-lock/1", "state": "free", "last_run": {"at": 1}}',
    ],
)
def test_decode_rejects_foreign_data(data: bytes) -> None:
    with pytest.raises(NodeDataError) as info:
        decode("/locks/x", data)
    assert info.value.path == "/locks/x"


def test_bad_arguments_name_the_argument() -> None:
    coord = aiocoord.connect("127.0.0.1:1")  # never entered: arguments are checked first
    for lease in (0, -1.0, math.nan, math.inf):
        with pytest.raises(ConfigError, match="lease"):
            CasLock(coord, LOCK, lease=lease)
    with pytest.raises(TypeError, match="lease"):
        CasLock(coord, LOCK, lease="60")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="skew"):
        CasLock(coord, LOCK, lease=2.0, skew=1.0)
    with pytest.raises(ConfigError, match="skew"):
        CasLock(coord, LOCK, lease=2.0, skew=-0.1)
    with pytest.raises(ConfigError, match="owner"):
        CasLock(coord, LOCK, owner="")
    with pytest.raises(aiocoord.InvalidPathError):
        CasLock(coord, "locks/job")
    with pytest.raises(TypeError, match="coord"):
        CasLock("127.0.0.1:2181", LOCK)  # type: ignore[arg-type]
    for interval in (-1, 0, math.nan):
        with pytest.raises(ConfigError, match="interval"):
            once_per(coord, LOCK, interval)
    assert CasLock(coord, LOCK, lease=10).skew == 1.0  # default: min(1 s, lease/10)
    assert CasLock(coord, LOCK, lease=2).skew == pytest.approx(0.2)


# --- real servers --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_five_contenders_exactly_one_wins(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(20):
        async with sessions(zk_server, zk_chroot, 5) as coords:
            locks = [CasLock(c, LOCK, owner=f"pod-{i}", lease=10) for i, c in enumerate(coords)]
            results: dict[int, bool] = {}
            go = anyio.Event()

            async def contend(i: int) -> None:
                await go.wait()
                results[i] = await locks[i].try_acquire()

            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(contend, i)
                await anyio.lowlevel.checkpoint()
                go.set()
            winners = [i for i, won in results.items() if won]
            assert len(winners) == 1, results
            winner = locks[winners[0]]
            assert winner.held and winner.token is not None
            status = await locks[(winners[0] + 1) % 5].status()
            assert status.held and status.owner == winner.owner and status.token == winner.token
            # The token is the mzxid of the acquiring write.
            assert (await coords[0].client.get(LOCK)).stat.mzxid == winner.token
            await winner.release()
            rec = await record_of(coords[0])
            assert rec is not None and not rec.held and rec.token == winner.token


@pytest.mark.anyio
async def test_release_hands_over_to_a_waiter_with_a_larger_token(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            first = CasLock(a, LOCK, owner="a", lease=30)
            assert await first.try_acquire()
            with pytest.raises(LockNotAcquired) as info:
                async with cas_lock(b, LOCK, owner="b", lease=30, blocking=False):
                    pytest.fail("acquired a held lock")
            assert info.value.holder == "a"
            got = anyio.Event()
            tokens: list[int | None] = []

            async def waiter() -> None:
                async with cas_lock(b, LOCK, owner="b", lease=30) as lock:
                    tokens.append(lock.token)
                    got.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(waiter)
                with anyio.move_on_after(0.5):
                    await got.wait()
                assert not got.is_set()  # waits while the lease lives
                released_at = time.monotonic()
                await first.release()
                # Woken by the data watch, long before the 30 s lease would have run out.
                with anyio.fail_after(5):
                    await got.wait()
                assert time.monotonic() - released_at < 5
            assert first.token is not None and tokens[0] is not None
            assert tokens[0] > first.token
            rec = await record_of(a)
            assert rec is not None and not rec.held and rec.owner == "b"


@pytest.mark.anyio
async def test_crashed_holder_keeps_the_lock_until_its_lease_expires(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    lease, skew = 2.0, 0.2
    with anyio.fail_after(25):
        async with sessions(zk_server, zk_chroot, 1) as (b,):
            async with aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=4
            ) as a:
                crashed = CasLock(a, LOCK, owner="crashed", lease=lease, skew=skew)
                assert await crashed.try_acquire()
            # Session closed, no release: the record still names the crashed holder.
            rec = await record_of(b)
            assert rec is not None and rec.held and rec.owner == "crashed"
            assert rec.lease_expires is not None
            taker = CasLock(b, LOCK, owner="taker", lease=lease, skew=skew)
            assert not await taker.try_acquire()
            await taker.acquire()
            now = time.time()
            # Not before the lease (plus skew) ran out, and right after it.
            assert now >= rec.lease_expires + skew
            assert now - (rec.lease_expires + skew) < 1.5
            assert crashed.token is not None and taker.token is not None
            assert taker.token > crashed.token
            assert (await taker.status()).owner == "taker"
            await taker.release()


@pytest.mark.anyio
async def test_renewal_keeps_the_lock_across_many_leases(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    lease, skew = 1.2, 0.15
    with anyio.fail_after(25):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            other = CasLock(b, LOCK, owner="other", lease=lease, skew=skew)
            async with cas_lock(a, LOCK, owner="holder", lease=lease, skew=skew) as lock:
                token = lock.token
                first = await record_of(b)
                assert first is not None and first.lease_expires is not None
                for _ in range(4):  # 4.8 s: four lease lengths
                    await anyio.sleep(lease)
                    assert lock.held
                    assert not await other.try_acquire()
                rec = await record_of(b)
                assert rec is not None and rec.held and rec.owner == "holder"
                assert rec.lease_expires is not None
                assert rec.lease_expires >= first.lease_expires + 3 * lease
                assert rec.token == token == lock.token  # renewals keep the token
            rec = await record_of(b)
            assert rec is not None and not rec.held
            assert await other.try_acquire()
            await other.release()


@pytest.mark.anyio
async def test_renewal_losing_its_cas_cancels_the_body(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    lease = 1.5
    with anyio.fail_after(20):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            forced = encode(LockRecord(held=True, owner="intruder", holder="x", lease_expires=1e10))
            cancelled = False

            async def hold() -> None:
                nonlocal cancelled
                async with cas_lock(a, LOCK, owner="holder", lease=lease, skew=0.1):
                    await b.client.set(LOCK, forced)  # a blind write by someone else
                    try:
                        await anyio.sleep_forever()
                    finally:
                        cancelled = True

            with pytest.raises(LockLost) as info:
                await hold()
            assert cancelled
            assert "CAS" in info.value.reason and info.value.path == LOCK
            # The record was not touched by the holder on its way out.
            assert (await b.client.get(LOCK)).data == forced


@pytest.mark.anyio
async def test_session_expiry_while_holding_cancels_the_body(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(25):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            inside = anyio.Event()
            cancelled_at: list[float] = []

            async def expire() -> None:
                await inside.wait()
                assert await expire_session(a)

            async def hold() -> None:
                async with cas_lock(a, LOCK, owner="holder", lease=30) as lock:
                    assert lock.held
                    inside.set()
                    try:
                        await anyio.sleep_forever()
                    finally:
                        cancelled_at.append(time.monotonic())

            async with anyio.create_task_group() as tg:
                tg.start_soon(expire)
                with pytest.raises(LockLost) as info:
                    await hold()
            assert cancelled_at
            assert info.value.reason == "session lost"
            # The lease had 30 s left; the release on the new session freed it at once.
            rec = await record_of(b)
            assert rec is not None and not rec.held
            assert await CasLock(b, LOCK, owner="next", lease=5).try_acquire()


@pytest.mark.anyio
async def test_session_loss_ends_the_hold_where_the_state_is_reported(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The one loss rule ends a CAS lock's hold in the session's state callback: a listener
    that follows the states after the hold began already sees it lost, no task later."""
    with anyio.fail_after(25):
        async with sessions(zk_server, zk_chroot, 1) as (a,):
            seen: list[tuple[ConnectionState, bool]] = []

            async def hold() -> None:
                async with cas_lock(a, LOCK, owner="holder", lease=30) as lock:

                    def on_event(event: ConnectionEvent) -> None:
                        seen.append((event.state, lock.held))

                    unfollow = a.client._session.follow_states(on_event, lambda: None)
                    try:
                        assert await expire_session(a)
                        await anyio.sleep_forever()
                    finally:
                        unfollow()

            with pytest.raises(LockLost):
                await hold()
            assert (ConnectionState.LOST, False) in seen


@pytest.mark.anyio
async def test_release_of_a_record_changed_by_someone_else_raises_and_keeps_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(15):
        async with sessions(zk_server, zk_chroot, 2) as (a, b):
            lock = CasLock(a, LOCK, owner="holder", lease=10)
            assert await lock.try_acquire()
            forced = encode(LockRecord(held=True, owner="intruder", holder="x", lease_expires=1e10))
            await b.client.set(LOCK, forced)
            with pytest.raises(LockLost):
                await lock.release()
            assert (await b.client.get(LOCK)).data == forced
            assert not lock.held
            with pytest.raises(RuntimeError, match="not held"):
                await lock.release()


@pytest.fixture
def proxy(zk_server: ZooKeeperServer) -> Iterator[FaultProxy]:
    with FaultProxy(*zk_server.address) as p:
        yield p


@pytest.mark.anyio
async def test_silenced_holder_stops_before_anyone_takes_over(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    lease, skew = 1.5, 0.3
    with anyio.fail_after(25):
        async with (
            sessions(proxy.connect_string, zk_chroot, 1, session_timeout=3) as (a,),
            sessions(zk_server, zk_chroot, 1) as (b,),
        ):
            paused_at: list[float] = []
            stopped: list[float] = []
            tokens: list[int] = []

            async def hold() -> None:
                async with cas_lock(a, LOCK, owner="holder", lease=lease, skew=skew) as lock:
                    assert lock.token is not None
                    tokens.append(lock.token)
                    proxy.pause()  # no renewal can reach the server from now on
                    paused_at.append(time.monotonic())
                    try:
                        await anyio.sleep_forever()
                    finally:
                        stopped.append(time.monotonic())

            with pytest.raises(LockLost) as info:
                await hold()
            assert "lease ran out" in info.value.reason
            # At most lease - skew after the last renewal, itself before the pause.
            assert stopped[0] - paused_at[0] <= lease - skew + 0.5
            # Only then can another client take it over.
            taker = CasLock(b, LOCK, owner="taker", lease=lease, skew=skew)
            await taker.acquire()
            assert time.monotonic() > stopped[0]
            assert taker.token is not None and taker.token > tokens[0]
            proxy.resume()


@pytest.mark.anyio
async def test_short_disconnection_does_not_cancel_the_body(
    zk_server: ZooKeeperServer, zk_chroot: str, proxy: FaultProxy
) -> None:
    with anyio.fail_after(20):
        async with sessions(proxy.connect_string, zk_chroot, 1) as (a,):
            async with recording(a) as rec, cas_lock(a, LOCK, owner="h", lease=3, skew=0.3) as lock:
                mark = rec.mark()
                proxy.cut()
                await rec.wait_for(ConnectionState.SUSPENDED, after=mark, timeout=5)
                await rec.wait_for(ConnectionState.RECONNECTED, after=mark, timeout=5)
                before = await record_of(a)
                assert before is not None and before.lease_expires is not None
                # The lease goes on being renewed after the blip: the body was never cancelled.

                async def renewed() -> bool:
                    now = await record_of(a)
                    assert now is not None and now.lease_expires is not None
                    assert before.lease_expires is not None
                    return now.lease_expires > before.lease_expires

                await eventually(renewed, timeout=5)
                assert lock.held


@pytest.mark.anyio
async def test_fencing_tokens_grow_strictly_across_holders(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 4) as coords:
            order: list[tuple[str, int]] = []
            inside = 0

            async def contender(i: int, coord: Coordinator) -> None:
                nonlocal inside
                for _ in range(5):
                    async with cas_lock(coord, LOCK, owner=f"c{i}", lease=5) as lock:
                        inside += 1
                        assert inside == 1, "two holders at once"
                        assert lock.token is not None
                        order.append((lock.owner, lock.token))
                        assert (await lock.status()).token == lock.token
                        await anyio.lowlevel.checkpoint()
                        inside -= 1

            async with anyio.create_task_group() as tg:
                for i, coord in enumerate(coords):
                    tg.start_soon(contender, i, coord)
            tokens = [t for _, t in order]
            assert len(tokens) == 20
            assert all(x < y for x, y in itertools.pairwise(tokens)), order


@pytest.mark.anyio
async def test_once_per_nine_callers_one_run_per_window(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    interval = 1.0
    with anyio.fail_after(30):
        async with sessions(zk_server, zk_chroot, 9) as coords:
            # Start just after a boundary so that three whole windows fit.
            await anyio.sleep(interval - time.time() % interval + 0.02)
            start = time.time()
            end = start + 3 * interval
            runs: dict[float, list[str]] = {}
            seen: dict[float, float] = {}  # window -> latest last_run seen by a non-runner

            async def pod(i: int, coord: Coordinator) -> None:
                rng = random.Random(i)
                while time.time() < end:
                    async with once_per(coord, "/jobs/q", interval, owner=f"p{i}", lease=5) as s:
                        window = s.window.timestamp()
                        if s.acquired:
                            runs.setdefault(window, []).append(f"p{i}")
                            await anyio.sleep(0.05)
                        elif s.last_run is not None:
                            seen[window] = max(seen.get(window, 0.0), s.last_run.timestamp())
                    await anyio.sleep(rng.uniform(0.02, 0.12))

            async with anyio.create_task_group() as tg:
                for i, coord in enumerate(coords):
                    tg.start_soon(pod, i, coord)
            assert all(len(who) == 1 for who in runs.values()), runs
            full = [window_start(start, interval) + k * interval for k in range(3)]
            for w in full:
                assert w in runs, (w, sorted(runs))
                # Each run was recorded: later callers in its window saw it as the last run.
                assert w <= seen[w] < w + interval, (w, seen.get(w))
            rec = await record_of(coords[0], "/jobs/q")
            assert rec is not None and rec.last_run is not None and not rec.held
            assert rec.last_run.window == max(runs)
            assert rec.last_run.owner == runs[max(runs)][0]
            assert rec.last_failure is None


@pytest.mark.anyio
async def test_once_per_failure_is_recorded_and_a_later_caller_retries(
    coordinator: Coordinator,
) -> None:
    interval = 1e8  # one window for the whole test
    with anyio.fail_after(15):

        async def failing() -> None:
            async with once_per(coordinator, "/jobs/q", interval, owner="first") as slot:
                assert slot.acquired and slot.last_run is None
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            await failing()
        rec = await record_of(coordinator, "/jobs/q")
        assert rec is not None and not rec.held and rec.last_run is None
        assert rec.last_failure is not None and rec.last_failure.owner == "first"
        assert rec.last_failure.error == "RuntimeError: boom"
        async with once_per(coordinator, "/jobs/q", interval, owner="second") as slot:
            assert slot.acquired
            token = slot.token
        assert slot.last_run is not None
        async with once_per(coordinator, "/jobs/q", interval, owner="third") as again:
            assert not again.acquired
            assert again.last_run == slot.last_run
            assert again.window == slot.window
        rec = await record_of(coordinator, "/jobs/q")
        assert rec is not None and rec.last_run is not None
        assert rec.last_run.owner == "second" and rec.last_run.token == token


@pytest.mark.anyio
async def test_corrupt_data_raises_node_data_error_and_is_kept(
    coordinator: Coordinator,
) -> None:
    with anyio.fail_after(15):
        for i, data in enumerate([b"1", b'{"format": "aiocoord.cas-lock/7", "state": "free"}']):
            path = f"/locks/bad{i}"
            await coordinator.client.create(path, data, make_parents=True)
            lock = CasLock(coordinator, path, lease=5)
            with pytest.raises(NodeDataError) as info:
                await lock.try_acquire()
            assert info.value.path == path
            with pytest.raises(NodeDataError):
                async with cas_lock(coordinator, path, lease=5):
                    pytest.fail("entered on a foreign record")
            with pytest.raises(NodeDataError):
                async with once_per(coordinator, path, 60):
                    pytest.fail("entered on a foreign record")
            node = await coordinator.client.get(path)
            assert node.data == data and node.stat.version == 0


@pytest.mark.anyio
async def test_empty_node_is_a_free_lock(coordinator: Coordinator) -> None:
    with anyio.fail_after(10):
        await coordinator.client.create(LOCK, b"", make_parents=True)
        async with cas_lock(coordinator, LOCK, owner="x", lease=5) as lock:
            assert repr(lock).startswith(f"<CasLock {LOCK} owner=x HELD token=0x")
        assert repr(lock) == f"<CasLock {LOCK} owner=x FREE token=0x{lock.token:x}>"


def test_lock_benchmark_smoke(zk_server: ZooKeeperServer) -> None:
    """benchmarks.lock runs end to end (tiny parameters) and prints its table."""
    from benchmarks import lock as bench

    results = bench.run(zk_server.connect_string, seconds=0.3, rounds=2, contenders=2, uvloop=False)
    assert set(results) == {"cas_lock", "CasLock", "kazoo Lock", "aiozk Lock"}
    for runs in results.values():
        assert len(runs) == 2 and all(len(counts) == 2 and sum(counts) > 0 for counts in runs)
    table = bench.report(results, 0.3)
    assert "vs kazoo" in table and "aiozk Lock" in table
