"""The leader watch: one persistent recursive watch on ``<root>/leaders``, held while needed.

Every event on a leader node is handed to the engine (which routes it to its
task and to `changes()` subscribers) from the callback that reads the
notification, so one burst of deletions queues its creates together with no
task to wake.  A worker that leads nothing, is chosen for nothing and has no
`changes()` reader drops the watch (an old version during an upgrade: it
would only add to every hand-over's notifications, to it and to the server)
and adds it again when that changes; events were missed meanwhile, so the
engine then looks at the leader nodes as after a reconnection.  Leadership
starts only while the watch is `live`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc

from aiocoord.errors import ConnectionLostError, CoordinatorClosedError
from aiocoord.session import Coordinator
from aiocoord.zk import PersistentWatch, WatchedEvent

from .._change_signal import ChangeSignal
from ._slot import RETRY_DELAY

__all__ = ("LeaderWatch",)

log = logging.getLogger("aiocoord.recipes.task_leadership")


def _ignore(_event: WatchedEvent) -> None:
    """The callback of a muted watch."""


class LeaderWatch:
    """The watch on the leader nodes under `path`; see the module docs.

    `route` gets every event; `needed()` says whether the watch must stay
    (asked again after each `review()`); `look_again` runs when the watch is
    back after a pause, before it counts as live.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        route: Callable[[WatchedEvent], None],
        needed: Callable[[], bool],
        look_again: Callable[[], Awaitable[None]],
    ) -> None:
        self._coord = coord
        self._path = path
        self._route = route
        self._needed = needed
        self._look_again = look_again
        self.live = False  # registered and nothing was missed
        self._pw: PersistentWatch | None = None  # while its events are routed
        self._muted = False  # its events are ignored from now on: it must go
        self._review = ChangeSignal()  # fires when the watch may have become (un)needed

    def review(self) -> None:
        """Something `needed()` depends on changed: look again."""
        self._review.fire()

    def mute(self) -> None:
        """Ignore the watch's events from now on if it is no longer needed.

        An old leader that has just handed everything over would otherwise route
        every event of the hand-over (the other old leaders' deletions, the new
        leader's creations) until the server has processed the watch's removal,
        in front of its own deletions.  A muted watch is dropped and, if needed
        again, added again with a look at the leader nodes (events were missed).
        """
        pw = self._pw
        if pw is not None and not self._muted and not self._needed():
            self._muted = True
            self.live = False
            pw.set_callback(_ignore)
            self.review()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Hold the watch while needed, until the coordinator closes; started once it is added."""
        started = False
        while True:
            review = self._review.event()
            if started and not self._needed():
                await review.wait()
                continue
            try:
                async with self._coord.client.watch(self._path, recursive=True) as pw:
                    if started:
                        await self._look_again()
                    else:
                        started = True
                        task_status.started()
                    self.live = True
                    if await self._follow(pw):
                        return  # the coordinator closed
            except CoordinatorClosedError:
                return  # closed while adding the watch again
            except ConnectionLostError as exc:
                log.debug("watching %s: %s", self._path, exc)
                await self._coord.client.session.wait_connected()
                await anyio.sleep(RETRY_DELAY)
            finally:
                self.live = False

    async def _follow(self, pw: PersistentWatch) -> bool:
        """Route events until the watch is no longer needed (False) or the stream ends (True).

        Events are routed where their notifications are read; the stream only
        tells when the watch ends.
        """
        ended = False
        self._pw, self._muted = pw, False
        try:
            async with anyio.create_task_group() as tg:

                async def follow() -> None:
                    nonlocal ended
                    pw.set_callback(self._route)
                    async for event in pw.events:  # nothing comes here but the end
                        self._route(event)
                    ended = True
                    tg.cancel_scope.cancel()

                tg.start_soon(follow)
                while True:
                    review = self._review.event()
                    if self._muted or not self._needed():
                        self.live = False  # from now on, before the server forgets it
                        tg.cancel_scope.cancel()
                        break
                    await review.wait()
        finally:
            self._pw = None
        return ended
