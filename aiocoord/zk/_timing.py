"""`SessionTiming`: every timer derived from the session timeout, in one place; `Deadline`.

T is the negotiated session timeout (the requested one until the first
handshake).  Nothing else in aiocoord multiplies or divides it; code that
needs one of these timers reads it here (outside `aiocoord.zk`, through
the session's ``timing``).  A `Deadline` is one bound taken from them (the
request timeout, say) for a wait that spans several requests and reconnects.

read_timeout = 2/3 T
    The Java client's read timeout: a server silent that long has dropped us
    or is gone (TN14: the server drops a connection after about 2/3 T without
    a heartbeat).  It also bounds every request in flight.
ping_interval = 1/3 T
    Ping after that long without sending, so the server hears from us twice
    per read timeout and one lost ping does not cost the connection.
connect_attempt = max(0.25 s, T / max(3, hosts))
    The Java client's T / number of hosts per attempt, but never the whole
    session on one host: a server that accepts and never answers (3.8.0
    loading its database) must cost a fraction of the session, not all of it.
reconnect_cap = 1/4 T, or 1 s without a session
    The longest reconnect sleep.  After each failed round over every host
    the session sleeps a jittered share of 0.1 s doubling (eight steps at
    most, 12.8 s: `aiocoord._backoff.Backoff`), never longer than this: short enough
    that a session that may still live survives the reconnect (aiozk slept up
    to 60 s and let sessions expire; kazoo's default did too).
stable_after = 1/3 T
    A connection up this long (one ping interval) resets the reconnect
    backoff.  One that ends sooner (hung up after the handshake, failed
    priming) is a failed attempt, like a refused connect or an "expired"
    answer: each is followed by a backoff sleep once every host was tried.
lost_after = session_lost_fraction * T
    Curator's simulated session expiration: SUSPENDED becomes LOST that long
    after the server was last heard from, without waiting for the server to
    say so (Curator 3.x, TN12; TN14 discusses fractions below 1).
request_timeout = Settings.request_timeout, else T
    The deadline of one request: waiting for a connection, the request and
    the retries of an idempotent read together.  Also the connectivity
    deadline of a recipe's entry (joining a latch, acquiring a CAS lock).
close_bound = min(2 s, request_timeout)
    The courteous closeSession when the owner closes: if it arrives the
    ephemerals go at once, if not they go with the session timeout.
discard_bound = min(2 s, T)
    Ending, on the server, a session declared LOST that a reconnect would
    otherwise revive.
retry_window = 2 request_timeout
    A write whose outcome must be learned across a reconnect (sent, then
    read back), a release.
protected_create_window = 4 request_timeout
    A protected create looks for its node across reconnects within this.
drain_bound = max(T, 1 s)
    How long a recipe waits for the bodies it cancelled before deleting its
    nodes: past T a silent session would be gone anyway.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import anyio

__all__ = ("Deadline", "SessionTiming")


@dataclass(frozen=True, slots=True)
class SessionTiming:
    """The timers of one session, computed from its timeout; see the module docstring."""

    session_timeout: float
    """T, in seconds: negotiated, or the requested one before the first handshake."""
    hosts: int = 1
    """How many servers the client may try."""
    lost_fraction: float = 1.0
    """`Settings.session_lost_fraction`."""
    configured_request_timeout: float | None = None
    """`Settings.request_timeout`: None falls back to T."""

    def negotiated(self, timeout_ms: int) -> SessionTiming:
        """The same policy for the timeout a server granted (milliseconds, as on the wire)."""
        return replace(self, session_timeout=timeout_ms / 1000.0)

    @property
    def read_timeout(self) -> float:
        return self.session_timeout * 2 / 3

    @property
    def ping_interval(self) -> float:
        return self.session_timeout / 3

    @property
    def connect_attempt(self) -> float:
        return max(0.25, self.session_timeout / max(3, self.hosts))

    @property
    def stable_after(self) -> float:
        return self.session_timeout / 3

    def reconnect_cap(self, *, session_alive: bool) -> float:
        """The longest reconnect sleep, however many rounds over every host failed."""
        return self.session_timeout / 4 if session_alive else 1.0

    @property
    def lost_after(self) -> float:
        return self.lost_fraction * self.session_timeout

    @property
    def request_timeout(self) -> float:
        return self.configured_request_timeout or self.session_timeout

    @property
    def close_bound(self) -> float:
        return min(2.0, self.request_timeout)

    @property
    def discard_bound(self) -> float:
        return min(2.0, self.session_timeout)

    @property
    def retry_window(self) -> float:
        return self.request_timeout * 2

    @property
    def protected_create_window(self) -> float:
        return self.request_timeout * 4

    @property
    def drain_bound(self) -> float:
        return max(self.session_timeout, 1.0)


@dataclass(frozen=True, slots=True)
class Deadline:
    """One deadline for a wait that may span several requests and reconnects (event-loop time)."""

    started: float
    at: float

    @classmethod
    def after(cls, limit: float) -> Deadline:
        now = anyio.current_time()
        return cls(now, now + limit)

    @property
    def limit(self) -> float:
        return self.at - self.started

    def remaining(self) -> float:
        return max(0.0, self.at - anyio.current_time())

    def elapsed(self) -> float:
        return anyio.current_time() - self.started
