"""While ZooKeeper is away: every wait is bounded, says how long it waited and why.

ZooKeeper is taken away by a door in front of the shared server: a fault proxy
that is stopped (the client's connection drops and every new one is refused,
as when the server is stopped) and opened again on the same port.  Times are
asserted as bounds with generous margins.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionLostError, ConnectionState, Scheduler
from aiocoord.settings import Settings
from aiocoord.testing import ZooKeeperServer
from tests.helpers import Door, recording

S = ConnectionState
pytestmark = pytest.mark.anyio

REQUEST_TIMEOUT = 2.0
MARGIN = 1.0  # on top of a deadline, for scheduling on a busy machine


@pytest.fixture
def door(zk_server: ZooKeeperServer) -> Iterator[Door]:
    d = Door(zk_server)
    try:
        yield d
    finally:
        d.close()


@asynccontextmanager
async def away(
    door: Door, zk_chroot: str, *, until: S = S.SUSPENDED
) -> AsyncIterator[aiocoord.Coordinator]:
    """A coordinator connected through `door`, then the door closed until the state is `until`."""
    async with aiocoord.connect(
        door.connect_string,
        namespace=zk_chroot,
        session_timeout=3.0,
        request_timeout=REQUEST_TIMEOUT,
    ) as coord:
        await coord.client.create("/ready")
        async with recording(coord) as rec:
            door.close()
            await rec.wait_for(until, timeout=10)
        try:
            yield coord
        finally:
            door.open()


def assert_refused(exc: BaseException, door: Door) -> None:
    """The error says what refused: ConnectionRefusedError from our port, in its text."""
    text = str(exc)
    assert "ConnectionRefusedError" in text, text
    assert f"127.0.0.1:{door.port}" in text, text


def stated_seconds(exc: BaseException) -> float:
    """The elapsed time the message states: "... after 2.01s ..."."""
    words = str(exc).split()
    after = words.index("after")
    return float(words[after + 1].rstrip("s,;:)"))


# --- item 3: one deadline per request, across retries and reconnect waits ------------------------


async def test_a_read_with_zookeeper_down_fails_within_the_request_timeout(
    door: Door, zk_chroot: str
) -> None:
    """`client.get` raised after twice the request timeout, saying "within" the timeout."""
    with anyio.fail_after(30):
        async with away(door, zk_chroot) as coord:
            started = time.monotonic()
            with pytest.raises(ConnectionLostError) as info:
                await coord.client.get("/ready")
            elapsed = time.monotonic() - started
            assert REQUEST_TIMEOUT - 0.1 <= elapsed < REQUEST_TIMEOUT + MARGIN
            assert abs(stated_seconds(info.value) - elapsed) < 0.5
            assert_refused(info.value, door)
            assert isinstance(info.value.__cause__, ConnectionLostError)
            assert isinstance(info.value.__cause__.__cause__, ConnectionRefusedError)


async def test_cas_lock_and_once_per_without_waiting_fail_within_the_request_timeout(
    door: Door, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with away(door, zk_chroot) as coord:
            for enter in (
                lambda: aiocoord.cas_lock(coord, "/m/lock", lease=5, blocking=False),
                lambda: aiocoord.once_per(coord, "/m/once", interval=60),
            ):
                started = time.monotonic()
                with pytest.raises(ConnectionLostError) as info:
                    async with enter():
                        pytest.fail("entered while ZooKeeper is away")
                assert time.monotonic() - started < REQUEST_TIMEOUT + MARGIN
                assert_refused(info.value, door)


async def test_submit_fails_within_the_request_timeout_with_its_cause(
    door: Door, zk_chroot: str
) -> None:
    """`Scheduler.submit` raised after three request timeouts, with no cause."""
    with anyio.fail_after(30):
        async with away(door, zk_chroot) as coord:
            sched = Scheduler(coord, "/jobs")

            @sched.job("sum")
            async def add(a: int, b: int) -> int:
                return a + b

            started = time.monotonic()
            with pytest.raises(ConnectionLostError, match="could not submit job") as info:
                await sched.submit("sum", {"a": 1, "b": 2})
            assert time.monotonic() - started < REQUEST_TIMEOUT + MARGIN
            assert info.value.__cause__ is not None
            assert_refused(info.value, door)


# --- item 1: entering a recipe while ZooKeeper is away -------------------------------------------


@pytest.mark.parametrize("until", [S.SUSPENDED, S.LOST], ids=["suspended", "lost"])
async def test_entering_a_latch_or_a_lock_with_zookeeper_down_raises_in_time(
    door: Door, zk_chroot: str, until: S
) -> None:
    """Both waited forever, silently (still waiting after 100 s)."""
    with anyio.fail_after(40):
        async with away(door, zk_chroot, until=until) as coord:
            for enter in (
                lambda: aiocoord.leader_latch(coord, "/m/latch2"),
                lambda: aiocoord.cas_lock(coord, "/m/lock", lease=5),
                lambda: aiocoord.task_leadership(
                    coord, "/m/tasks", worker=aiocoord.Worker("1.0"), tasks=["t"]
                ),
            ):
                started = time.monotonic()
                with pytest.raises(ConnectionLostError) as info:
                    async with enter():
                        pytest.fail("entered while ZooKeeper is away")
                assert time.monotonic() - started < REQUEST_TIMEOUT + MARGIN
                assert_refused(info.value, door)
            door.open()
            # ZooKeeper is back: entering works again.
            await coord.wait_connected()
            async with aiocoord.leader_latch(coord, "/m/latch2") as latch:
                await latch.wait()
            async with aiocoord.cas_lock(coord, "/m/lock", lease=5) as lock:
                assert lock.held
            async with (
                aiocoord.task_leadership(
                    coord, "/m/tasks", worker=aiocoord.Worker("1.0"), tasks=["t"]
                ) as tl,
                tl.lead("t"),
            ):
                assert tl.is_leader("t")


async def test_waiting_for_leadership_through_an_outage_says_so(
    door: Door, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`latch.wait()` waits through an outage by design: it logs at INFO saying why (no loss)."""
    caplog.set_level(logging.INFO, logger="aiocoord")
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(
                door.connect_string, namespace=zk_chroot, session_timeout=3.0
            ) as other,
            aiocoord.leader_latch(other, "/m/latch", participant_id="first"),
        ):
            async with (
                aiocoord.connect(
                    door.connect_string, namespace=zk_chroot, session_timeout=3.0
                ) as coord,
                aiocoord.leader_latch(coord, "/m/latch", participant_id="second") as latch,
            ):
                async with recording(coord) as rec:
                    door.close()
                    await rec.wait_for(S.SUSPENDED, timeout=10)
                    with anyio.move_on_after(0.5):
                        await latch.wait()
                    door.open()
    # A non-leader waiting through an outage is told at INFO: it lost nothing (a WARNING
    # is for a loss, a failure or something an operator must act on).
    said = [r for r in caplog.records if r.levelno >= logging.INFO and "/m/latch" in r.getMessage()]
    waiting = [r for r in said if "waiting" in r.getMessage() and "SUSPENDED" in r.getMessage()]
    assert waiting, [r.getMessage() for r in said]
    assert all(r.levelno == logging.INFO for r in waiting), [r.levelname for r in waiting]


