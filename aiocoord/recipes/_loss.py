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
``SessionConnectionStateErrorPolicy``) on LOST or a new session only;
``DEADLINE`` (the default: ``lose_on_suspend`` not given) keeps the right
through SUSPENDED and READ_ONLY while the session provably lives and ends it
at ``session.answered_at + KEEP_FRACTION * session timeout`` unless
RECONNECTED on the owner's session first.  The server cannot expire the
session, hence delete the right's ephemeral node, before ``answered_at +
session timeout`` (it heard of the session no earlier than that request was
sent), so a right ended at the deadline ends a third of the session timeout
before any rival can be granted it; docs/concepts.md ("Rights through
SUSPENDED") gives the whole argument.  The deadline is one loop timer per
session (`SessionPort.call_at`, shared by every right it suspends), armed in
the state callback: no task, no await.  When it rings the deadline is read
again (a reconnect under way may have had its handshake answered) and the
right ends if it has passed.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..zk.states import ConnectionEvent, ConnectionState

if TYPE_CHECKING:
    from ..zk.port import SessionPort

__all__ = (
    "KEEP_FRACTION",
    "FollowStates",
    "LossPolicy",
    "LossWatch",
    "check_lose_on_suspend",
    "loss_reason",
    "suspended_deadline",
)

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
_SUSPENDED = (ConnectionState.SUSPENDED, ConnectionState.READ_ONLY)

KEEP_FRACTION = 2 / 3
"""How much of the session's provable life (from `SessionPort.answered_at`) a
suspended right is kept under ``DEADLINE``: it ends at least a third of the
session timeout before the server could expire the session (a tenth is the
promise; the rest is room for a stalled loop)."""


class LossPolicy(enum.Enum):
    """How a held right treats SUSPENDED; see the module docstring."""

    STRICT = "strict"
    LOST_ONLY = "lost_only"
    DEADLINE = "deadline"

    @classmethod
    def of(cls, lose_on_suspend: bool | None) -> LossPolicy:
        """The policy a recipe's ``lose_on_suspend`` argument names (None: not given)."""
        if lose_on_suspend is None:
            return cls.DEADLINE
        return cls.STRICT if lose_on_suspend else cls.LOST_ONLY

    def keeps(self, state: ConnectionState | None) -> bool:
        """Whether a right held since before `state` (None: closed) may still be held in it
        (the session is the owner's: the caller checks that; under ``DEADLINE`` the
        right's `LossWatch` ends it once the deadline passes)."""
        if self is LossPolicy.STRICT:
            return state in _CONNECTED
        return state not in (None, ConnectionState.LOST)


def check_lose_on_suspend(lose_on_suspend: object) -> bool | None:
    """`lose_on_suspend` as given to a recipe; `TypeError` naming it unless None or a bool."""
    if lose_on_suspend is not None and not isinstance(lose_on_suspend, bool):
        raise TypeError(
            f"lose_on_suspend must be None or a bool, not {type(lose_on_suspend).__name__}"
        )
    return lose_on_suspend


def suspended_deadline(answered_at: float, session_timeout: float) -> float:
    """When a right suspended under ``DEADLINE`` ends (``time.monotonic()``): `KEEP_FRACTION`
    of the session's provable life, which ends at ``answered_at + session_timeout``."""
    return answered_at + KEEP_FRACTION * session_timeout


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

    Under ``DEADLINE`` it needs `session` (it may be set later, before the
    first state); without one that policy is applied as ``STRICT``.
    SUSPENDED or READ_ONLY, history included (a right granted while
    suspended), arms the session's deadline timer; RECONNECTED or CONNECTED
    on the owner's session disarms it; when it rings, `end("suspended")`.
    """

    __slots__ = (
        "_disarm",
        "_tracking",
        "_unfollow",
        "closed",
        "end",
        "granted_at",
        "owner",
        "policy",
        "session",
    )

    def __init__(
        self,
        policy: LossPolicy,
        owner: int | None,
        end: Callable[[str], None],
        *,
        granted_at: float | None = None,
        closed: str = "coordinator closed",
        follow_owner: bool = False,
        session: SessionPort | None = None,
    ) -> None:
        self.policy = policy
        self.session = session
        self._disarm: Callable[[], None] | None = None
        self.owner = owner
        self.end = end
        self.granted_at = time.monotonic() if granted_at is None else granted_at
        self.closed = closed
        self._tracking = follow_owner
        self._unfollow: Callable[[], None] = _nothing

    def on_event(self, event: ConnectionEvent) -> None:
        """A connection state was reported: end the right now if the rule says so."""
        policy, session = self.policy, self.session
        if policy is LossPolicy.DEADLINE and session is None:
            policy = LossPolicy.STRICT
        if event.at > self.granted_at:  # earlier states are history to this right
            strict = policy is LossPolicy.STRICT
            owner = self.owner
            reason = loss_reason(event.state, event.session_id, owner=owner, lose_on_suspend=strict)
            if reason is not None:
                self._stop_timer()
                self.end(reason)
        if self._tracking and event.state in _CONNECTED:
            self.owner = event.session_id
        if policy is LossPolicy.DEADLINE:
            if event.state in _SUSPENDED:
                if self._disarm is None:
                    self._arm()
            else:
                self._stop_timer()

    def _arm(self) -> None:
        """Suspended: end the right at the deadline (now, if it has passed)."""
        session = self.session
        assert session is not None
        deadline = suspended_deadline(session.answered_at, session.timing.session_timeout)
        if deadline <= time.monotonic():
            self.end("suspended")
            return
        self._disarm = session.call_at(deadline, self._ring)

    def _ring(self) -> None:
        self._disarm = None
        self._arm()  # the deadline again: a reconnect's answered handshake moves it on

    def _stop_timer(self) -> None:
        disarm, self._disarm = self._disarm, None
        if disarm is not None:
            disarm()

    def on_closed(self) -> None:
        """The coordinator closed: the right ends."""
        self._stop_timer()
        self.end(self.closed)

    def follow(self, follow_states: FollowStates) -> LossWatch:
        """Follow a session's states (its ``follow_states``) until `drop`; returns self."""
        self._unfollow = follow_states(self.on_event, self.on_closed)
        return self

    def drop(self) -> None:
        """Stop following (the right was given up; safe to call twice)."""
        unfollow, self._unfollow = self._unfollow, _nothing
        unfollow()
        self._stop_timer()


def _nothing() -> None:
    pass
