"""The blocking façade's loop thread and thread claims, without a server (tests/zk/test_blocking.py has the rest)."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from aiocoord import BlockingInEventLoopError, CoordError, CoordinatorClosedError
from aiocoord.blocking._locks import Claims
from aiocoord.blocking._loop import Loop, refuse_inside_event_loop


def test_a_loop_runs_calls_in_its_thread_and_close_joins_it() -> None:
    before = set(threading.enumerate())
    loop = Loop()
    assert loop.thread is not threading.current_thread() and loop.thread.is_alive()
    assert loop.call(threading.current_thread) is loop.thread

    async def add(a: int, b: int) -> int:
        await anyio.lowlevel.checkpoint()
        return a + b

    assert loop.call(add, 1, 2) == 3
    with pytest.raises(ZeroDivisionError):
        loop.call(lambda: 1 / 0)
    loop.close()
    loop.close()  # twice is fine
    assert not loop.thread.is_alive()
    assert set(threading.enumerate()) - before == set()
    with pytest.raises(CoordinatorClosedError, match="closed"):
        loop.call(add, 1, 2)


def test_a_call_still_running_at_close_is_told_so() -> None:
    loop = Loop("uvloop")
    started = threading.Event()
    outcome: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await anyio.sleep_forever()

    def call() -> None:
        try:
            loop.call(forever)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert started.wait(10)
    loop.close()
    caller.join(10)
    assert [type(e) for e in outcome] == [CoordinatorClosedError]


def test_refused_inside_a_running_event_loop_and_from_the_loop_thread() -> None:
    refuse_inside_event_loop("nothing")  # no loop here: fine

    async def inside() -> None:
        with pytest.raises(BlockingInEventLoopError, match="async API"):
            refuse_inside_event_loop("this call")

    anyio.run(inside)
    assert issubclass(BlockingInEventLoopError, CoordError)
    assert issubclass(BlockingInEventLoopError, RuntimeError)
    loop = Loop()
    try:
        with pytest.raises(BlockingInEventLoopError):
            loop.call(lambda: loop.call(threading.current_thread))  # would wait for itself
    finally:
        loop.close()
    with pytest.raises(ValueError, match="loop"):
        Loop("trio")  # type: ignore[arg-type]


def test_claims_refuse_a_thread_that_would_wait_for_itself() -> None:
    claims = Claims()
    undo = claims.claim("lock", "/a", 1, "mutex")
    with pytest.raises(RuntimeError, match="wait for itself"):
        claims.claim("lock", "/a", 1, "mutex")
    claims.claim("lock", "/b", 1, "mutex")()  # another path: fine
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(claims.claim("lock", "/a", 1, "mutex")))
    thread.start()
    thread.join(10)
    assert len(other) == 1  # another thread: fine
    undo()
    claims.claim("lock", "/a", 1, "mutex")()  # given back: may be claimed again
    leases = [claims.claim("semaphore", "/s", 2, "leases") for _ in range(2)]
    with pytest.raises(RuntimeError):
        claims.claim("semaphore", "/s", 2, "leases")
    for lease in leases:
        lease()
