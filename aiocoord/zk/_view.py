"""`SessionView`: what a `ZkClient` shows of its session, and the helpers its requests share.

Read-only state (connection state, ids, timers), the wait for a usable
connection (bounded by a `Deadline` if given), chores the session runs for its
recipes, the retry of idempotent reads within one deadline, and the
registration and removal of one-shot watches.  The session itself (`ZkSession`) stays plumbing: its owner runs and
closes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar

import anyio
import anyio.lowlevel

from ..errors import ConnectionLostError, CoordError, SessionExpiredError
from . import _wire
from ._sending import Deadline, unreachable
from ._session import ZkSession
from ._timing import SessionTiming
from ._watches import Watch, WatchKind
from .states import ConnectionEvent, ConnectionState
from .types import ACL

__all__ = ("SessionView",)

T = TypeVar("T")


class SessionView:
    """The state of the session a client sends on (`ZkClient` is one)."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._sender = session.sender

    @property
    def session(self) -> ZkSession:
        """The session this client sends on.

        Its owner (the `Coordinator`) starts ``session.run`` in a task group
        and calls ``session.close()``; tools may instrument it.  Requests go
        through the methods of this client, never through the session.
        """
        return self._session

    # --- state -----------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState | None:
        """The current connection state (None before the first session or after close)."""
        return self._session.state

    @property
    def session_id(self) -> int | None:
        """The current session id, or None while there is none."""
        return self._session.session_id

    @property
    def session_password(self) -> bytes | None:
        return self._session.session_password

    @property
    def session_timeout(self) -> float:
        """The negotiated session timeout in seconds (the requested one before connecting)."""
        return self._session.session_timeout

    @property
    def timing(self) -> SessionTiming:
        """Every timer derived from the session timeout (`SessionTiming`)."""
        return self._session.timing

    @property
    def connected_address(self) -> tuple[str, int] | None:
        """The (host, port) of the current connection, or None."""
        return self._session.connected_address

    @property
    def closed(self) -> bool:
        return self._session.closed

    @property
    def last_error(self) -> BaseException | None:
        """Why the last connect attempt or connection failed, if one did."""
        return self._session.last_error

    @property
    def default_acl(self) -> tuple[ACL, ...]:
        """The ACL of nodes created without one: creator-only with credentials, else open."""
        return self._session.default_acl

    def request_timeout(self) -> float:
        """The deadline of one request, waiting for a connection included."""
        return self._session.timing.request_timeout

    def connection_events(self) -> AsyncIterator[ConnectionEvent]:
        """Each subscriber's own bounded stream: the current state, then every transition."""
        return self._session.connection_events()

    def follow_states(
        self, on_event: Callable[[ConnectionEvent], None], on_close: Callable[[], None]
    ) -> Callable[[], None]:
        """The current connection state and every transition, each passed to `on_event` where
        it happens (no task, no buffer: it must be quick and must not await); `on_close()`
        once the session closes.  Returns the function that stops following."""
        return self._session.events.listen(on_event, on_close, replay=True)

    def deadline(self, timeout: float | None = None) -> Deadline:
        """A deadline `timeout` seconds from now (default: the request timeout).

        For a wait that spans several requests and reconnects (a recipe's entry),
        so that their total stays within one bound.
        """
        return Deadline.after(self.request_timeout() if timeout is None else timeout)

    async def wait_connected(self, deadline: Deadline | None = None, what: str = "") -> None:
        """Return once a connection is usable; raises `CoordinatorClosedError` if closed meanwhile.

        With `deadline`, raises `ConnectionLostError` once it passes: the message
        starts with `what` (default: waiting for ZooKeeper), says how long it
        waited and the last connect error, which is chained as the cause.
        """
        if deadline is None:
            await self._session.wait_usable()
            return
        with anyio.CancelScope(deadline=deadline.at):
            await self._session.wait_usable()
            return
        self._session.ensure_open()
        raise self.unreachable(deadline, what or "no connection to ZooKeeper")

    def unreachable(self, deadline: Deadline, what: str) -> ConnectionLostError:
        """The `ConnectionLostError` for `what` failing once `deadline` passed (see `wait_connected`)."""
        return unreachable(self._session, deadline, what)

    def start_chore(self, chore: Callable[[], Awaitable[None]], name: str) -> bool:
        """Run `chore()` in the background, owned by the session rather than by the caller.

        For cleanup that must outlive the recipe that needs it (a latch left while
        disconnected deletes its node once the connection is back).  `name`
        names the task and its log lines.  The chore is cancelled when the
        coordinator closes; what it raises is logged.  Returns False (nothing
        started) if the session is not running.
        """
        return self._session.start_chore(chore, name)

    # --- watches no longer wanted -----------------------------------------------------------

    def remove_watch(self, watch: Watch) -> None:
        """Stop a one-shot watch that is no longer wanted, here and on the server.

        For a wait given up (cancelled, timed out) or a watch set with a read
        whose answer made it moot.  It will not fire; the server is asked to
        drop its side (ZooKeeper 3.5+ removeWatches) once no other watch of
        this client is on the path, without waiting for the answer, so it is
        safe in a cancelled task's cleanup.  A fired watch is left alone.
        """
        if watch.fired:
            return
        server_path = self._session.server_path(watch.path)
        if self._session.watches.discard(watch, server_path):
            self._unwatch_on_server(server_path)

    def forget_watch(self, watch: Watch) -> None:
        """Stop tracking a one-shot watch that is no longer wanted: it will not fire.

        Nothing is sent (no round trip, nothing in front of the caller's next
        request): the server keeps its side until the node changes, and that
        notification is then ignored, or until the connection ends
        (`remove_watch` asks the server to drop it as well).  A recipe
        about to delete a node it watches calls this first, so that the delete
        wakes nothing of its own.
        """
        if not watch.fired:
            self._session.watches.discard(watch, self._session.server_path(watch.path))

    # --- helpers ---------------------------------------------------------------------------

    async def _retrying(self, op: Callable[[Deadline], Awaitable[T]]) -> T:
        """Run an idempotent read, again after a connection loss, within one request deadline.

        `op` sends with the deadline it is given, so waiting for a connection,
        the requests and the retries together take at most the request timeout;
        the error of the try that ends past it is raised (`Sender`'s names the
        time waited and the cause).
        """
        deadline = Deadline.after(self._session.timing.request_timeout)
        while True:
            try:
                return await op(deadline)
            except SessionExpiredError:
                raise
            except ConnectionLostError:
                self._session.ensure_open()
                if deadline.remaining() <= 0:
                    raise
                await anyio.lowlevel.checkpoint()

    @contextmanager
    def _arming(
        self, watch: Watch, server_path: str, kinds: dict[int, WatchKind]
    ) -> Iterator[Callable[[int, int, bytes], None]]:
        """Around a request that sets a one-shot watch; yields the reply callback to send with it.

        The reply registers `watch` (as ``kinds[error code]``; no watch for other
        codes) before any notification that follows it is read.  A request given
        up (cancelled, or failing) leaves no watch: registered already, it is
        removed; still in flight, its reply does not register it, and the watch
        the server set is removed then.
        """
        watches = self._session.watches
        abandoned = False

        def on_reply(err: int, _zxid: int, _body: bytes) -> None:
            kind = kinds.get(err)
            if kind is None:
                return
            watch.kind = kind
            if abandoned:
                self._unwatch_on_server(server_path)
            else:
                watches.add(watch, server_path)

        watches.arm(server_path)
        try:
            yield on_reply
        except BaseException:
            watches.disarm(server_path)
            abandoned = True
            if watches.discard(watch, server_path):
                self._unwatch_on_server(server_path)
            raise
        watches.disarm(server_path)

    def _unwatch_on_server(self, server_path: str) -> None:
        """Ask the server to drop our watches on `server_path`, if nothing of ours watches there.

        The server keeps one watch per path and connection, whatever the number
        of requests that set it, so it is removed only once no watch (or request
        setting one) of this client is left on the path.  Sent without waiting
        for the answer (a server without one to remove says so; nothing to do);
        while disconnected there is nothing to send: the server's watches went
        with the connection, and a forgotten watch is not restored.
        """
        session = self._session
        if session.closed or session.watches.watched(server_path):
            return
        with suppress(CoordError, ValueError):
            session.connection_now().submit(_wire.remove_watches_request(server_path))
