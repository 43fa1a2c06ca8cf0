"""Small test helpers: record a coordinator's connection events and wait for one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc

from aiocoord import ConnectionEvent, ConnectionState, Coordinator


class EventRecorder:
    """Every connection event of one coordinator, in order, as they arrive."""

    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self.events: list[ConnectionEvent] = []
        self._changed = anyio.Event()

    @property
    def states(self) -> list[ConnectionState]:
        return [e.state for e in self.events]

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        stream = self.coord.connection_events()
        self._add(await stream.__anext__())
        task_status.started()
        async for event in stream:
            self._add(event)

    def _add(self, event: ConnectionEvent) -> None:
        self.events.append(event)
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(
        self, state: ConnectionState, *, after: int = 0, timeout: float = 10.0
    ) -> ConnectionEvent:
        """The first event in `state` at index >= `after`; fails after `timeout` seconds."""
        with anyio.fail_after(timeout):
            while True:
                for event in self.events[after:]:
                    if event.state is state:
                        return event
                await self._changed.wait()

    def mark(self) -> int:
        return len(self.events)


@asynccontextmanager
async def recording(coord: Coordinator) -> AsyncIterator[EventRecorder]:
    """Record `coord`'s events for the duration of the block."""
    recorder = EventRecorder(coord)
    async with anyio.create_task_group() as tg:
        await tg.start(recorder._run)
        yield recorder
        tg.cancel_scope.cancel()


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, every: float = 0.05
) -> None:
    """Poll an async condition until true (for state only visible by asking the server)."""
    with anyio.fail_after(timeout):
        while not await check():  # noqa: ASYNC110 - server state has no local event
            await anyio.sleep(every)
