"""`TaskTurns`: the tasks sharing one lock object take it one at a time (no server)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from aiocoord.recipes._task_turns import TaskTurns

pytestmark = pytest.mark.anyio


def _me() -> asyncio.Task[object]:
    task = asyncio.current_task()
    assert task is not None
    return task


async def test_take_now_takes_a_free_turn_and_refuses_a_taken_one() -> None:
    turns = TaskTurns()
    assert not turns.busy
    assert await turns.take_now(_me())
    assert turns.busy and turns.task is _me()
    assert not await turns.take_now(_me())
    turns.end(_me())
    assert not turns.busy and turns.task is None


async def test_end_of_another_tasks_turn_is_ignored_unless_no_task_is_named() -> None:
    turns = TaskTurns()
    assert await turns.take_now(_me())
    other = asyncio.ensure_future(asyncio.sleep(0))
    turns.end(other)  # not its turn: nothing ends
    assert turns.busy and turns.task is _me()
    turns.end()  # any task may end the turn it does not name
    assert not turns.busy
    turns.end()  # no turn taken: nothing to do
    await other


async def test_a_waiter_gets_its_turn_when_the_turn_before_ends() -> None:
    turns = TaskTurns()
    assert await turns.take()
    order: list[str] = []

    async def waiter(name: str) -> None:
        assert await turns.take(_me())
        order.append(name)
        turns.end(_me())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, "a")
            tg.start_soon(waiter, "b")
            await anyio.wait_all_tasks_blocked()
            assert turns.busy and not await turns.take_now()  # others wait: no turn now
            turns.end()
    assert order == ["a", "b"]
    assert not turns.busy


async def test_a_deadline_or_a_cancellation_while_waiting_takes_no_turn() -> None:
    turns = TaskTurns()
    assert await turns.take()
    with anyio.fail_after(5):
        assert not await turns.take(deadline=anyio.current_time() + 0.05)
        with anyio.move_on_after(0.05):
            await turns.take(_me())
    assert turns.task is None
    turns.end()
    assert not turns.busy
    assert await turns.take_now()
