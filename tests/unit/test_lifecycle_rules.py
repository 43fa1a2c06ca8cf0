"""`Lifecycle`'s rules, with no server: crashes, start-up errors, cancellation, self-close."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import pytest

from aiocoord import CoordinatorClosedError
from aiocoord._lifecycle import Lifecycle, Phase
from tests.helpers import aiocoord_tasks


def in_task(call: Callable[[], Awaitable[object]]) -> None:
    """Run `call` in a task of its own (for `call_later`)."""

    async def run() -> None:
        await call()

    asyncio.get_running_loop().create_task(run())


class Probe:
    """A component made of a `Lifecycle`: what its hooks saw, and a background task."""

    def __init__(self, setup: Callable[[anyio.abc.TaskGroup], Awaitable[None]] | None = None):
        self.calls: list[str] = []
        self.crash = anyio.Event()
        self.done = anyio.Event()
        self.slow = 0.0
        self.life = Lifecycle(
            "probe",
            setup or self.setup,
            stopping=self.stopping,
            stopped=self.stopped,
            hurry=self.hurry,
        )

    async def setup(self, tg: anyio.abc.TaskGroup) -> None:
        await tg.start(self.background)

    async def background(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        task_status.started()
        await self.crash.wait()
        raise ValueError("background task failed")

    async def stopping(self) -> None:
        self.calls.append("stopping")
        await anyio.sleep(self.slow)  # a slow but bounded cleanup

    async def stopped(self) -> None:
        self.calls.append("stopped")
        self.done.set()

    def hurry(self) -> None:
        self.calls.append("hurry")


def phase(probe: Probe) -> Phase:
    return probe.life.phase


@pytest.mark.anyio
async def test_a_crash_closes_the_component_and_aclose_raises_it_once() -> None:
    with anyio.fail_after(5):
        probe = Probe()
        await probe.life.start()
        assert phase(probe) is Phase.RUNNING
        probe.crash.set()
        await probe.done.wait()
        assert phase(probe) is Phase.CLOSED and probe.calls == ["stopping", "stopped"]
        with pytest.raises(ExceptionGroup) as info:
            await probe.life.aclose()
        assert info.group_contains(ValueError, match="background task failed")
        await probe.life.aclose()  # reported once
        assert aiocoord_tasks() == set()


@pytest.mark.anyio
async def test_a_start_up_error_is_raised_as_is_after_the_cleanup() -> None:
    async def failing(tg: anyio.abc.TaskGroup) -> None:
        await tg.start(probe.background)
        raise KeyError("no")

    with anyio.fail_after(5):
        probe = Probe(failing)
        with pytest.raises(KeyError):
            await probe.life.start()
        assert probe.calls == ["stopping", "stopped"] and phase(probe) is Phase.CLOSED
        assert aiocoord_tasks() == set()
        await probe.life.aclose()  # nothing more to report


@pytest.mark.anyio
async def test_start_cancelled_or_closed_meanwhile_cleans_up() -> None:
    async def forever(tg: anyio.abc.TaskGroup) -> None:
        await anyio.sleep_forever()

    with anyio.fail_after(5):
        cancelled = Probe(forever)
        with anyio.move_on_after(0.05) as scope:
            await cancelled.life.start()
        assert scope.cancelled_caught
        assert cancelled.calls == ["hurry", "stopping", "stopped"]
        closed = Probe(forever)
        closer = asyncio.get_running_loop().call_later(0.05, in_task, closed.life.aclose)
        try:
            with pytest.raises(CoordinatorClosedError, match="closed while starting"):
                await closed.life.start()
        finally:
            closer.cancel()
        assert closed.calls == ["stopping", "stopped"] and aiocoord_tasks() == set()


@pytest.mark.anyio
async def test_aclose_from_a_background_task_does_not_wait_for_itself() -> None:
    async def closing(tg: anyio.abc.TaskGroup) -> None:
        async def close_me() -> None:
            await probe.life.aclose()  # returns: the owner cancels this task next
            await anyio.sleep_forever()

        tg.start_soon(close_me)

    with anyio.fail_after(5):
        probe = Probe(closing)
        await probe.life.start()
        await probe.done.wait()
        await probe.life.aclose()
        assert probe.calls == ["stopping", "stopped"] and aiocoord_tasks() == set()


@pytest.mark.anyio
async def test_cancelling_aclose_does_not_cut_the_cleanup_short() -> None:
    with anyio.fail_after(5):
        probe = Probe()
        probe.slow = 0.3
        await probe.life.start()
        with pytest.raises(TimeoutError):  # asyncio's own cancellation, through anyio's shields
            await asyncio.wait_for(probe.life.aclose(), timeout=0.01)
        assert phase(probe) is Phase.CLOSED and probe.calls == ["stopping", "hurry", "stopped"]
        again = Probe()
        again.slow = 0.3
        await again.life.start()
        with anyio.move_on_after(0.01) as scope:  # anyio's cancellation
            await again.life.aclose()
        assert scope.cancelled_caught and phase(again) is Phase.CLOSED
        assert aiocoord_tasks() == set()
