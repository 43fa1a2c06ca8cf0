"""`DoubleBarrier` and `double_barrier()`: start together once N are in, finish once all are out.

Curator's ``DistributedDoubleBarrier`` (the ZooKeeper recipe).  Node layout,
Curator's: under `path`, one ephemeral child per participant (its
`participant_id`; Curator names its own with a random UUID) and, once
`members` children were seen, a persistent ``ready`` child that lets every
participant in (and later ones at once).  Leaving deletes one's child and
waits until no participant child is left, then deletes ``ready``; Java
``DistributedDoubleBarrier`` participants on the same path enter and leave
with Python ones.

The children are followed by a `TreeCache` of depth 1 (one persistent
recursive watch) for as long as the barrier is held.

Failure handling: while SUSPENDED the waits go on, on the last state read.
A participant child lost with its session while entering is created again;
lost while the body runs it is simply gone (Curator's leave copes the same
way), and leaving then waits only for the others.  Entering and leaving
are bounded by the caller (``anyio.fail_after``, or `enter(timeout)` and
`leave(timeout)`); cancelled, the child is deleted (shielded, bounded) and
the watch removed.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing, suppress
from typing import Final, cast

import anyio

from ..._checks import check_coordinator, check_int, check_timeout
from ..._lifecycle import Service
from ...errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    NodeExistsError,
    NoNodeError,
)
from ...session import Coordinator
from ...zk import CreateMode
from ...zk.paths import join, validate_path
from .._participant import Participant
from ..cache import CacheEvent, TreeCache, tree_cache

__all__ = ("READY", "DoubleBarrier", "double_barrier")

READY: Final = "ready"
"""The child that says the barrier is full (Curator's ``READY_NODE``)."""


class DoubleBarrier(Service):
    """A double barrier at `path` for `members` participants (Curator's ``DistributedDoubleBarrier``).

    ``async with`` enters, blocking until `members` participants are in
    (bound it with `anyio.fail_after`); leaving deletes this participant's
    node and blocks until every participant has left.  `members` is a
    threshold, not a limit: more may enter.  Raises `InvalidPathError`,
    `ConfigError` or `TypeError` for bad arguments.
    """

    def __init__(
        self, coord: Coordinator, path: str, *, members: int, participant_id: str | None = None
    ) -> None:
        self._coord = check_coordinator(coord)
        self._path = validate_path(path)
        self._members = check_int("members", members, least=1)
        if participant_id is None:
            participant_id = str(uuid.uuid4())
        if not isinstance(participant_id, str):
            raise TypeError(f"participant_id must be a str, not {type(participant_id).__name__}")
        if not participant_id or "/" in participant_id or participant_id in (READY, ".", ".."):
            raise ConfigError(
                "participant_id",
                f"must be a node name other than {READY!r}, not {participant_id!r}",
            )
        self._id = participant_id
        self._node = join(self._path, participant_id)
        self._ready = join(self._path, READY)
        self._cache: TreeCache | None = None
        self._entered = False

    @property
    def path(self) -> str:
        return self._path

    @property
    def participant_id(self) -> str:
        return self._id

    @property
    def entered(self) -> bool:
        return self._entered

    def participants(self) -> list[Participant]:
        """The participants in the barrier as last seen, sorted by id, each `holds` (is in);
        [] when not entered.  Needs no request: the barrier's cache has them."""
        cache = self._cache
        names = [] if cache is None else cache.children(self._path)
        return [Participant(n, True, n) for n in names if n != READY]

    # --- entering ----------------------------------------------------------------------------

    async def start(self) -> None:
        """`enter()` with no bound: ``async with`` calls it."""
        await self.enter()

    async def aclose(self) -> None:
        """`leave()` with no bound: ``async with`` calls it."""
        await self.leave()

    async def enter(self, timeout: float | None = None) -> bool:
        """Join, and block until `members` participants are in; True, or False after `timeout`.

        On False or cancellation this participant's node is deleted and the
        watch removed: it has not entered.  Raises `ConnectionLostError` if
        the node cannot be created within the request timeout.
        """
        bound = check_timeout(timeout)
        if self._entered:
            raise ConfigError("enter", f"{self._node} has entered already")
        client = self._coord.client
        cache = self._cache = tree_cache(self._coord, self._path, max_depth=1)
        done = False
        try:
            with anyio.move_on_after(_unbounded(bound)):
                await cache.start()
                ready_before = await client.exists(self._ready) is not None
                await self._join()
                if not ready_before:
                    await self._until(self._full)
                done = True
        finally:
            if not done:
                await self._quit()
        self._entered = done
        return done

    async def _join(self) -> None:
        try:
            await self._coord.client.create(
                self._node, mode=CreateMode.EPHEMERAL, make_parents=True
            )
        except NodeExistsError:
            stat = await self._coord.client.exists(self._node)
            if stat is not None and stat.ephemeral_owner != self._coord.client.session.session_id:
                raise ConfigError(
                    "participant_id", f"{self._node} is held by another session"
                ) from None

    async def _full(self) -> bool:
        """Whether the barrier lets us in; creates ``ready`` (or our lost node) as needed."""
        cache = self._cache
        assert cache is not None
        kids = cache.children(self._path)
        if READY in kids:
            return True
        if not cache.stale and self._id not in kids:
            await self._join()  # lost with a session while waiting to enter
            return False
        if len(kids) >= self._members:
            with suppress(NodeExistsError):
                await self._coord.client.create(self._ready)
            return True
        return False

    # --- leaving -----------------------------------------------------------------------------

    async def leave(self, timeout: float | None = None) -> bool:
        """Delete this participant's node and block until every participant has left.

        True, or False if `timeout` seconds passed first (the node is
        deleted either way, and the watch removed).  Nothing if not entered.
        """
        bound = check_timeout(timeout)
        if self._cache is None:
            return True
        self._entered = False
        left = False
        try:
            with anyio.move_on_after(_unbounded(bound)):
                await self._delete(self._node)
                await self._until(self._empty)
                await self._delete(self._ready)
                left = True
        finally:
            await self._quit()
        return left

    async def _empty(self) -> bool:
        return not self.participants() and not (self._cache is None or self._cache.stale)

    async def _quit(self) -> None:
        """Delete our node and remove the watch: shielded and bounded."""
        cache, self._cache = self._cache, None
        with anyio.CancelScope(shield=True):
            with (
                anyio.move_on_after(self._coord.client.session.timing.request_timeout),
                suppress(ConnectionLostError),  # an ephemeral node goes with its session anyway
            ):
                await self._delete(self._node)
            if cache is not None:
                await cache.aclose()

    async def _delete(self, path: str) -> None:
        try:
            await self._coord.client.delete(path)
        except NoNodeError:
            pass
        except ConnectionLostError:
            if path == self._node:
                raise
            # `ready` is only tidied: the next participant to leave deletes it too.

    async def _until(self, step: Callable[[], Awaitable[bool]]) -> None:
        """Run `step` now and after each change the cache sees, until it says True."""
        cache = self._cache
        assert cache is not None
        events = cast(AsyncGenerator[CacheEvent, None], cache.events())
        async with aclosing(events):
            while not await step():
                try:
                    await anext(events)
                except StopAsyncIteration:
                    raise CoordinatorClosedError(f"the barrier {self._path} was closed") from None

    def __repr__(self) -> str:
        state = "ENTERED" if self._entered else "OUT"
        shown = f"{len(self.participants())}/{self._members}"
        return f"<DoubleBarrier {self._path} id={self._id} {state} {shown}>"


def _unbounded(bound: float | None) -> float:
    return math.inf if bound is None else bound


def double_barrier(
    coord: Coordinator, path: str, *, members: int, participant_id: str | None = None
) -> DoubleBarrier:
    """A `DoubleBarrier` at `path`, to use as ``async with``: in together, out together."""
    return DoubleBarrier(coord, path, members=members, participant_id=participant_id)
