"""A `connection_events()` or `changes()` reader that stops reading is dropped, not grown.

It gets every event it had buffered, then `SubscriberLagged`; the coordinator,
the latch and the other readers carry on.  The flood of events is published
straight into the streams (a real one would take hours of flapping).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState, ElectionState
from aiocoord._broadcast import SUBSCRIBER_BACKLOG


async def _count_until_lagged(stream: AsyncIterator[Any]) -> int:
    seen: list[Any] = []
    with pytest.raises(aiocoord.SubscriberLagged):
        await _read_all(stream, seen)
    return len(seen)


async def _read_all(stream: AsyncIterator[Any], into: list[Any]) -> None:
    async for item in stream:
        into.append(item)


@pytest.mark.anyio
async def test_a_connection_events_reader_that_stops_reading_is_dropped(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(10):
        stalled = coordinator.connection_events()
        current = await stalled.__anext__()
        assert current.state is ConnectionState.CONNECTED
        for _ in range(SUBSCRIBER_BACKLOG + 1):  # a flood while the reader is away
            coordinator.client._session.events.publish(current)
        assert await _count_until_lagged(stalled) == SUBSCRIBER_BACKLOG
        fresh = coordinator.connection_events()  # subscribing again: the current state first
        assert (await fresh.__anext__()).state is ConnectionState.CONNECTED
        await coordinator.client.exists("/")


@pytest.mark.anyio
async def test_a_latch_changes_reader_that_stops_reading_is_dropped(
    coordinator: aiocoord.Coordinator,
) -> None:
    with anyio.fail_after(10):
        async with aiocoord.leader_latch(coordinator, "/bounded", participant_id="p") as latch:
            await latch.wait()
            stalled = latch.changes()
            latest = await stalled.__anext__()
            assert latest.state is ElectionState.ELECTED
            for _ in range(SUBSCRIBER_BACKLOG + 1):
                latch._events.publish(latest)
            assert await _count_until_lagged(stalled) == SUBSCRIBER_BACKLOG
            assert latch.has_leadership
            assert [p.id for p in await latch.participants()] == ["p"]
