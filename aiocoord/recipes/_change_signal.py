"""`ChangeSignal`: wake whoever waits for a change, as often as it changes.

Recipes keep state that several tasks wait on (leadership granted, a
connection state, a worker list).  Each change fires the signal; a waiter
takes the event for the next change first, then looks at the state.
"""

from __future__ import annotations

import asyncio

__all__ = ("ChangeSignal",)


class ChangeSignal:
    """Fires many times; `event()` is what the next `fire()` sets (made only for a waiter).

    Take the event before looking at the state it guards, then wait on it: a
    change in between has set it already.  A plain `asyncio.Event`: making an
    `anyio.Event` looks up the async backend each time, and a hand-over makes
    a few per task.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def event(self) -> asyncio.Event:
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def fire(self) -> None:
        event = self._event
        if event is not None:
            self._event = None
            event.set()
