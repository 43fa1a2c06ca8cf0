"""Holding the mutex: the hold, the table of what loses it, and the keeper that ends it.

A `Hold` is one acquisition from the moment our node is first until it is
released: its fencing token and the `Tenure` that ``async with mutex(...)``
bodies run under.  `loss_reason` is the pure table from a connection state seen
after the grant to the reason the hold is lost (or None).  `Keeper` applies it
while a body runs: it follows the coordinator's connection states and ends
the tenure the moment the lock is lost, which cancels the body.  One keeper
serves every hold on a coordinator, as a chore of its session that ends when
the coordinator closes: a hold costs no task, and the block may be left from
another task than the one that entered it.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import ClassVar

import anyio

from ...errors import CoordinatorClosedError, LockLost, SubscriberLagged
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.states import ConnectionEvent, ConnectionState
from .._sequential import CreatedNode
from .._tenure import Tenure

__all__ = ("Hold", "Keeper", "loss_reason")

log = logging.getLogger("aiocoord.recipes.mutex")


class Hold:
    """One acquisition while held.  `token` is the fencing token: our node's czxid.

    Every later holder's token is larger, since its node was created later.
    `lost` is None while the hold lasts, then the reason; `tenure` is what the
    bodies of ``async with mutex(...)`` run under.
    """

    __slots__ = ("granted_at", "node", "tenure", "token")

    def __init__(self, node: CreatedNode, path: str) -> None:
        self.node = node
        self.token = node.czxid
        self.tenure = Tenure(path, LockLost)
        self.granted_at = time.monotonic()  # connection events up to this moment are history

    @property
    def lost(self) -> str | None:
        return self.tenure.lost

    def end(self, reason: str) -> None:
        """The lock is lost (or released): cancel the bodies; the first reason wins."""
        if self.tenure.active and reason != "released":
            log.warning("mutex %s lost (token 0x%x): %s", self.tenure.path, self.token, reason)
        self.tenure.end(reason)

    def __repr__(self) -> str:
        state = "held" if self.lost is None else f"lost: {self.lost}"
        return f"<Hold token=0x{self.token:x} {state}>"


def loss_reason(
    state: ConnectionState, session_id: int | None, *, owner: int, lose_on_suspend: bool
) -> str | None:
    """Why a connection state seen after the grant loses the hold; None if it keeps it.

    LOST always loses; SUSPENDED and READ_ONLY lose unless `lose_on_suspend`
    is False (Curator's session error policy: keep until LOST).  Being
    connected again means the connection was lost since the grant: a new
    session has no node of ours; the same session keeps it only without
    `lose_on_suspend`.
    """
    if state is ConnectionState.LOST:
        return "session lost"
    if state in (ConnectionState.SUSPENDED, ConnectionState.READ_ONLY):
        return "suspended" if lose_on_suspend else None
    if session_id != owner:
        return "session lost"
    return "suspended" if lose_on_suspend else None


class Keeper:
    """Keeps every hold of ``async with mutex(...)`` on one coordinator; see the module docstring.

    One per coordinator, started by the first hold as a chore of its session
    (the session's `start_chore`) and ending when the coordinator closes, so that a
    hold costs no task of its own: `keep` and `drop` only register it.
    Connection events from before a hold's grant are history to that hold
    and ignored, so the keeper needs no more than the latest state when it
    subscribes.
    """

    _running: ClassVar[weakref.WeakKeyDictionary[ZkClient, Keeper]] = weakref.WeakKeyDictionary()

    def __init__(self, coord: Coordinator) -> None:
        self._coord = coord
        self._holds: dict[Hold, bool] = {}  # hold -> lose_on_suspend
        self._ended = False

    @classmethod
    def of(cls, coord: Coordinator) -> Keeper:
        """The keeper of `coord`, started if need be; `CoordinatorClosedError` if it is closed."""
        keeper = cls._running.get(coord.client)
        if keeper is None or keeper._ended:
            keeper = cls(coord)
            if not coord.client._session.start_chore(keeper._follow, f"mutex keeper of {coord}"):
                raise CoordinatorClosedError(f"{coord!r} is not running")
            cls._running[coord.client] = keeper
        return keeper

    def keep(self, hold: Hold, *, lose_on_suspend: bool) -> None:
        """Keep `hold` from now on (synchronous: no event after its grant is missed)."""
        self._holds[hold] = lose_on_suspend

    def drop(self, hold: Hold) -> None:
        """Stop keeping `hold` (released)."""
        self._holds.pop(hold, None)

    async def _follow(self) -> None:
        try:
            while True:
                stream = self._coord.connection_events()
                try:
                    async for event in stream:  # the current state first, then each change
                        self._on_connection(event)
                    return  # the coordinator closed
                except SubscriberLagged:
                    continue  # subscribe again: the current state says what was missed
                finally:
                    aclose: Callable[[], Awaitable[None]] | None = getattr(stream, "aclose", None)
                    if aclose is not None:
                        with anyio.CancelScope(shield=True):
                            await aclose()
        finally:
            self._ended = True
            for hold in list(self._holds):
                hold.end("coordinator closed")

    def _on_connection(self, event: ConnectionEvent) -> None:
        for hold, lose_on_suspend in list(self._holds.items()):
            if event.at <= hold.granted_at:
                continue
            owner = hold.node.owner
            reason = loss_reason(
                event.state, event.session_id, owner=owner, lose_on_suspend=lose_on_suspend
            )
            if reason is not None:
                hold.end(reason)
