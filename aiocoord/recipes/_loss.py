"""The one loss rule: which connection state ends a held right, decided where it happens.

Every recipe that holds a right (a latch's or a selector's term, a mutex,
read/write lock or semaphore hold, a task's leadership, a cron job through
task leadership, a CAS lock's hold) asks this module, and only this module,
whether a connection state seen after the grant ends it.  `loss_reason` is
the pure table; `LossWatch` applies it to one right, synchronously, from the
session's state callback (``follow_states``): the right ends in the same
callback that reports the state, before any task (the holder's body
included) runs again.

A recipe's `LossPolicy` says how SUSPENDED (and READ_ONLY: no write can
succeed) is treated: ``STRICT`` (``lose_on_suspend=True``, Curator's standard
policy) ends the right on SUSPENDED, READ_ONLY, LOST or a new session;
``LOST_ONLY`` (``lose_on_suspend=False``, Curator's
``SessionConnectionStateErrorPolicy``) on LOST or a new session only.

A deadline policy (keep the right through SUSPENDED until a stated fraction
of the session's provable life, then end it unless RECONNECTED on the same
session) is one more member of `LossPolicy` and one more branch of
`LossWatch.on_event`: on SUSPENDED it arms a loop timer (``call_at``, no task)
that ends the right, and RECONNECTED on the owner's session cancels it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable

from ..zk.states import ConnectionEvent, ConnectionState

__all__ = ("FollowStates", "LossPolicy", "LossWatch", "loss_reason")

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


class LossPolicy(enum.Enum):
    """How a held right treats SUSPENDED; see the module docstring."""

    STRICT = "strict"
    LOST_ONLY = "lost_only"

    @classmethod
    def of(cls, lose_on_suspend: bool) -> LossPolicy:
        """The policy a recipe's ``lose_on_suspend`` argument names."""
        return cls.STRICT if lose_on_suspend else cls.LOST_ONLY

    def keeps(self, state: ConnectionState | None) -> bool:
        """Whether a right held since before `state` (None: closed) may still be held in it
        (the session is the owner's: the caller checks that)."""
        if self is LossPolicy.STRICT:
            return state in _CONNECTED
        return state not in (None, ConnectionState.LOST)


def loss_reason(
    state: ConnectionState, session_id: int | None, *, owner: int | None, lose_on_suspend: bool
) -> str | None:
    """Why a connection state seen after the grant ends the right; None if it keeps it.

    `owner` is the session that holds the right (its node's ephemeral owner).
    LOST always ends it; SUSPENDED and READ_ONLY end it unless
    `lose_on_suspend` is False.  Being connected again means the connection
    was lost since the grant: a new session holds nothing of ours; the same
    session keeps the right only without `lose_on_suspend`.
    """
    if state is ConnectionState.LOST:
        return "session lost"
    if state in (ConnectionState.SUSPENDED, ConnectionState.READ_ONLY):
        return "suspended" if lose_on_suspend else None
    if session_id != owner:
        return "session lost"
    return "suspended" if lose_on_suspend else None


FollowStates = Callable[[Callable[[ConnectionEvent], None], Callable[[], None]], Callable[[], None]]
"""A session's ``follow_states``: ``(on_event, on_close) -> stop``."""


class LossWatch:
    """One held right's loss rule: calls `end(reason)` once a connection state ends it.

    `owner` is the session holding the right; with `follow_owner`, a holder
    whose rights are always the current session's (task leadership: each right
    is checked against its own node's session when taken), it is the session
    of the latest connected state, history included.  `granted_at`
    (monotonic, default now) makes every state before it history.  Feed it states with `on_event`
    from a state callback of your own, or let it `follow` the session's
    states; `closed` is the reason given when the coordinator closes.  `end`
    is called where the state is reported (no await, no task); it may be
    called more than once: the recipe's first reason wins.
    """

    __slots__ = ("_tracking", "_unfollow", "closed", "end", "granted_at", "owner", "policy")

    def __init__(
        self,
        policy: LossPolicy,
        owner: int | None,
        end: Callable[[str], None],
        *,
        granted_at: float | None = None,
        closed: str = "coordinator closed",
        follow_owner: bool = False,
    ) -> None:
        self.policy = policy
        self.owner = owner
        self.end = end
        self.granted_at = time.monotonic() if granted_at is None else granted_at
        self.closed = closed
        self._tracking = follow_owner
        self._unfollow: Callable[[], None] = _nothing

    def on_event(self, event: ConnectionEvent) -> None:
        """A connection state was reported: end the right now if the rule says so."""
        if event.at > self.granted_at:  # earlier states are history to this right
            strict = self.policy is LossPolicy.STRICT
            owner = self.owner
            reason = loss_reason(event.state, event.session_id, owner=owner, lose_on_suspend=strict)
            if reason is not None:
                self.end(reason)
        if self._tracking and event.state in _CONNECTED:
            self.owner = event.session_id

    def on_closed(self) -> None:
        """The coordinator closed: the right ends."""
        self.end(self.closed)

    def follow(self, follow_states: FollowStates) -> LossWatch:
        """Follow a session's states (its ``follow_states``) until `drop`; returns self."""
        self._unfollow = follow_states(self.on_event, self.on_closed)
        return self

    def drop(self) -> None:
        """Stop following (the right was given up; safe to call twice)."""
        unfollow, self._unfollow = self._unfollow, _nothing
        unfollow()


def _nothing() -> None:
    pass
