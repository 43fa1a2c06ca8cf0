"""Connection states (Curator's five) and the pure machine that decides them.

The machine takes what the I/O loop observed (a session was established, the
connection dropped, the server said the session expired, the LOST timer fired,
the coordinator closed) and returns the `ConnectionEvent`s to publish.  It does
no I/O and never awaits, so its whole table is tested directly.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

__all__ = (
    "Closed",
    "ConnectionEvent",
    "ConnectionMachine",
    "ConnectionState",
    "Dropped",
    "Established",
    "Expired",
    "LostTimeout",
    "Observation",
)


class ConnectionState(enum.Enum):
    """Curator's connection states, with Curator's meaning.

    CONNECTED: the first session is established.  SUSPENDED: the connection is
    gone, the session may still live.  RECONNECTED: connected again, to the same
    session or (after LOST) a new one; the event's `new_session` says which.
    LOST: the session is gone (expired, closed by the server, or suspended past
    the LOST threshold).  READ_ONLY: connected to a read-only server.
    """

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    RECONNECTED = "RECONNECTED"
    LOST = "LOST"
    READ_ONLY = "READ_ONLY"

    @property
    def is_connected(self) -> bool:
        """True for the states in which requests can be served."""
        return self in (
            ConnectionState.CONNECTED,
            ConnectionState.RECONNECTED,
            ConnectionState.READ_ONLY,
        )


@dataclass(frozen=True, slots=True)
class ConnectionEvent:
    """One state transition, as published to `Coordinator.connection_events()`.

    `session_id` is the session the event is about (the new one for
    RECONNECTED with `new_session=True`, the lost one for LOST); `reason` is a
    short human-readable cause; `at` is the monotonic time of the transition.
    """

    state: ConnectionState
    session_id: int | None
    new_session: bool = False
    reason: str = ""
    at: float = field(default_factory=time.monotonic, compare=False)


# --- observations fed to the machine -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Established:
    """A connection completed its handshake with session `session_id`."""

    session_id: int
    new_session: bool
    read_only: bool = False


@dataclass(frozen=True, slots=True)
class Dropped:
    """The connection ended (EOF, reset, read timeout, cut)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Expired:
    """The server answered that the session no longer exists."""

    reason: str = "session expired"


@dataclass(frozen=True, slots=True)
class LostTimeout:
    """SUSPENDED lasted past the LOST threshold since the server was last heard from."""

    reason: str = "suspended past the session timeout"


@dataclass(frozen=True, slots=True)
class Closed:
    """The coordinator was closed by its owner."""


Observation = Established | Dropped | Expired | LostTimeout | Closed


class ConnectionMachine:
    """Decides Curator's transitions from observations; keeps no clock and does no I/O.

    `state` is None before the first session and after `Closed`.
    """

    def __init__(self) -> None:
        self.state: ConnectionState | None = None
        self.session_id: int | None = None
        self.closed = False

    def feed(self, obs: Observation) -> list[ConnectionEvent]:
        """Apply one observation; return the events to publish, in order."""
        if self.closed:
            return []
        state = self.state
        if isinstance(obs, Established):
            self.session_id = obs.session_id
            if state is None:
                new = ConnectionState.READ_ONLY if obs.read_only else ConnectionState.CONNECTED
                return self._to(new, obs.session_id, new_session=True, reason="session established")
            if state in (ConnectionState.SUSPENDED, ConnectionState.LOST):
                new = ConnectionState.READ_ONLY if obs.read_only else ConnectionState.RECONNECTED
                why = "new session" if obs.new_session else "same session"
                return self._to(new, obs.session_id, new_session=obs.new_session, reason=why)
            return []
        if isinstance(obs, Dropped):
            if state is not None and state.is_connected:
                return self._to(ConnectionState.SUSPENDED, self.session_id, reason=obs.reason)
            return []
        if isinstance(obs, Expired | LostTimeout):
            if state is None or state is ConnectionState.LOST:
                return []
            if isinstance(obs, LostTimeout) and state is not ConnectionState.SUSPENDED:
                return []
            lost = self.session_id
            self.session_id = None
            return self._to(ConnectionState.LOST, lost, reason=obs.reason)
        # Closed
        self.closed = True
        self.state = None
        return []

    def _to(
        self,
        new: ConnectionState,
        session_id: int | None,
        *,
        new_session: bool = False,
        reason: str,
    ) -> list[ConnectionEvent]:
        self.state = new
        return [ConnectionEvent(new, session_id, new_session, reason)]
