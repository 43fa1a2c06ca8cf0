"""One task's steps in task leadership, against a stand-in engine (no server).

A hand-over step has one executor, whether a callback (`TaskSlot.advance`)
or the task's loop (`TaskSlot.run`) takes it, and one error policy: these
tests start each step both ways and answer its queued write by hand.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal, cast

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from aiocoord.errors import (
    BadVersionError,
    ConnectionLostError,
    LeadershipLost,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from aiocoord.recipes.task_leadership._records import Worker, encode_leader
from aiocoord.recipes.task_leadership._slot import RETRY_DELAY, TaskSlot
from aiocoord.recipes.task_leadership._state import clock
from aiocoord.recipes.task_leadership._writes import Write, WriteBatcher
from aiocoord.zk import CreateMode, CreateOp, DeleteOp, EventType, ZkClient
from aiocoord.zk.types import Node, Stat

pytestmark = pytest.mark.anyio

ME = Worker("1.1", id="me")
OTHER = Worker("1.1", id="other")
SESSION = 0x51
PATH = "/app/leaders/report"

Starter = Literal["callback", "loop"]


def stat(czxid: int, *, version: int = 0, owner: int = SESSION) -> Stat:
    return Stat(czxid, czxid, 0, 0, version, 0, 0, owner, 0, 0, czxid)


class FakeWrites(WriteBatcher):
    """Keeps queued writes for the test to answer; nothing is awaited directly."""

    def __init__(self) -> None:
        super().__init__(cast(ZkClient, None))
        self.queued: list[Write] = []
        self.bodies_at_queue: list[int] = []
        self.slot: TaskSlot | None = None
        self._added = asyncio.Event()

    def queue_create(self, path: str, data: bytes, on_done: Callable[[Write], None]) -> None:
        self._add(Write(CreateOp(path, data, CreateMode.EPHEMERAL), on_done))

    def queue_delete(self, path: str, version: int, on_done: Callable[[Write], None]) -> None:
        self._add(Write(DeleteOp(path, version), on_done))

    def _add(self, write: Write) -> None:
        self.queued.append(write)
        self.bodies_at_queue.append(self.slot.bodies if self.slot else 0)
        self._added.set()

    async def create(self, path: str, data: bytes) -> tuple[int, int]:
        raise AssertionError("a step awaits no write of its own: it queues one")

    async def delete(self, path: str, version: int) -> None:
        raise AssertionError("a step awaits no write of its own: it queues one")

    async def next(self) -> Write:
        """The oldest unanswered write (waiting for one if need be)."""
        while not self.queued:
            self._added = asyncio.Event()
            await self._added.wait()
        return self.queued[0]

    def answer(
        self, *, created: tuple[int, int] | None = None, error: BaseException | None = None
    ) -> Write:
        write = self.queued.pop(0)
        write.created, write.error = created, error
        assert write.on_done is not None
        write.on_done(write)
        return write


class FakeClient:
    """The reads and single deletes the loop's own steps make."""

    def __init__(self) -> None:
        self.node: Node | None = None
        self.deleted: list[tuple[str, int]] = []

    async def exists(self, path: str) -> Stat | None:
        await anyio.lowlevel.checkpoint()
        return None if self.node is None else self.node.stat

    async def get(self, path: str) -> Node:
        await anyio.lowlevel.checkpoint()
        if self.node is None:
            raise NoNodeError(path=path)
        return self.node

    async def delete(self, path: str, *, version: int = -1) -> None:
        await anyio.lowlevel.checkpoint()
        self.deleted.append((path, version))
        self.node = None


@dataclass
class FakeEngine:
    """Stands in for `TaskEngine` (what `_slot.Engine` asks for)."""

    writes: FakeWrites = field(default_factory=FakeWrites)
    fake_client: FakeClient = field(default_factory=FakeClient)
    worker: Worker = ME
    leader_record: bytes = field(default_factory=lambda: encode_leader(ME))
    settle: float = 0.0
    closing: bool = False
    session_id: int | None = SESSION
    is_usable: bool = True
    is_current: bool = True
    is_watching: bool = True
    reviews: int = 0

    @property
    def client(self) -> ZkClient:
        return cast(ZkClient, self.fake_client)

    def usable(self) -> bool:
        return self.is_usable

    def view_current(self) -> bool:
        return self.is_current

    def watching(self) -> bool:
        return self.is_watching

    def review_watch(self) -> None:
        self.reviews += 1


