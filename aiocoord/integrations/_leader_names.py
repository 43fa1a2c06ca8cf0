"""Who leads each latch path, known without a request when `require_leader` answers 503.

A latch knows the leader's id for free only while it leads or while its node
is just behind the leader's.  A follower further back reads the leader
(`LeaderLatch.leader`) and sets a watch on the leader's node, and reads again
when that node goes, its own election state changes or the connection state
does: so every follower names the current leader at once, from memory.  The
id is not given while the session is away (it may be stale then).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import anyio
import anyio.lowlevel

from ..errors import CoordError, SubscriberLagged
from ..recipes.leader_latch import ElectionState, LeaderLatch
from ..session import Coordinator
from ..zk import EventType
from ..zk.paths import join
from ..zk.states import ConnectionState

__all__ = ("LeaderNames",)

log = logging.getLogger("aiocoord.integrations.fastapi")

_DETERMINED = (ElectionState.ELECTED, ElectionState.FOLLOWING)
_USABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED, ConnectionState.READ_ONLY)


class LeaderNames:
    """The leader's id per latch path, kept current by one task per latch (`follow`)."""

    def __init__(self, coord: Coordinator) -> None:
        self._coord = coord
        self._names: dict[str, str] = {}
        self._latches: dict[str, LeaderLatch] = {}

    def leader(self, path: str) -> str | None:
        """The leader of `path` as known here with no request; None while unknown or away."""
        latch = self._latches.get(path)
        if latch is None or self._coord.state not in _USABLE:
            return None
        known = latch.known_leader  # ours, or the one just ahead: exact and free
        if known is not None or latch.state is not ElectionState.FOLLOWING:
            return known
        return self._names.get(path)

    async def follow(self, latch: LeaderLatch, known: anyio.Event) -> None:
        """Keep `latch`'s leader known; set `known` once it is (or we lead).

        Runs until cancelled.  A read that fails (ZooKeeper away) leaves the
        id unknown until the next change of the latch's or connection's state.
        """
        path = latch.path
        self._latches[path] = latch
        changed = anyio.Event()

        async def wake_on(stream: Callable[[], AsyncIterator[object]]) -> None:
            while True:
                try:
                    async for _ in stream():
                        changed.set()
                    return  # the stream ended: the latch or the coordinator was closed
                except SubscriberLagged:  # behind: subscribe again, from the current state
                    changed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wake_on, latch.changes)
            tg.start_soon(wake_on, self._coord.connection_events)
            while True:
                changed = anyio.Event()  # what happens from now on starts another round
                async with anyio.create_task_group() as round_:
                    if latch.state is ElectionState.FOLLOWING and latch.known_leader is None:
                        # The id read last stays while this round reads again: it goes
                        # only when its node does, or a read finds another (or none).
                        gone = await self._learn(latch)
                        if gone is not None:
                            round_.start_soon(_cancel_after, gone, round_.cancel_scope)
                    else:
                        self._names.pop(path, None)  # the latch knows (or nobody does)
                    if latch.state in _DETERMINED and self.leader(path) is not None:
                        known.set()
                    round_.start_soon(_cancel_after, changed.wait, round_.cancel_scope)

    async def _learn(self, latch: LeaderLatch) -> Callable[[], Awaitable[object]] | None:
        """Read the leader and watch its node: what waits until that node goes (None: unread)."""
        client, path = self._coord.client, latch.path
        try:
            with anyio.fail_after(client.session.timing.request_timeout):
                found = await latch.leader()
                if found is None:
                    self._names.pop(path, None)
                    return None
                stat, watch = await client.exists_watch(join(path, found.node))
        except (CoordError, TimeoutError) as exc:
            log.debug("leader of %s not read: %s", path, exc)
            self._names.pop(path, None)
            return None
        if stat is None:  # gone already: read again at once
            client.remove_watch(watch)
            self._names.pop(path, None)
            return anyio.lowlevel.checkpoint
        self._names[path] = found.id

        async def until_gone() -> object:
            try:
                event = await watch.wait()
                if event.type is not EventType.DATA_CHANGED:  # the node (or session) went
                    self._names.pop(path, None)  # that leader's id is stale
                return event
            finally:
                client.remove_watch(watch)  # given up: no watch left behind

        return until_gone


async def _cancel_after(wait: Callable[[], Awaitable[object]], scope: anyio.CancelScope) -> None:
    await wait()
    scope.cancel()
