"""`Broadcast`: each subscriber's stream is bounded, and lagging is never silent (no server)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import anyio
import pytest

import aiocoord
from aiocoord._broadcast import Broadcast
from aiocoord.recipes.task_leadership._changes import ChangeFeed, TaskChange, follow_changes
from aiocoord.zk import EventType

pytestmark = pytest.mark.anyio


async def test_a_subscriber_that_stops_reading_stays_bounded() -> None:
    feed: Broadcast[int] = Broadcast()
    _send, receive = feed.open()
    for i in range(200_000):
        feed.publish(i)
    assert receive.statistics().current_buffer_used <= 5000


async def test_a_lagging_subscriber_gets_what_it_had_then_an_error_others_go_on() -> None:
    feed: Broadcast[int] = Broadcast(backlog=100)
    feed.publish(-1)
    slow = feed.subscribe()
    fast = feed.subscribe()
    assert await slow.__anext__() == -1  # subscribed: the latest item first
    assert await fast.__anext__() == -1
    got: list[int] = []
    with anyio.fail_after(5):
        for batch in range(10):  # the fast reader reads between batches; the slow one never
            for i in range(batch * 50, batch * 50 + 50):
                feed.publish(i)
            while len(got) < batch * 50 + 50:
                got.append(await fast.__anext__())
        assert got == list(range(500))
        assert len(feed._subscribers) == 1  # the slow one was dropped
        seen: list[int] = []
        with pytest.raises(aiocoord.SubscriberLagged) as info:
            await _collect(slow, seen)
        assert seen == list(range(100))  # everything it had buffered, in order: nothing unseen
        assert info.value.backlog == 100
        assert isinstance(info.value, aiocoord.CoordError)
        feed.publish(500)
        assert await fast.__anext__() == 500
        feed.close()
        assert [item async for item in fast] == []


async def _collect(stream: AsyncIterator[int], into: list[int]) -> None:
    async for item in stream:
        into.append(item)


async def test_with_resync_a_lagging_subscriber_is_told_to_read_again() -> None:
    feed: Broadcast[str] = Broadcast(replay_last=False, backlog=3, resync="again")
    _send, receive = feed.open()
    for i in range(10):
        feed.publish(str(i))
    items = [receive.receive_nowait() for _ in range(4)]
    assert items == ["0", "1", "2", "again"]
    with pytest.raises(anyio.WouldBlock):
        receive.receive_nowait()  # what came after the resync was skipped: reading again covers it
    feed.publish("10")
    assert receive.receive_nowait() == "10"  # read up: delivered again


async def test_task_changes_that_fell_behind_read_the_leaders_again() -> None:
    leaders = {"other": "w1", "report": "w1"}

    async def read_leader(task: str) -> tuple[str, str, int] | None:
        leader = leaders.get(task)
        return (leader, "1.0", 1) if leader else None

    feed = ChangeFeed()
    changes = follow_changes(feed, lambda: ["other", "report"], read_leader)
    with anyio.fail_after(5):
        assert await changes.__anext__() == TaskChange("other", "w1", "1.0", 1)
        assert await changes.__anext__() == TaskChange("report", "w1", "1.0", 1)
        (subscriber,) = feed._subscribers
        for _ in range(20_000):  # the reader is away while another task's leader churns
            feed.publish(("other", EventType.CREATED))
        leaders["report"] = "w2"
        feed.publish(("report", EventType.CREATED))  # past the backlog: not queued
        assert subscriber.statistics().current_buffer_used <= 5000
        # The reader learns it fell behind, reads every leader again and misses nothing.
        assert await changes.__anext__() == TaskChange("report", "w2", "1.0", 1)
    assert isinstance(changes, AsyncGenerator)
    await changes.aclose()


async def test_a_listener_is_called_with_each_item_as_published_then_at_the_close() -> None:
    broadcast: Broadcast[int] = Broadcast()
    broadcast.publish(0)
    seen: list[object] = []

    def broken(_item: int) -> None:
        raise RuntimeError("logged and dropped")

    broadcast.listen(broken, lambda: None)
    stop = broadcast.listen(seen.append, lambda: seen.append("closed"))
    other = broadcast.listen(lambda item: seen.append(-item), lambda: seen.append("other closed"))
    broadcast.publish(1)
    assert seen == [1, -1]  # not the item published before listening
    other()
    other()  # stopping twice is harmless
    broadcast.publish(2)
    broadcast.close()
    assert seen == [1, -1, 2, "closed"]
    stop()
    late: list[str] = []
    broadcast.listen(lambda _item: None, lambda: late.append("closed"))
    assert late == ["closed"]  # a closed broadcast says so at once


async def test_a_listener_may_get_the_latest_item_first() -> None:
    broadcast: Broadcast[int] = Broadcast()
    seen: list[int] = []
    broadcast.listen(seen.append, lambda: None, replay=True)  # nothing published yet
    broadcast.publish(1)
    broadcast.listen(seen.append, lambda: None, replay=True)
    broadcast.publish(2)
    assert seen == [1, 1, 2, 2]
