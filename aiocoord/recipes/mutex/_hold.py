"""Holding the mutex: the hold, and the table of what loses it.

A `Hold` is one acquisition from the moment our node is first until it is
released: its fencing token and the `Tenure` that ``async with mutex(...)``
bodies run under.  `loss_reason` is the pure table from a connection state seen
after the grant to the reason the hold is lost (or None).  While a body runs,
`Hold.keep` applies it: it follows the session's connection states where they
happen (as the leader latch does, `ZkClient.follow_states`) and ends the
tenure the moment the lock is lost, which cancels the body.  A hold costs no
task, and the block may be left from another task than the one that entered it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ...errors import LockLost
from ...zk import ZkClient
from ...zk.states import ConnectionEvent, ConnectionState
from .._queue import CreatedNode
from .._tenure import Tenure

__all__ = ("Hold", "loss_reason")

log = logging.getLogger("aiocoord.recipes.mutex")


class Hold:
    """One acquisition while held.  `token` is the fencing token: our node's czxid.

    Every later holder's token is larger, since its node was created later.
    `lost` is None while the hold lasts, then the reason; `tenure` is what the
    bodies of ``async with mutex(...)`` run under.
    """

    __slots__ = ("_unfollow", "granted_at", "node", "recipe", "tenure", "token")

    def __init__(
        self,
        node: CreatedNode,
        path: str,
        recipe: str = "mutex",
        *,
        granted_at: float | None = None,
    ) -> None:
        self.node = node
        self.recipe = recipe  # names the lock in log lines
        self.token = node.czxid
        self.tenure = Tenure(path, LockLost)
        # Connection events up to the grant are history (default: now, for a grant just made).
        self.granted_at = time.monotonic() if granted_at is None else granted_at
        self._unfollow: Callable[[], None] = lambda: None  # see `keep`

    @property
    def lost(self) -> str | None:
        return self.tenure.lost

    def end(self, reason: str) -> None:
        """The lock is lost (or released): cancel the bodies; the first reason wins."""
        if self.tenure.active and reason != "released":
            log.warning(
                "%s %s lost (token 0x%x): %s", self.recipe, self.tenure.path, self.token, reason
            )
        self.tenure.end(reason)

    def keep(self, client: ZkClient, *, lose_on_suspend: bool) -> None:
        """End the hold when a connection state after the grant loses it (`loss_reason`),
        or the coordinator closes, until `drop` (synchronous: no event is missed)."""

        def on_event(event: ConnectionEvent) -> None:
            if event.at > self.granted_at:  # earlier events are history to this hold
                owner = self.node.owner
                lost = loss_reason(
                    event.state, event.session_id, owner=owner, lose_on_suspend=lose_on_suspend
                )
                if lost is not None:
                    self.end(lost)

        self._unfollow = client.session.follow_states(
            on_event, lambda: self.end("coordinator closed")
        )

    def drop(self) -> None:
        """Stop following the connection states (released; safe to call twice)."""
        self._unfollow()

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
