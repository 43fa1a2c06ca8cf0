"""The leader selector (run, give back, requeue) and the latch's Curator-parity API, on a real server."""

from __future__ import annotations

import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, Coordinator, LeadershipTerm
from aiocoord.recipes.leader_latch import (
    ElectionEvent,
    ElectionState,
    LeaderLatch,
    LeaderSelector,
    leader_latch,
    leader_selector,
)
from aiocoord.recipes.leader_latch._election import CURATOR, SELECTOR
from aiocoord.recipes.leader_latch._nodes import SharedPath
from aiocoord.testing import ZooKeeperServer, expire_session
from aiocoord.zk import CreateMode
from tests.helpers import eventually

E = ElectionState
pytestmark = pytest.mark.anyio


@asynccontextmanager
async def coordinators(
    server: ZooKeeperServer, n: int, chroot: str
) -> AsyncIterator[list[Coordinator]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                aiocoord.connect(server.connect_string, namespace=chroot, session_timeout=4.0)
            )
            for _ in range(n)
        ]


async def events_until_stopped(
    latch: LeaderLatch,
    out: list[ElectionEvent],
    seen: dict[ElectionState, anyio.Event] | None = None,
) -> None:
    async for event in latch.changes():
        out.append(event)
        if seen is not None and event.state in seen:
            seen[event.state].set()


# --- the selector ----------------------------------------------------------------------------


