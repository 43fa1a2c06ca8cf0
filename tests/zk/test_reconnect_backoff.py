"""Reconnects back off after every failed attempt, whatever phase it failed in.

A server that completes the handshake and then hangs up, answers "expired",
or fails the priming (auth, watch restore) made the session loop reconnect
at once, thousands of times a second.  Each test has a `FakeZooKeeper` fail
every attempt in one such way for a while and counts its handshakes; then
the server behaves and the session must come back within the backoff's cap.
A connection that was stable reconnects at once when it drops.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState
from aiocoord.testing import Answer, FakeRequest, FakeZooKeeper
from tests.helpers import recording

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]
S = ConnectionState

WINDOW = 2.0
SESSION_TIMEOUT = 4.0  # backoff cap: T/4 while the session may live, 1 s without one
MOST = 25  # attempts in WINDOW: about 8 with the backoff; thousands without


def hang_up_after_handshake(request: FakeRequest) -> Answer | None:
    if request.opcode is None:
        return Answer(FakeZooKeeper.frame(request.reply), hang_up=True)
    return None


def expired(request: FakeRequest) -> Answer | None:
    if request.opcode is None:
        return Answer(FakeZooKeeper.frame(FakeZooKeeper.connect_packet(0, 0, b"\x00" * 16)))
    return None


def hang_up_on_auth(request: FakeRequest) -> Answer | None:
    return Answer(hang_up=True) if request.opcode == 100 else None


def refuse_watch_restore(request: FakeRequest) -> Answer | None:
    if request.opcode == 105:  # setWatches2: "unimplemented"
        assert request.xid is not None
        return Answer(FakeZooKeeper.frame(FakeZooKeeper.reply_packet(request.xid, 0, -6)))
    return None


FAILURES: dict[str, Callable[[FakeRequest], Answer | None]] = {
    "hangs up after the handshake": hang_up_after_handshake,
    "answers expired": expired,
    "hangs up during auth": hang_up_on_auth,
    "refuses the watch restore": refuse_watch_restore,
}


@pytest.mark.parametrize("failure", FAILURES.values(), ids=FAILURES.keys())
async def test_every_failed_attempt_backs_off(
    failure: Callable[[FakeRequest], Answer | None],
) -> None:
    with anyio.fail_after(30), FakeZooKeeper() as fake:
        async with aiocoord.connect(
            fake.connect_string, session_timeout=SESSION_TIMEOUT, auth="user:secret"
        ) as coord:
            async with coord.client.watch("/w"), recording(coord) as events:
                fake.script = failure
                start = fake.handshakes
                fake.hang_up()
                await events.wait_for(S.SUSPENDED)
                await anyio.sleep(WINDOW)  # the rate of attempts is what is measured
                attempts = fake.handshakes - start
                assert 1 <= attempts <= MOST, f"{attempts} handshakes in {WINDOW}s"
                fake.script = None
                mark = events.mark()
                started = time.monotonic()
                await events.wait_for(S.RECONNECTED, after=mark, timeout=10)
                # The next attempt comes within one sleep of the cap.
                assert time.monotonic() - started < 1.5


async def test_a_stable_connection_reconnects_at_once() -> None:
    with anyio.fail_after(20), FakeZooKeeper() as fake:
        async with aiocoord.connect(fake.connect_string, session_timeout=1.5) as coord:
            async with recording(coord) as events:
                for _ in range(3):
                    # Up longer than a ping interval: it worked, so dropping it is no failure.
                    await anyio.sleep(coord.client._session.timing.ping_interval + 0.1)
                    mark = events.mark()
                    fake.hang_up()
                    started = time.monotonic()
                    await events.wait_for(S.RECONNECTED, after=mark)
                    assert time.monotonic() - started < 0.3