def new_slot(engine: FakeEngine) -> TaskSlot:
    slot = TaskSlot("report", PATH)
    engine.writes.slot = slot
    return slot


def lead(engine: FakeEngine, slot: TaskSlot, czxid: int = 0x10) -> None:
    """Make `slot` lead: chosen, its node freed, the create answered."""
    slot.choose(ME.id, clock())
    slot.on_event(EventType.DELETED, engine)
    engine.writes.answer(created=(czxid, SESSION))
    assert slot.granted


@asynccontextmanager
async def loop_running(slot: TaskSlot, engine: FakeEngine) -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(slot.run, engine)
        yield tg
        tg.cancel_scope.cancel()


async def hand_over(engine: FakeEngine, slot: TaskSlot, starter: Starter) -> Write:
    """The choice moves the task away (settle 0): revoke, then the delete is queued."""
    slot.choose(OTHER.id, clock())
    if starter == "callback":
        slot.advance(engine)  # the engine's settle pass
        assert slot.busy  # under way before the loop ran at all
    return await engine.writes.next()


# --- the state the choice reads -----------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "field_name"),
    [
        ("is_usable", "usable"),
        ("is_current", "view_current"),
        ("is_watching", "watching"),
        ("closing", "stopping"),
    ],
)
async def test_state_puts_each_fact_in_its_own_field(setting: str, field_name: str) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    slot.choose(ME.id, clock())
    before = slot.state(engine)._asdict()
    setattr(engine, setting, not getattr(engine, setting))
    after = slot.state(engine)._asdict()
    assert {k for k in before if before[k] != after[k]} == {field_name}


async def test_state_of_a_task_led_then_chosen_away() -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    assert slot.state(engine)._asdict() == {
        "usable": True,
        "view_current": True,
        "watching": True,
        "desired": False,
        "desired_for": pytest.approx(0.0, abs=1.0),
        "held": False,
        "granted": False,
        "stale": False,
        "verify": False,
        "blocked": False,
        "stopping": False,
    }
    lead(engine, slot)
    state = slot.state(engine)
    assert (state.desired, state.held, state.granted, state.desired_for) == (True, True, True, 0)
    assert slot.choose(OTHER.id, clock() - 5.0)
    assert not slot.choose(OTHER.id, clock())  # no change: the settle delay goes on
    state = slot.state(engine)
    assert not state.desired and state.desired_for >= 5.0
    slot.stop("task removed")
    assert slot.state(engine).stopping


# --- acquire ------------------------------------------------------------------------------


@pytest.mark.parametrize("starter", ["callback", "loop"])
async def test_acquire_queues_the_create_and_grants_from_its_answer(starter: Starter) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    with anyio.fail_after(5):
        async with loop_running(slot, engine):
            slot.choose(ME.id, clock())
            if starter == "callback":
                slot.on_event(EventType.DELETED, engine)  # the node was freed
                assert engine.writes.queued
            write = await engine.writes.next()
            assert isinstance(write.op, CreateOp) and write.op.path == PATH
            assert slot.busy
            engine.writes.answer(created=(0x2A, SESSION))
            assert slot.granted and not slot.busy
            assert slot.term is not None and slot.term.token == 0x2A
            await anyio.wait_all_tasks_blocked()
            assert engine.writes.queued == []  # nothing more to do


@pytest.mark.parametrize("starter", ["callback", "loop"])
async def test_a_create_that_finds_the_node_taken_reads_it_then_waits(starter: Starter) -> None:
    engine = FakeEngine()
    engine.fake_client.node = Node(encode_leader(OTHER), stat(0x30, owner=0x99))
    slot = new_slot(engine)
    with anyio.fail_after(5):
        async with loop_running(slot, engine):
            slot.choose(ME.id, clock())
            if starter == "callback":
                slot.on_event(EventType.DELETED, engine)
            await engine.writes.next()
            engine.writes.answer(error=NodeExistsError(path=PATH))
            assert slot.busy  # until the loop has read the node
            await anyio.wait_all_tasks_blocked()
            assert not slot.busy and slot.holder == OTHER.id
            assert slot.state(engine).blocked  # no new create until an event on the path
            assert engine.writes.queued == []


# --- revoke and delete ----------------------------------------------------------------------


