"""Holding the mutex: the hold, kept under the one loss rule.

A `Hold` is one acquisition from the moment our node is first until it is
released: its fencing token and the `Tenure` that ``async with mutex(...)``
bodies run under.  While a body runs, `Hold.keep` applies the recipes' one
loss rule (`_loss.LossWatch`): it follows the session's connection states
where they happen and ends the tenure the moment the lock is lost, which
cancels the body.  A hold costs no task, and the block may be left from
another task than the one that entered it.
"""

from __future__ import annotations

import logging
import time

from ..._checks import check_coordinator, check_layout, check_open, check_timeout
from ...errors import InvalidPathError, LockLost
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import validate_path
from .._loss import LossPolicy, LossWatch, check_lose_on_suspend, loss_reason
from .._queue import CreatedNode, check_participant_id, default_participant_id, may_take
from .._tenure import Tenure

__all__ = ("Contender", "Hold", "loss_reason")  # loss_reason: the rule's table, for its tests

log = logging.getLogger("aiocoord.recipes.mutex")


class Contender:
    """What the mutex (and its read and write locks) and the semaphore share: the checks of
    their common arguments, who contends where, and the coordinator being open."""

    _recipe = "mutex"  # names the lock in log lines and errors

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        participant_id: str | None,
        lose_on_suspend: bool | None,
        timeout: float | None,
        layout: str,
    ) -> None:
        check_coordinator(coord)
        validate_path(path)
        self._layout = check_layout(layout)
        if path == "/":
            raise InvalidPathError(path, f"a {self._recipe} needs a node of its own, not the root")
        check_lose_on_suspend(lose_on_suspend)
        self._coord = coord
        self._client: ZkClient = coord.client
        self._path = path
        pid = default_participant_id() if participant_id is None else participant_id
        self._id = check_participant_id(pid)
        self._data = self._id.encode("utf-8")
        self._lose_on_suspend = lose_on_suspend
        self._timeout = check_timeout(timeout)

    @property
    def path(self) -> str:
        return self._path

    @property
    def participant_id(self) -> str:
        return self._id

    @property
    def layout(self) -> str:
        """The node layout: ``"curator"`` or ``"kazoo"``."""
        return self._layout

    def _check_open(self) -> None:
        check_open(self._coord, f"{self._recipe} {self._path}")


class Hold:
    """One acquisition while held.  `token` is the fencing token: our node's czxid.

    Every later holder's token is larger, since its node was created later.
    `lost` is None while the hold lasts, then the reason; `tenure` is what the
    bodies of ``async with mutex(...)`` run under.
    """

    __slots__ = ("_watch", "granted_at", "node", "recipe", "tenure", "token")

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
        self._watch: LossWatch | None = None  # see `keep`

    @property
    def lost(self) -> str | None:
        return self.tenure.lost

    def held_on(self, coord: Coordinator, lose_on_suspend: bool | None) -> bool:
        """Whether the right is ours right now (no request): not lost, and connected (as
        `lose_on_suspend` counts it) on the session that created our node."""
        if self.lost is not None:
            return False
        connected = LossPolicy.of(lose_on_suspend).keeps(coord.state)
        sid = coord.client.session.session_id
        return may_take(owner=self.node.owner, session_id=sid, connected=connected, node_gone=False)

    def end(self, reason: str) -> None:
        """The lock is lost (or released): cancel the bodies; the first reason wins."""
        if self.tenure.active and reason != "released":
            log.warning(
                "%s %s lost (token 0x%x): %s", self.recipe, self.tenure.path, self.token, reason
            )
        self.tenure.end(reason)

    def keep(self, client: ZkClient, *, lose_on_suspend: bool | None) -> None:
        """End the hold when a connection state after the grant loses it (the one loss
        rule, `_loss`), or the coordinator closes, until `drop` (synchronous: no event
        is missed)."""
        watch = LossWatch(
            LossPolicy.of(lose_on_suspend),
            self.node.owner,
            self.end,
            granted_at=self.granted_at,
            session=client.session,
        )
        self._watch = watch.follow(client.session.follow_states)

    def drop(self) -> None:
        """Stop following the connection states (released; safe to call twice)."""
        if self._watch is not None:
            self._watch.drop()

    def __repr__(self) -> str:
        state = "held" if self.lost is None else f"lost: {self.lost}"
        return f"<Hold token=0x{self.token:x} {state}>"
