"""The tenure primitive's table: what a body sees when its right ends (no server)."""

from __future__ import annotations

import asyncio

import anyio
import anyio.lowlevel
import pytest

from aiocoord.errors import LeadershipLost, LockLost
from aiocoord.recipes._tenure import Tenure

pytestmark = pytest.mark.anyio


async def test_end_cancels_the_body_and_raises_after_it_exited() -> None:
    tenure = Tenure("/app/leader", LeadershipLost)
    cleaned_up = anyio.Event()
    inside = anyio.Event()

    async def body() -> None:
        async with tenure.body():
            inside.set()
            try:
                await anyio.sleep_forever()
            finally:
                cleaned_up.set()  # runs cancelled, before the error is raised

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def run() -> None:
                with pytest.raises(LeadershipLost) as info:
                    await body()
                assert cleaned_up.is_set()
                assert info.value.path == "/app/leader"
                assert info.value.reason == "suspended"
                assert info.value.__cause__ is None

            tg.start_soon(run)
            await inside.wait()
            assert tenure.running == 1
            tenure.end("suspended")
            tenure.end("session lost")  # the first reason wins
    assert tenure.lost == "suspended"
    assert tenure.running == 0


async def test_a_body_entered_after_the_end_never_runs_past_its_first_checkpoint() -> None:
    tenure = Tenure("/locks/x", LockLost)
    tenure.end("lease ran out")
    reached = False

    async def body() -> None:
        nonlocal reached
        async with tenure.body():
            await anyio.lowlevel.checkpoint()
            reached = True

    with anyio.fail_after(5), pytest.raises(LockLost, match="lease ran out"):
        await body()
    assert not reached


async def test_a_body_that_finished_without_a_checkpoint_still_reports_the_loss() -> None:
    tenure = Tenure("/p", LeadershipLost)
    with pytest.raises(LeadershipLost):
        async with tenure.body():
            tenure.end("node deleted")  # no await after it: the body ends normally


async def test_the_body_s_own_exception_goes_on_unchanged() -> None:
    tenure = Tenure("/p", LeadershipLost)

    async def body() -> None:
        async with tenure.body():
            tenure.end("closed")
            raise KeyError("mine")

    with pytest.raises(KeyError):
        await body()


async def test_an_outer_cancellation_wins_over_the_loss() -> None:
    tenure = Tenure("/p", LeadershipLost)
    with anyio.fail_after(5):
        with anyio.CancelScope() as outer:
            async with tenure.body():
                tenure.end("suspended")
                outer.cancel()
                await anyio.sleep_forever()
            pytest.fail("the loss error was raised although the caller was cancelled")
    assert outer.cancelled_caught


async def test_end_soon_cancels_from_a_loop_callback() -> None:
    tenure = Tenure("/p", LeadershipLost)

    async def body() -> None:
        async with tenure.body():
            tenure.end("handed over", soon=True)
            await anyio.sleep_forever()

    with anyio.fail_after(5), pytest.raises(LeadershipLost, match="handed over"):
        await body()


async def test_drain_callbacks_and_body_counts() -> None:
    counts: list[int] = []
    tenure = Tenure("/p", LeadershipLost, on_body=counts.append)
    drained: list[str] = []
    tenure.when_drained(lambda: drained.append("empty at once"))
    assert drained == ["empty at once"]
    async with tenure.body():
        tenure.when_drained(lambda: drained.append("after exit"))
        assert drained == ["empty at once"]
    assert drained == ["empty at once", "after exit"]
    assert counts == [1, -1]


async def test_a_body_may_be_left_from_another_task(anyio_backend: object) -> None:
    """Entered in one task, left in another (a fixture's setup and teardown)."""
    tenure = Tenure("/p", LeadershipLost)
    body = tenure.body()
    with anyio.fail_after(5):
        await asyncio.create_task(body.__aenter__())
        assert tenure.running == 1
        assert await asyncio.create_task(body.__aexit__(None, None, None)) is False
        assert tenure.running == 0

        lost = tenure.body()
        await asyncio.create_task(lost.__aenter__())
        tenure.end("closed")
        with pytest.raises(LeadershipLost):
            await asyncio.create_task(lost.__aexit__(None, None, None))
