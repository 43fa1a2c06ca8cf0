"""`TaskLeadership.changes()`: who leads each task, as a stream built on the leader watch.

The leader watch hands every event on a leader node to a `ChangeFeed`, which
copies it to each subscriber's own bounded stream (nothing is read from
ZooKeeper while nobody subscribes).  A subscriber reads the current leader of
each task once, then turns events into `TaskChange`s: a deletion means "no
leader" at once; a creation is read to learn who leads (a leader that comes
and goes before the read is skipped).  After a reconnection, when events may
have been missed, everything is read again; so too when the subscriber fell
so far behind that its stream skipped events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiocoord._broadcast import Broadcast
from aiocoord.zk import EventType

__all__ = ("ChangeFeed", "TaskChange", "follow_changes")

Raw = tuple[str | None, EventType | None]
"""What a subscriber receives: (task, event type); (None, None) means "read everything again"."""


@dataclass(frozen=True, slots=True)
class TaskChange:
    """Who leads `task` now, as seen by this worker: `leader` is a worker id or None.

    `version` is the leader's version and `token` its term's fencing token.
    """

    task: str
    leader: str | None
    version: str | None = None
    token: int | None = None


class ChangeFeed(Broadcast[Raw]):
    """Copies leader events to every subscriber's stream (no replay: readers list first).

    A subscriber that falls behind gets ``(None, None)``, "read everything
    again", in place of the events it missed.

    `on_subscribers` is called whenever a subscriber comes or goes (the leader
    watch must be live while anyone listens).
    """

    def __init__(self, on_subscribers: Callable[[], None] = lambda: None) -> None:
        super().__init__(replay_last=False, resync=(None, None))
        self._on_subscribers = on_subscribers

    @property
    def subscribed(self) -> bool:
        return bool(self._subscribers)

    def open(self) -> tuple[MemoryObjectSendStream[Raw], MemoryObjectReceiveStream[Raw]]:
        opened = super().open()
        self._on_subscribers()
        return opened

    def unsubscribe(self, send: MemoryObjectSendStream[Raw]) -> None:
        super().unsubscribe(send)
        self._on_subscribers()


async def _next_batch(receive: MemoryObjectReceiveStream[Raw]) -> list[Raw] | None:
    """Everything queued (waiting for at least one), or None once the stream ended."""
    try:
        batch = [await receive.receive()]
    except anyio.EndOfStream:
        return None
    while True:
        try:
            batch.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            return batch


async def follow_changes(
    feed: ChangeFeed,
    tasks: Callable[[], Collection[str]],
    read_leader: Callable[[str], Awaitable[tuple[str, str, int] | None]],
) -> AsyncIterator[TaskChange]:
    """The current leader of each of `tasks()`, then every change, until the feed closes."""
    send, receive = feed.open()
    known: dict[str, TaskChange] = {}
    pending = set(tasks())
    try:
        with receive:
            while True:
                for task in sorted(pending.intersection(tasks())):
                    leader = await read_leader(task)
                    change = TaskChange(task, *leader) if leader else TaskChange(task, None)
                    if known.get(task) != change:
                        known[task] = change
                        yield change
                pending.clear()
                batch = await _next_batch(receive)
                if batch is None:
                    return
                for name, etype in batch:
                    if name is None:
                        pending.update(tasks())  # reconnected: events may be missing
                    elif etype is EventType.DELETED:
                        pending.discard(name)
                        if name in known and known[name].leader is not None:
                            known[name] = TaskChange(name, None)
                            yield known[name]
                    else:
                        pending.add(name)
    finally:
        feed.unsubscribe(send)
