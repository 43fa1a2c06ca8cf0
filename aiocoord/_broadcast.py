"""`Broadcast`: one publisher, many subscribers, each with its own unbounded stream.

Used for connection states, election events and task changes: a slow subscriber
never loses an item and never blocks the publisher or the other subscribers;
leaving the ``async for`` unsubscribes; closing ends every stream.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ("Broadcast",)

T = TypeVar("T")


class Broadcast(Generic[T]):
    """Copies every published item to every subscriber; optionally replays the latest first."""

    def __init__(self, *, replay_last: bool = True) -> None:
        self._replay_last = replay_last
        self._subscribers: set[MemoryObjectSendStream[T]] = set()
        self.last: T | None = None
        self.closed = False

    def publish(self, item: T) -> None:
        """Deliver `item` to every subscriber now (never blocks)."""
        self.last = item
        for send in list(self._subscribers):
            try:
                send.send_nowait(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(send)

    def close(self) -> None:
        """End every subscriber's stream; later subscribers get only the replay."""
        self.closed = True
        for send in self._subscribers:
            send.close()
        self._subscribers.clear()

    def open(self) -> tuple[MemoryObjectSendStream[T], MemoryObjectReceiveStream[T]]:
        """A new subscription: the latest item first (if replayed), then every new one."""
        send, receive = anyio.create_memory_object_stream[T](math.inf)
        if self._replay_last and self.last is not None:
            send.send_nowait(self.last)
        if self.closed:
            send.close()
        else:
            self._subscribers.add(send)
        return send, receive

    def unsubscribe(self, send: MemoryObjectSendStream[T]) -> None:
        self._subscribers.discard(send)
        send.close()

    async def subscribe(self) -> AsyncIterator[T]:
        """Iterate a new subscription until the broadcast closes or the caller leaves."""
        send, receive = self.open()
        try:
            with receive:
                async for item in receive:
                    yield item
        finally:
            with suppress(Exception):
                self.unsubscribe(send)