@pytest.mark.parametrize("starter", ["callback", "loop"])
async def test_revoke_waits_for_the_bodies_then_queues_the_delete(starter: Starter) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    lead(engine, slot)
    tenure = slot.tenure
    assert tenure is not None
    lost: list[str] = []

    async def body(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            async with tenure.body():
                task_status.started()
                await anyio.sleep_forever()
        except LeadershipLost as exc:
            lost.append(exc.reason)

    with anyio.fail_after(5):
        async with loop_running(slot, engine) as tg:
            await tg.start(body)
            assert slot.bodies == 1
            write = await hand_over(engine, slot, starter)
            assert isinstance(write.op, DeleteOp) and write.op.version == 0
            assert engine.writes.bodies_at_queue == [0, 0]  # the create, then the delete
            await anyio.wait_all_tasks_blocked()
            assert lost == ["handed over"]
            engine.writes.answer()
            assert slot.held is None and not slot.busy


@pytest.mark.parametrize("starter", ["callback", "loop"])
@pytest.mark.parametrize("ours", [True, False])
async def test_a_delete_that_finds_the_version_moved_deletes_only_our_node(
    starter: Starter, ours: bool
) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    lead(engine, slot, czxid=0x10)
    engine.fake_client.node = Node(b"{}", stat(0x10 if ours else 0x11, version=3))
    with anyio.fail_after(5):
        async with loop_running(slot, engine):
            await hand_over(engine, slot, starter)
            engine.writes.answer(error=BadVersionError(path=PATH))
            assert slot.busy and slot.held is not None  # the loop finishes the step
            await anyio.wait_all_tasks_blocked()
            assert engine.fake_client.deleted == ([(PATH, 3)] if ours else [])
            assert slot.held is None and not slot.busy
            assert engine.writes.queued == []


@pytest.mark.parametrize("starter", ["callback", "loop"])
@pytest.mark.parametrize("error", [None, NoNodeError(path=PATH)])
async def test_a_delete_that_succeeds_or_finds_the_node_gone_releases_it(
    starter: Starter, error: BaseException | None
) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    lead(engine, slot)
    with anyio.fail_after(5):
        async with loop_running(slot, engine):
            await hand_over(engine, slot, starter)
            engine.writes.answer(error=error)
            assert slot.held is None and not slot.busy
            await anyio.wait_all_tasks_blocked()
            assert engine.fake_client.deleted == [] and engine.writes.queued == []


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("starter", ["callback", "loop"])
async def test_connection_loss_is_decided_again_after_a_pause(starter: Starter) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    with anyio.fail_after(5):
        async with loop_running(slot, engine):
            slot.choose(ME.id, clock())
            if starter == "callback":
                slot.on_event(EventType.DELETED, engine)
            await engine.writes.next()
            failed_at = anyio.current_time()
            engine.writes.answer(error=ConnectionLostError("cut"))
            again = await engine.writes.next()  # the same step, tried again
            assert anyio.current_time() - failed_at >= RETRY_DELAY * 0.9
            assert isinstance(again.op, CreateOp)
            engine.writes.answer(created=(0x2B, SESSION))
            assert slot.granted


@pytest.mark.parametrize("step", ["acquire", "delete"])
async def test_any_other_error_ends_the_loop(step: str) -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    if step == "acquire":
        slot.choose(ME.id, clock())
        slot.on_event(EventType.DELETED, engine)
    else:
        lead(engine, slot)
        slot.choose(OTHER.id, clock())
        slot.advance(engine)
    engine.writes.answer(error=NoAuthError(path=PATH))
    with anyio.fail_after(5), pytest.raises(NoAuthError):
        await slot.run(engine)
    assert slot.done.is_set()


# --- what the engine tells a slot -------------------------------------------------------------


async def test_look_again_checks_our_node_and_waits_on_a_taken_one() -> None:
    engine = FakeEngine()
    held, free = new_slot(engine), TaskSlot("cleanup", "/app/leaders/cleanup")
    lead(engine, held)
    held.look_again(SESSION, taken=True, seen=held.events)
    assert held.state(engine).verify  # ours: checked by czxid before it is led again
    free.look_again(SESSION, taken=True, seen=free.events)
    assert free.state(engine).blocked  # someone's: wait for an event on it
    free.look_again(SESSION, taken=True, seen=free.events - 1)
    assert not free.state(engine).blocked  # an event came since the read: try anyway
    held.look_again(SESSION + 1, taken=True, seen=held.events)
    state = held.state(engine)
    assert state.stale and not state.held and not state.verify  # another session's node


async def test_a_callback_leaves_removal_and_closing_to_the_loop() -> None:
    engine = FakeEngine()
    slot = new_slot(engine)
    lead(engine, slot)
    slot.stop("task removed")
    slot.advance(engine)
    assert engine.writes.queued == [] and slot.granted and not slot.busy
