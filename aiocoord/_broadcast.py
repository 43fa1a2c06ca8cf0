"""`Broadcast`: one publisher, many subscribers, each with its own bounded stream.

Used for connection states, election events and task changes.  A slow
subscriber never blocks the publisher or the other subscribers, and never
loses an item unseen.  Each subscriber buffers up to `SUBSCRIBER_BACKLOG`
items; one that falls further behind has stopped reading, and is dropped so
that it cannot grow without limit: its iterator yields every item it had
buffered, in order, then raises `SubscriberLagged`.  A broadcast made with a
`resync` item (for readers that can read the current state again, as task
changes do) sends that item instead, as the last of the full buffer, and skips
what follows until the reader has taken it.

Leaving the ``async for`` unsubscribes; closing ends every stream.  A listener
(`listen`) is called with each item where it is published instead, for a
component that only reacts (no task, no buffer of its own: a thousand leader
latches on one session follow its connection states this way).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from typing import Final, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .errors import SubscriberLagged

__all__ = ("SUBSCRIBER_BACKLOG", "Broadcast")

T = TypeVar("T")

log = logging.getLogger(__name__)

SUBSCRIBER_BACKLOG: Final = 4096
"""Items a subscriber may have unread; far past any burst of state transitions."""


class Broadcast(Generic[T]):
    """Copies every published item to every subscriber; optionally replays the latest first.

    `backlog` bounds each subscriber's buffer (see the module docstring for
    what happens past it); with `resync`, a lagging subscriber gets that item
    rather than an error.
    """

    def __init__(
        self,
        *,
        replay_last: bool = True,
        backlog: int = SUBSCRIBER_BACKLOG,
        resync: T | None = None,
    ) -> None:
        if backlog < 1:
            raise ValueError(f"backlog must be at least 1, not {backlog}")
        self._replay_last = replay_last
        self._backlog = backlog
        self._resync = resync
        self._subscribers: set[MemoryObjectSendStream[T]] = set()
        self._stalled: set[MemoryObjectSendStream[T]] = set()  # sent `resync`, not read yet
        self._lagged: weakref.WeakSet[MemoryObjectSendStream[T]] = weakref.WeakSet()
        self._listeners: dict[object, tuple[Callable[[T], None], Callable[[], None]]] = {}
        self.last: T | None = None
        self.closed = False

    def listen(
        self, on_item: Callable[[T], None], on_close: Callable[[], None], *, replay: bool = False
    ) -> Callable[[], None]:
        """Call `on_item(item)` for every item published from now on, `on_close()` at the close.

        Both run synchronously in `publish` and `close`, so they must be quick
        and must not await; what they raise is logged and dropped.  With
        `replay`, the latest item (`last`, if any) goes to `on_item` first.
        Returns the function that stops listening (safe to call twice).  A
        closed broadcast calls `on_close()` at once.
        """
        key = object()

        def stop() -> None:
            self._listeners.pop(key, None)

        if self.closed:
            _call_safely(on_close)
            return stop
        if replay and self.last is not None:
            on_item(self.last)
        self._listeners[key] = (on_item, on_close)
        return stop

    def counts(self) -> dict[str, int]:
        """How many follow it now: ``listeners`` (`listen`) and ``streams`` (subscriptions
        not yet left, lagged or closed).  Never blocks; for tests and soaks."""
        return {"listeners": len(self._listeners), "streams": len(self._subscribers)}

    def publish(self, item: T) -> None:
        """Deliver `item` to every subscriber now (never blocks)."""
        self.last = item
        for on_item, _ in list(self._listeners.values()):
            _call_safely(on_item, item)
        for send in list(self._subscribers):
            try:
                self._deliver(send, item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._drop(send)

    def _deliver(self, send: MemoryObjectSendStream[T], item: T) -> None:
        unread = send.statistics().current_buffer_used
        if send in self._stalled:
            if unread:
                return  # the resync item is still unread: reading again covers this one
            self._stalled.discard(send)
        if unread < self._backlog:
            send.send_nowait(item)
        elif self._resync is not None:
            send.send_nowait(self._resync)  # the one slot past the backlog
            self._stalled.add(send)
        else:
            self._lagged.add(send)  # its reader stopped reading: end its stream
            self._drop(send)

    def _drop(self, send: MemoryObjectSendStream[T]) -> None:
        self._subscribers.discard(send)
        self._stalled.discard(send)
        send.close()

    def close(self) -> None:
        """End every subscriber's stream; later subscribers get only the replay."""
        self.closed = True
        listeners, self._listeners = self._listeners, {}
        for _, on_close in listeners.values():
            _call_safely(on_close)
        for send in self._subscribers:
            send.close()
        self._subscribers.clear()
        self._stalled.clear()

    def open(self) -> tuple[MemoryObjectSendStream[T], MemoryObjectReceiveStream[T]]:
        """A new subscription: the latest item first (if replayed), then every new one.

        The reader must call `check(send)` when its stream ends (`subscribe`
        does), to learn whether it ended by lagging.
        """
        send, receive = anyio.create_memory_object_stream[T](self._backlog + 1)
        if self._replay_last and self.last is not None:
            send.send_nowait(self.last)
        if self.closed:
            send.close()
        else:
            self._subscribers.add(send)
        return send, receive

    def check(self, send: MemoryObjectSendStream[T]) -> None:
        """Raise `SubscriberLagged` if this subscription was ended for falling behind."""
        if send in self._lagged:
            self._lagged.discard(send)
            raise SubscriberLagged(self._backlog)

    def unsubscribe(self, send: MemoryObjectSendStream[T]) -> None:
        self._drop(send)
        self._lagged.discard(send)

    async def subscribe(self) -> AsyncIterator[T]:
        """Iterate a new subscription until the broadcast closes or the caller leaves.

        Raises `SubscriberLagged`, after the items buffered before, if the
        caller fell `backlog` items behind.
        """
        send, receive = self.open()
        try:
            with receive:
                async for item in receive:
                    yield item
            self.check(send)
        finally:
            with suppress(Exception):
                self.unsubscribe(send)


def _call_safely(callback: Callable[..., None], *args: object) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("broadcast listener %r failed", callback)