async def test_run_return_requeue_order_across_three_participants(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    runs: list[tuple[str, int]] = []
    all_joined = anyio.Event()
    six = anyio.Event()

    def lead_as(name: str) -> Callable[[LeadershipTerm], Awaitable[None]]:
        async def lead(term: LeadershipTerm) -> None:
            await all_joined.wait()  # the first leader holds on until every participant queued
            runs.append((name, term.token))
            if len(runs) >= 6:
                six.set()
                await anyio.sleep_forever()  # keep the rest from running while the test ends

        return lead

    with anyio.fail_after(30):
        async with coordinators(zk_server, 3, zk_chroot) as coords, AsyncExitStack() as stack:
            selectors = [
                await stack.enter_async_context(
                    leader_selector(coords[i], "/sel", lead_as(f"p{i}"), participant_id=f"p{i}")
                )
                for i in range(3)
            ]

            async def queued() -> bool:  # entering does not wait for the node to be made
                return len(await selectors[0].latch.participants()) == 3

            await eventually(queued, timeout=10)
            all_joined.set()
            await six.wait()
    # Queue order on the first round; then each requeued at the back leads once more (its
    # new node may come after a faster neighbour's, both made after the round began).
    names = [name for name, _ in runs[:6]]
    assert names[:3] == ["p0", "p1", "p2"] and sorted(names[3:]) == ["p0", "p1", "p2"]
    tokens = [token for _, token in runs[:6]]
    assert tokens == sorted(tokens) and len(set(tokens)) == 6  # a new node for each term


async def test_leaving_waits_for_lead_to_unwind_before_the_next_leads(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Curator's selector gives its node back only once `takeLeadership` has returned:
    a `lead` still cleaning up when its selector leaves never overlaps the next one."""
    timeline: list[str] = []
    leading = anyio.Event()

    async def slow_to_stop(term: LeadershipTerm) -> None:
        timeline.append("a leads")
        leading.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.5)  # cleanup that still acts as the leader
            timeline.append("a stopped")

    async def next_lead(term: LeadershipTerm) -> None:
        timeline.append("b leads")
        await anyio.sleep_forever()

    with anyio.fail_after(20):
        async with coordinators(zk_server, 2, zk_chroot) as coords:
            a = leader_selector(coords[0], "/leave", slow_to_stop, participant_id="a")
            await a.start()
            await leading.wait()
            async with leader_selector(coords[1], "/leave", next_lead, participant_id="b"):
                await a.aclose()
                await eventually(_led_by_b(timeline), timeout=10)
    assert timeline == ["a leads", "a stopped", "b leads"]


async def test_the_class_is_public_and_used_as_the_other_recipes(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """`aiocoord.LeaderSelector` is what `leader_selector()` returns: ``async with`` it, or
    `start()` ... `aclose()`, as `LeaderLatch` and `Mutex`."""
    led: list[int] = []
    leading = [anyio.Event(), anyio.Event()]

    async def lead(term: LeadershipTerm) -> None:
        led.append(term.token)
        leading[len(led) - 1].set()
        await anyio.sleep_forever()

    assert aiocoord.LeaderSelector is LeaderSelector
    assert "LeaderSelector" in aiocoord.__all__
    with anyio.fail_after(20):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            assert isinstance(leader_selector(coord, "/cls", lead), aiocoord.LeaderSelector)
            async with aiocoord.LeaderSelector(coord, "/cls", lead, participant_id="a") as sel:
                await leading[0].wait()
                assert sel.has_leadership
            assert not sel.has_leadership
            sel = aiocoord.LeaderSelector(coord, "/cls", lead, participant_id="b")
            await sel.start()
            await leading[1].wait()
            await sel.aclose()
            assert await coord.client.children("/cls") == []
    assert led[0] < led[1]


def _led_by_b(timeline: list[str]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return "b leads" in timeline

    return check


async def test_without_requeue_it_leads_once_until_asked(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    runs: list[int] = []
    ran = anyio.Event()

    async def lead(term: LeadershipTerm) -> None:
        runs.append(term.token)
        ran.set()

    with anyio.fail_after(20):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            async with leader_selector(coord, "/once", lead, requeue=False) as selector:
                await ran.wait()
                await anyio.sleep(0.3)  # room for a wrong second run
                assert runs == [runs[0]] and selector.latch.node is None
                assert await selector.latch.participants() == []
                ran = anyio.Event()
                selector.requeue()
                await ran.wait()
                assert len(runs) == 2 and runs[1] > runs[0]


async def test_session_loss_cancels_lead_and_raises_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    started: list[int] = []
    cancelled: list[int] = []
    running = anyio.Event()

    async def lead(term: LeadershipTerm) -> None:
        started.append(term.token)
        running.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(term.token)
            raise

    with anyio.fail_after(30):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            async with leader_selector(coord, "/lost", lead) as selector:
                await running.wait()
                running = anyio.Event()
                await expire_session(coord)
                await running.wait()  # led again on the new session
                assert cancelled == started[:1] and len(started) == 2
                assert started[1] > started[0]
                assert (selector.losses, selector.failures, selector.runs) == (1, 0, 2)
            # Leaving cancelled the second run; the exit raised nothing.
            assert cancelled == started


async def test_error_is_counted_and_requeues_after_a_backoff(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    times: list[float] = []
    failing = anyio.Event()
    again = anyio.Event()

    async def lead(term: LeadershipTerm) -> None:
        times.append(time.monotonic())
        if len(times) == 1:
            failing.set()
            raise ValueError("boom")
        again.set()

    with anyio.fail_after(20):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            selector = LeaderSelector(coord, "/err", lead, backoff=0.5, requeue=True)
            async with selector:
                await failing.wait()

                async def given_back() -> bool:
                    return await selector.latch.participants() == []

                await eventually(given_back)  # the node goes during the backoff
                await again.wait()
                assert isinstance(selector.last_error, ValueError)
                assert selector.failures == 1
    assert times[1] - times[0] >= 0.5


async def test_on_error_raise_ends_the_selector_and_its_exit_raises(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async def lead(term: LeadershipTerm) -> None:
        raise ValueError("boom")

    events: list[ElectionEvent] = []
    with anyio.fail_after(20):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            with pytest.raises(ValueError, match="boom"):
                async with leader_selector(coord, "/raise", lead, on_error="raise") as selector:
                    await events_until_stopped(selector.latch, events)
            assert await selector.latch.participants() == []
    assert events[-1].state is E.STOPPED and selector.failures == 1


def test_bad_arguments_are_refused_clearly() -> None:
    coord = aiocoord.connect("127.0.0.1:1")

    async def lead(term: LeadershipTerm) -> None:
        pass

    def sync_lead(term: LeadershipTerm) -> None:
        pass

    with pytest.raises(TypeError, match="lead must be an async function"):
        LeaderSelector(coord, "/x", sync_lead)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as info:
        LeaderSelector(coord, "/x", lead, on_error="ignore")  # type: ignore[arg-type]
    assert info.value.field == "on_error"
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ConfigError) as info:
            LeaderSelector(coord, "/x", lead, backoff=bad)
        assert info.value.field == "backoff"
    with pytest.raises(TypeError, match="backoff"):
        LeaderSelector(coord, "/x", lead, backoff="1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_backoff"):
        LeaderSelector(coord, "/x", lead, backoff=5.0, max_backoff=1.0)
    with pytest.raises(ConfigError) as info:
        LeaderLatch(coord, "/x", close_mode="loud")  # type: ignore[arg-type]
    assert info.value.field == "close_mode"
    with pytest.raises(ConfigError, match="'curator' or 'latch' or 'zookeeper'") as info:
        LeaderSelector(coord, "/x", lead, layout="lock")
    assert info.value.field == "layout"
    with pytest.raises(
        ConfigError, match="'curator' or 'zookeeper' or 'kazoo', not 'latch'"
    ) as info:
        LeaderLatch(coord, "/x", layout="latch")
    assert info.value.field == "layout"


# --- the selector's layout: Curator LeaderSelector's, the mutex's nodes ------------------------

LOCK_NODE = re.compile(
    r"_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}"
)


def held(running: list[str], name: str) -> Callable[[LeadershipTerm], Awaitable[None]]:
    """A `lead` that holds its term until cancelled, listed in `running` meanwhile."""

    async def lead(term: LeadershipTerm) -> None:
        running.append(name)
        try:
            await anyio.sleep_forever()
        finally:
            running.remove(name)

    return lead


async def test_the_selector_is_on_the_mutexs_nodes_apart_from_the_latches(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Curator's LeaderSelector is an InterProcessMutex at the path: ``_c_<uuid>-lock-<seq>``
    nodes, the id as data.  A mutex there holds the election; a latch there is another one
    (Curator's LeaderLatch and LeaderSelector do not share a path, nor do ours): each sorts
    its own nodes ahead of the other's, and both lead."""
    running: list[str] = []
    path = "/layout"
    with anyio.fail_after(30):
        async with coordinators(zk_server, 2, zk_chroot) as (c1, c2):
            lock = aiocoord.Mutex(c1, path, participant_id="mutex")
            assert await lock.acquire(timeout=10)
            async with leader_selector(c2, path, held(running, "sel"), participant_id="sel") as sel:
                await eventually(lambda: _queued(c1, path, 2))
                await anyio.sleep(0.3)
                assert running == []  # the mutex's holder leads the selector's election
                names = await c1.client.children(path)
                assert all(LOCK_NODE.fullmatch(n) for n in names), names
                assert [p.id for p in await sel.latch.participants()] == ["mutex", "sel"]
                await lock.release()
                await eventually(lambda: _true(running == ["sel"]))
                async with leader_latch(c1, path, participant_id="latch") as latch:
                    assert await latch.wait(timeout=10)
                    assert running == ["sel"] and sel.has_leadership
                    # Each lists every node of the path (as Curator does), its own first.
                    mine = [(p.id, p.is_leader) for p in await latch.participants()]
                    theirs = [(p.id, p.is_leader) for p in await sel.latch.participants()]
                    assert mine == [("latch", True), ("sel", False)]
                    assert theirs == [("sel", True), ("latch", False)]


async def test_a_selector_on_the_latch_layout_shares_the_latches_election(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """``layout="latch"``: one election with the latches (the scheduler's assigner, the
    FastAPI lifespan's leader tasks beside its plain latches)."""
    running: list[str] = []
    path = "/shared-election"
    with anyio.fail_after(30):
        async with coordinators(zk_server, 2, zk_chroot) as (c1, c2):
            async with leader_latch(c1, path, participant_id="latch") as latch:
                assert await latch.wait(timeout=10)
                async with leader_selector(
                    c2, path, held(running, "sel"), participant_id="sel", layout="latch"
                ) as sel:
                    ids = [p.id for p in await sel.latch.participants()]
                    assert ids == ["latch", "sel"]
                    await anyio.sleep(0.3)
                    assert running == [] and not sel.has_leadership
                    assert await latch.step_down()
                    await eventually(lambda: _true(running == ["sel"]))
                    assert not latch.has_leadership
                    assert all("-latch-" in n for n in await c1.client.children(path))


async def test_one_sessions_shared_listing_is_sorted_for_each_layout(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The latches and selectors of one session on one path share a listing; each must
    get it in its own layout's order (a selector given the latches' order waits behind
    a node that is not ahead of it in its election, or leads before one that is)."""
    path = "/listing"
    async with coordinators(zk_server, 1, zk_chroot) as (coord,):
        client = coord.client
        await client.ensure_path(path)
        # In creation (sequence) order: the mutex's order; by name (no "latch-"): a, b.
        for uid in ("bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb", "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"):
            await client.create(
                f"{path}/_c_{uid}-lock-", b"x", mode=CreateMode.EPHEMERAL_SEQUENTIAL
            )
        names = await client.children(path)
        assert SELECTOR.sort(names) != CURATOR.sort(names)
        shared = SharedPath.acquire(client, path)
        got: dict[str, list[str]] = {}

        async def order(key: str, layout: object) -> None:
            got[key] = (await shared.ordered(layout)).names  # type: ignore[arg-type]

        try:
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    # The first lists; the next two gather for the following listing.
                    tg.start_soon(order, "first", SELECTOR)
                    tg.start_soon(order, "latch", CURATOR)
                    tg.start_soon(order, "selector", SELECTOR)
        finally:
            shared.release()
        assert got["latch"] == CURATOR.sort(names)
        assert got["selector"] == got["first"] == SELECTOR.sort(names)


async def test_inspect_shows_a_selectors_election_as_the_mutex_it_is(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """``aiocoord inspect`` and the dashboard knew a selector by its ``-latch-`` nodes; its
    nodes are the mutex's now: it is shown as a mutex whose holder is the leader."""
    from aiocoord.inspection import inspect_path

    running: list[str] = []
    path = "/inspected"
    with anyio.fail_after(30):
        async with (
            coordinators(zk_server, 2, zk_chroot) as (c1, c2),
            leader_selector(c1, path, held(running, "a"), participant_id="a"),
            leader_selector(c2, path, held(running, "b"), participant_id="b"),
        ):
            await eventually(lambda: _queued(c1, path, 2))
            await eventually(lambda: _true(len(running) == 1))
            info = await inspect_path(c1, path)
            assert (info["kind"], info["holder"]) == ("mutex", running[0])
            assert sorted(c["id"] for c in info["contenders"]) == ["a", "b"]


async def _queued(coord: Coordinator, path: str, n: int) -> bool:
    try:
        return len(await coord.client.children(path)) == n
    except aiocoord.NoNodeError:
        return False


async def _true(value: bool) -> bool:
    return value


# --- the latch's Curator-parity API ----------------------------------------------------------


async def test_wait_with_timeout_is_true_or_false(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with coordinators(zk_server, 2, zk_chroot) as coords:
            async with leader_latch(coords[0], "/w", participant_id="a") as a:
                assert isinstance(await a.wait(), aiocoord.LeadershipTerm)
                assert await a.wait(0) is True
                async with leader_latch(coords[1], "/w", participant_id="b") as b:
                    before = time.monotonic()
                    assert await b.wait(0.3) is False
                    # (uvloop's timers may fire a fraction of a millisecond early)
                    assert time.monotonic() - before >= 0.299
                    for bad in (-1, math.nan):
                        with pytest.raises(ConfigError):
                            await b.wait(bad)
                    await a.aclose()
                    assert await b.wait(10) is True and b.has_leadership


@pytest.mark.parametrize("mode", ["notify", "silent"])
async def test_close_modes(zk_server: ZooKeeperServer, zk_chroot: str, mode: str) -> None:
    events: list[ElectionEvent] = []
    with anyio.fail_after(20):
        async with coordinators(zk_server, 1, zk_chroot) as (coord,):
            async with anyio.create_task_group() as tg:
                latch = leader_latch(coord, "/cm", close_mode=mode)  # type: ignore[arg-type]
                async with latch:
                    elected = anyio.Event()
                    tg.start_soon(events_until_stopped, latch, events, {E.ELECTED: elected})
                    await elected.wait()
    states = [e.state for e in events]
    after = states[states.index(E.ELECTED) + 1 :]
    if mode == "notify":
        assert after == [E.LOST_LEADERSHIP, E.STOPPED]
        assert events[-2].reason == "closed"
    else:
        assert after == [E.STOPPED]


async def test_events_carry_the_start_of_each_phase(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    events: list[ElectionEvent] = []
    with anyio.fail_after(20):
        async with coordinators(zk_server, 2, zk_chroot) as coords:
            async with leader_latch(coords[0], "/ph", participant_id="a") as a:
                await a.wait()
                async with anyio.create_task_group() as tg:
                    before = time.monotonic()
                    async with leader_latch(coords[1], "/ph", participant_id="b") as b:
                        is_following = anyio.Event()
                        tg.start_soon(events_until_stopped, b, events, {E.FOLLOWING: is_following})
                        await is_following.wait()
                        await a.aclose()
                        term = await b.wait()
    by_state = {e.state: e for e in events}
    offered, following = by_state[E.OFFERED], by_state[E.FOLLOWING]
    elected, lost = by_state[E.ELECTED], by_state[E.LOST_LEADERSHIP]
    for event in (offered, following, elected, lost):
        assert event.started is not None and event.took is not None and event.took >= 0
    assert before <= offered.started <= offered.at <= following.started  # type: ignore[operator]
    assert following.at <= elected.started  # type: ignore[operator]
    assert lost.started == term.started_at
    assert by_state[E.STOPPED].started is None