# --- item 4: connect() with nothing listening --------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_connect_refused_logs_one_line_past_the_first_second_not_one_per_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiocoord")
    port = _free_port()
    started = time.monotonic()
    with anyio.fail_after(10), pytest.raises(ConnectionLostError) as info:
        # 4 s: past the first second, the jittered sleeps (at most 1 s without a session)
        # always leave room for two attempts.
        async with aiocoord.connect(f"127.0.0.1:{port}", connect_timeout=4.0, session_timeout=2):
            pass
    assert time.monotonic() - started < 4.0 + MARGIN
    assert "ConnectionRefusedError" in str(info.value)
    assert "aiocoord zk start" not in str(info.value)  # not the embedded default
    refused = [r for r in caplog.records if "ConnectionRefusedError" in r.getMessage()]
    warned = [r for r in refused if r.levelno == logging.WARNING]
    assert warned, [r.getMessage() for r in refused]
    assert all(r.created - started >= 0.9 for r in warned)
    # One line for the outage (it logged 29 for a 15 s connect); the others at DEBUG.
    assert len(warned) == 1, [r.getMessage() for r in warned]
    assert len(refused) >= 2


async def test_connect_to_the_embedded_default_hints_at_starting_it() -> None:
    host, port = Settings.model_fields["hosts"].default.split(":")
    with socket.socket() as probe:
        if probe.connect_ex((host, int(port))) == 0:
            pytest.skip("something listens on the embedded default address")
    with anyio.fail_after(10), pytest.raises(ConnectionLostError, match="aiocoord zk start"):
        async with aiocoord.connect(Settings(hosts=f"{host}:{port}"), connect_timeout=1.0):
            pass
