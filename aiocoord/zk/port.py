"""`SessionPort`: what the rest of aiocoord may use of a ZooKeeper session.

The session (`ZkSession`) is run and closed by its owner, the `Coordinator`.
Recipes, the scheduler and the integrations reach it through one accessor,
``coord.client.session``, typed as this protocol, and through nothing else:
its underscored attributes stay inside `aiocoord.zk` and `aiocoord.session`
(``tests/unit/test_layout.py`` checks it).  Inside the library the session's
id, the wait for a connection and whether it closed come from here; the
`Coordinator`'s properties of the same names are the applications' view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from ..errors import ConnectionLostError
from ._timing import Deadline, SessionTiming
from .states import ConnectionEvent

__all__ = ("SessionPort",)


class SessionPort(Protocol):
    """A ZooKeeper session as aiocoord's own recipes see it; see the module docstring."""

    @property
    def session_id(self) -> int | None:
        """The current session id, or None while there is none (after LOST, before the next)."""
        ...

    @property
    def closed(self) -> bool:
        """Whether the session was closed (or is closing) by its owner: nothing will reconnect."""
        ...

    @property
    def answered_at(self) -> float:
        """When (``time.monotonic()``) the latest request the server answered on this session
        was sent, heartbeats and the handshake included (``-inf`` without a session).

        The server cannot expire the session before this + the negotiated
        ``timing.session_timeout``; a read-only server's answers do not count.
        """
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` from the loop at `when` (``time.monotonic()``); returns its cancel.

        One loop timer per distinct `when`, shared by every callback armed for
        it; never blocks; `callback` must be quick and must not await.  Closing
        the session cancels every timer.
        """
        ...

    @property
    def timing(self) -> SessionTiming:
        """The session's timers (request timeout, retry window, drain bound, ...)."""
        ...

    def deadline(self, timeout: float | None = None) -> Deadline:
        """A deadline `timeout` seconds from now (default: the request timeout)."""
        ...

    async def wait_connected(self, deadline: Deadline | None = None, what: str = "") -> None:
        """Block until a connection is usable; `CoordinatorClosedError` if closed meanwhile.

        With `deadline`, raises `ConnectionLostError` once it passes (the
        message starts with `what`).  Cancellation just stops the wait.
        """
        ...

    def unreachable(self, deadline: Deadline, what: str) -> ConnectionLostError:
        """The error for `what` having failed once `deadline` passed (why, if known)."""
        ...

    def ensure_open(self) -> None:
        """Raise what a request would now: not open yet, closed, or failed for good."""
        ...

    def follow_states(
        self, on_event: Callable[[ConnectionEvent], None], on_close: Callable[[], None]
    ) -> Callable[[], None]:
        """The current state and every transition, each passed to `on_event` where it happens.

        `on_event` must be quick and must not await; `on_close()` runs once
        the session closes.  Returns the function that stops following.
        """
        ...

    def start_chore(self, chore: Callable[[], Awaitable[None]], name: str) -> bool:
        """Run `chore()` in the session's task group, outliving its caller; False if not running."""
        ...
