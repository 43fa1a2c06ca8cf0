"""`ZkSession`: one ZooKeeper session: its loop, its state, and the waits on it.

This is the I/O half of the session manager; `states.ConnectionMachine` is the
pure half that decides which Curator state to publish, and `_timing.SessionTiming`
gives every timer.  Differences from aiozk that matter (see shared notes): every
connect attempt has its own deadline and moves on to the next host; silence for
the read timeout drops the connection (SUSPENDED); a SUSPENDED connection
becomes LOST once `lost_after` has passed since the server was last heard
from; after LOST a new session is opened by itself; the SASL login is made,
auth replayed and every watch restored (`_priming`) before any queued request is sent.

It is the one owner of the session's state (connection state, ids, timers,
watches, the current connection).  Its owner (the `Coordinator`) runs and
closes it; `ZkClient` sends the typed requests on it through a `Sender`; the
recipes reach what they may use of it (state following, chores, deadlines, the
wait for a connection, the session id) as ``client.session``, typed as
`port.SessionPort`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import sniffio

from .._backoff import Backoff
from .._broadcast import Broadcast
from ..errors import (
    AuthFailedError,
    ConfigError,
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    SessionExpiredError,
    ZooKeeperError,
)
from . import _wire
from ._acl import AclChoice, AclProvider
from ._chores import Chores
from ._connection import Connection
from ._framing import NotZooKeeper
from ._hosts import HostList, format_hosts
from ._priming import close_session, prime
from ._replies import parse_watch_event
from ._retry_log import RETRY_RECORD, RetryLog
from ._sasl import LocalSaslError, SaslLogin
from ._timing import Deadline, SessionTiming
from ._watches import WatchRegistry
from .paths import add_chroot, strip_chroot
from .states import (
    Closed,
    ConnectionEvent,
    ConnectionMachine,
    ConnectionState,
    Dropped,
    Established,
    Expired,
    LostTimeout,
    Observation,
)
from .types import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("aiocoord.session")

_STATE_NOTICE = -1  # a notification's event type "None": the connection's state changed

_NO_PASSWORD = b"\x00" * 16

__all__ = ("ZkSession",)


class ZkSession:
    """One ZooKeeper session kept alive across connections; `run()` is its loop.

    Its owner starts `run` in a task group and calls `close()`; see the
    module docstring for who else uses it.
    """

    def __init__(self, settings: Settings, acl_provider: AclProvider | None = None) -> None:
        self.settings = settings
        self.chroot = settings.chroot
        self.hosts = HostList(settings.addresses, shuffle=settings.randomize_hosts)
        self._retry_log = RetryLog()  # one line per outage, not one per attempt
        # One step per failed round over every host: 0.1 s doubling, eight steps at most.
        self._reconnects = Backoff(0.1, 1.0, limit=8)
        self._foreign: set[tuple[str, int]] = set()  # hosts that answered, but not as ZooKeeper
        self._machine = ConnectionMachine()
        self.watches = WatchRegistry()  # every live watch, restored after a reconnect
        self._conn: Connection | None = None
        self._changed = anyio.Event()
        self._session_id = 0
        self._password = _NO_PASSWORD
        self._requested_ms = int(settings.session_timeout * 1000)
        # The timers, for the timeout negotiated last (the requested one before).
        self.timing = SessionTiming(
            settings.session_timeout,
            hosts=len(self.hosts),
            lost_fraction=settings.session_lost_fraction,
            configured_request_timeout=settings.request_timeout,
        )
        self._last_zxid = 0
        self._last_heard = time.monotonic()
        # `answered_at`: the latest answered send time of the connections that ended, and
        # the connection being served (priming included).
        self._answered_sent = -math.inf
        self._serving: Connection | None = None
        self._timers: dict[float, tuple[asyncio.TimerHandle, dict[int, Callable[[], None]]]] = {}
        self._timer_ids = itertools.count()
        self.events: Broadcast[ConnectionEvent] = Broadcast()  # connection states
        self._namespace_ready = False
        self._closing = False
        self._closed = False
        self._fatal: CoordError | None = None
        self.last_error: BaseException | None = None
        self._run_scope: anyio.CancelScope | None = None
        self._chores = Chores()  # cleanup that outlives its caller, in the loop's task group
        # Tasks that run as long as the loop does (the client's ensemble tracker).
        self.background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._started = False
        self._started_at = 0.0
        self._ssl = settings.ssl_context()
        self._sasl = SaslLogin.from_settings(settings)
        # The identities sent on every connection: the settings' digest, then add_auth's.
        self._auth: list[tuple[str, bytes]] = []
        if settings.auth is not None:
            self._auth.append(("digest", settings.auth.get_secret_value().encode()))
        # With credentials, nodes belong to the identities that made them (others may
        # read them only with world_readable); without, ZooKeeper's open default.
        self.default_acl: tuple[ACL, ...] = (
            OPEN_ACL_UNSAFE
            if settings.auth is None and self._sasl is None
            else CREATOR_ALL_ACL + (READ_ACL_UNSAFE if settings.world_readable else ())
        )
        self.acls = AclChoice(self.default_acl, acl_provider)  # what each create gets

    # --- state ------------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState | None:
        """The current connection state (None before the first session or after close)."""
        return self._machine.state

    @property
    def session_id(self) -> int | None:
        """The current session id, or None while there is none."""
        return self._session_id or None

    @property
    def session_password(self) -> bytes | None:
        return self._password if self._session_id else None

    @property
    def connected_address(self) -> tuple[str, int] | None:
        conn = self.connection
        return conn.address if conn is not None else None

    @property
    def closed(self) -> bool:
        return self._closed or self._closing

    @property
    def answered_at(self) -> float:
        """When (``time.monotonic()``) the latest request the server answered on this session
        was sent, heartbeats and the handshake included; ``-inf`` without a session.

        The server heard of the session no earlier, so it cannot expire it
        before this + the negotiated session timeout.  Answers from a
        read-only server do not count: it is cut off from the quorum.
        """
        at = self._answered_sent
        conn = self._serving
        if conn is None or conn.answer.read_only or conn.answer.session_id != self._session_id:
            return at
        return max(at, conn.answered_sent)

    def call_at(self, when: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` from the event loop at `when` (``time.monotonic()``); returns the
        function that cancels it (safe to call twice).

        Callbacks for the same `when` share one loop timer (every right
        suspended by one state change has the same deadline), so arming it for
        hundreds of holders costs a dict entry each.  Never blocks; the callback
        must be quick and must not await.  Closing the session cancels them all.
        """
        key = next(self._timer_ids)
        entry = self._timers.get(when)
        if entry is None:
            loop = asyncio.get_running_loop()
            handle = loop.call_later(max(0.0, when - time.monotonic()), self._ring, when)
            entry = self._timers[when] = (handle, {})
        entry[1][key] = callback

        def cancel() -> None:
            current = self._timers.get(when)
            if current is not None and current[1].pop(key, None) is not None and not current[1]:
                current[0].cancel()
                del self._timers[when]

        return cancel

    def counts(self) -> dict[str, int]:
        """What the session holds now, besides its watches: ``in_flight`` (requests awaiting
        a reply on the current connection), ``timers`` (`call_at` callbacks armed),
        ``state_followers`` (`follow_states` listeners), ``state_streams`` (connection
        state streams not yet left) and ``chores`` (running).  Never blocks."""
        conn = self._serving
        followers = self.events.counts()
        return {
            "in_flight": conn.in_flight if conn is not None else 0,
            "timers": sum(len(callbacks) for _, callbacks in self._timers.values()),
            "state_followers": followers["listeners"],
            "state_streams": followers["streams"],
            "chores": self._chores.running,
        }

    def _ring(self, when: float) -> None:
        entry = self._timers.pop(when, None)
        if entry is None:
            return
        for callback in list(entry[1].values()):
            try:
                callback()
            except Exception:
                log.exception("a session timer callback failed")

    # --- the loop --------------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep a session until closed.  Started by the coordinator's task group.

        Shielded: a cancellation of the scope around ``async with connect()``
        must not stop the session before the recipes inside have cleaned up
        (their shielded release or delete needs the connection); `close()`
        stops it.
        """
        self._started = True
        # Transport callbacks run in a copy of this context and recipes call anyio there;
        # outside a task anyio reads this variable, which `asyncio.run()` never sets.
        sniffio.current_async_library_cvar.set("asyncio")
        self._started_at = time.monotonic()
        with anyio.CancelScope(shield=True) as scope:
            self._run_scope = scope
            async with anyio.create_task_group() as tg:
                self._chores.tg = tg
                tg.start_soon(self._lost_watchdog)
                for task in self.background:
                    tg.start_soon(task)
                task_status.started()
                try:
                    await self._connect_loop()
                finally:
                    self._chores.tg = None
                    tg.cancel_scope.cancel()

    def start_chore(self, chore: Callable[[], Awaitable[None]], name: str) -> bool:
        """Run `chore()` in the background, owned by the session rather than by the caller.

        For cleanup that must outlive the recipe that needs it (a latch left while
        disconnected deletes its node once the connection is back).  `name`
        names the task and its log lines.  The chore is cancelled when the
        session closes; what it raises is logged.  Returns False (nothing
        started) if the session is not running.
        """
        return not self.closed and self._chores.start(chore, name)

    async def _connect_loop(self) -> None:
        failures = 0  # attempts in a row that gave no stable connection
        while not self._closing and self._fatal is None:
            if await self._attempt():
                failures = 0
                self._reconnects.reset()
                continue
            # Whatever phase it failed in (connect, handshake, "expired", priming, a
            # connection that ended at once), back off once every host has been tried.
            failures += 1
            if failures % len(self.hosts) == 0 and not self._closing:
                await anyio.sleep(self._backoff())

    async def _attempt(self) -> bool:
        """Connect to the next host and serve it; True if stable (no backoff before the next)."""
        address = self.hosts.next()
        if address in self._foreign:
            return False  # not ZooKeeper: tried once, not again
        attempt_id, attempt_pw = self._session_id, self._password
        try:
            conn = await Connection.open(
                address,
                timing=self.timing,
                last_zxid=self._last_zxid,
                timeout_ms=self._requested_ms,
                session_id=attempt_id,
                password=attempt_pw,
                read_only=self.settings.read_only,
                ssl_context=self._ssl,
                tls_hostname=self.settings.tls_server_name,
                max_packet=self.settings.max_packet,
                on_notification=self._on_notification,
                on_zxid=self._on_zxid,
            )
        except SessionExpiredError as exc:
            self.last_error = exc
            if attempt_id == self._session_id:
                self._feed(Expired(str(exc)))
            # Our session is gone: the next attempt opens a new one, at once.  Only a
            # server that answers "expired" to a new session counts as failing.
            return attempt_id != 0
        except NotZooKeeper as exc:
            self.last_error = exc
            self._foreign.add(address)
            if self._foreign.issuperset(self.hosts):
                log.error(
                    "cannot connect: %s; no ZooKeeper host left to try",
                    exc,
                    extra={RETRY_RECORD: True},  # connect() raises it: the CLI says it once
                )
                self._fatal = exc  # connect() fails now: retrying cannot help
                self._changed.set()
                self._changed = anyio.Event()
            else:
                log.error("%s: not tried again", exc)
            return False
        except ConnectionLostError as exc:
            self.last_error = exc
            self._retry_log.failed(
                exc,
                address=address,
                first_session=self._machine.state is None,
                started_at=self._started_at,
            )
            return False
        self._retry_log.connected(address, first_session=self._machine.state is None)
        if attempt_id and attempt_id != self._session_id:
            # The session was declared LOST while this attempt ran: end it on the
            # server rather than revive it, so its ephemerals go now.
            await self._discard(conn)
            return False
        return await self._serve(conn, new_session=attempt_id == 0)

    def _backoff(self) -> float:
        # Jittered, so that a fleet cut off together does not come back together.
        cap = self.timing.reconnect_cap(session_alive=bool(self._session_id))
        return self._reconnects.delay(most=cap)

    async def _serve(self, conn: Connection, *, new_session: bool) -> bool:
        """Prime and serve `conn` until it ends; True if it was up for `timing.stable_after`."""
        answer = conn.answer
        established_at: float | None = None
        self._session_id = answer.session_id
        self._password = answer.password
        self.timing = conn.timing
        self._serving = conn
        # The handshake's answer is word from the server: the session lives, so the
        # SUSPENDED-to-LOST timer restarts from it rather than firing while we prime.
        self._last_heard = max(self._last_heard, conn.last_recv)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read, conn, tg.cancel_scope)
            try:
                await self._prime(conn, new_session)
            except AuthFailedError as exc:
                self._fatal = exc
                log.error("authentication failed: %s", exc)
                await conn.abort("authentication failed")
            except (ConnectionLostError, ZooKeeperError) as exc:
                self.last_error = exc
                if isinstance(exc, ZooKeeperError) and self._machine.state is None:
                    # Refused before the first session was ever usable (a namespace that
                    # cannot be created, say): retrying cannot help, so connect() fails now.
                    self._fatal = exc
                    log.error("cannot start the session: %s", exc)
                await conn.abort(f"priming failed: {exc}")
            else:
                if self._session_id == answer.session_id:
                    self._established(conn, new_session)
                    established_at = time.monotonic()
                else:
                    # Declared LOST while priming (the server went silent again): the
                    # recipes have let go of it, so end it rather than revive it.
                    await self._close_session(conn)
                    await conn.abort("session declared lost while reconnecting")
        self._conn = None
        self._answered_sent = self.answered_at
        self._serving = None
        self._last_heard = max(self._last_heard, conn.last_recv)
        self._feed(Dropped(conn.close_reason or "connection closed"))
        return (
            established_at is not None
            and time.monotonic() - established_at >= self.timing.stable_after
        )

    def _established(self, conn: Connection, new_session: bool) -> None:
        answer = conn.answer
        self._conn = conn
        self._last_heard = conn.last_recv
        lowered = answer.timeout_ms < self._requested_ms  # the server's maxSessionTimeout
        log.log(
            logging.WARNING if lowered else logging.INFO,
            "session 0x%x on %s:%s (timeout %.1fs%s%s)",
            answer.session_id,
            *conn.address,
            self.timing.session_timeout,
            f", lowered by the server from {self._requested_ms / 1000:g}s" if lowered else "",
            ", read-only" if answer.read_only else "",
        )
        self._feed(Established(answer.session_id, new_session, answer.read_only))

    async def _read(self, conn: Connection, scope: anyio.CancelScope) -> None:
        await conn.run()
        scope.cancel()

    async def _prime(self, conn: Connection, new_session: bool) -> None:
        """Before anything else on a new connection: SASL, auth, watches, namespace."""
        namespace = self.chroot if new_session or not self._namespace_ready else None
        try:
            await self._prime_now(conn, new_session, namespace)
        except LocalSaslError as exc:
            if self._machine.state is None:
                raise  # connect() fails with it: the credentials never worked
            # Once logged in before, a failure on our side of Kerberos (a KDC out of
            # reach, say) is not the server's refusal: try again, like a lost connection.
            log.warning("SASL login failed, retrying: %s", exc)
            raise ConnectionLostError(str(exc)) from exc
        if self.chroot:
            self._namespace_ready = True

    async def _prime_now(self, conn: Connection, new_session: bool, namespace: str | None) -> None:
        await prime(
            conn,
            sasl=self._sasl,
            # Once a session was usable without SASL, the server does not require it.
            probe_sasl=self._machine.state is None,
            auth=list(self._auth),
            watches=self.watches,
            new_session=new_session,
            last_zxid=self._last_zxid,
            namespace=namespace,
            acl=self.acls.for_path,
        )

    # --- the host list ---------------------------------------------------------------------

    @property
    def host_list(self) -> str:
        """The hosts the next attempt may use, as a host string (their given order)."""
        return format_hosts(self.hosts.given)

    def replace_hosts(self, hosts: str) -> None:
        """`Coordinator.set_hosts`: validate `hosts` (`ConfigError` naming it) and use them."""
        from ..settings import parse_hosts

        if self._closing or self._closed:
            raise CoordinatorClosedError("the coordinator is closed")
        try:
            addresses, chroot = parse_hosts(hosts)
        except ValueError as exc:
            raise ConfigError("hosts", str(exc)) from None
        if chroot is not None and chroot != self.chroot:
            raise ConfigError(
                "hosts",
                f"the chroot {chroot!r} is not this session's ({self.chroot!r}): "
                "it cannot change while the session lives; open a new coordinator",
            )
        self.set_hosts(addresses, "set_hosts")

    def set_hosts(self, addresses: list[tuple[str, int]], why: str) -> bool:
        """Connect to `addresses` from the next attempt on (the current connection stays).

        Returns False if they are the hosts already in use.  `why` says where
        the list came from, for the log line.
        """
        before = format_hosts(self.hosts.given)
        if not self.hosts.replace(addresses):
            return False
        self._foreign &= set(self.hosts)  # a host that answered as not ZooKeeper stays out
        self.timing = replace(self.timing, hosts=len(self.hosts))
        log.info("host list now %s (%s; was %s)", format_hosts(self.hosts.given), why, before)
        return True

    def remember_auth(self, scheme: str, credentials: bytes) -> None:
        """Send (`scheme`, `credentials`) on every later connection too (accepted by the server)."""
        if (scheme, credentials) not in self._auth:
            self._auth.append((scheme, credentials))

    async def _discard(self, conn: Connection) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read, conn, tg.cancel_scope)
            await self._close_session(conn)
            await conn.abort("stale session closed")

    async def _close_session(self, conn: Connection) -> None:
        """End the connection's session on the server (its reader must be running)."""
        await close_session(conn, self.timing.discard_bound)

    async def _lost_watchdog(self) -> None:
        while True:
            changed = self._changed
            if self._machine.state is ConnectionState.SUSPENDED:
                deadline = self._last_heard + self.timing.lost_after
                delay = deadline - time.monotonic()
                if delay <= 0:
                    self._feed(LostTimeout())
                    continue
                with anyio.move_on_after(delay):
                    await changed.wait()
            else:
                await changed.wait()

    # --- state publication -----------------------------------------------------------------

    def _feed(self, obs: Observation) -> None:
        for event in self._machine.feed(obs):
            if event.state is ConnectionState.LOST:
                # The session is gone: its watches died with it; the next attempt opens a new one.
                self._session_id = 0
                self._password = _NO_PASSWORD
                # A new session claims no history, as a new Java handle does: a server that
                # lost its data (replaced, restored) refuses a client that "has seen" more.
                self._last_zxid = 0
                self._answered_sent = -math.inf
                self.watches.session_lost()
            # LOST is what an operator must see with default logging; the rest is INFO.
            log.log(
                logging.WARNING if event.state is ConnectionState.LOST else logging.INFO,
                "connection %s (session 0x%x%s)",
                event.state.value,
                event.session_id or 0,
                f", {event.reason}" if event.reason else "",
            )
            self.events.publish(event)
        self._changed.set()
        self._changed = anyio.Event()

    def follow_states(
        self, on_event: Callable[[ConnectionEvent], None], on_close: Callable[[], None]
    ) -> Callable[[], None]:
        """The current connection state and every transition, each passed to `on_event` where
        it happens (no task, no buffer: it must be quick and must not await); `on_close()`
        once the session closes.  Returns the function that stops following."""
        return self.events.listen(on_event, on_close, replay=True)

    # --- notifications ---------------------------------------------------------------------

    def _on_notification(self, body: bytes) -> None:
        type_, _state, server_path = parse_watch_event(body)
        if type_ == _STATE_NOTICE:
            return  # state-change notices; our states come from the machine
        self.watches.dispatch(type_, server_path, strip_chroot(self.chroot, server_path))

    def _on_zxid(self, zxid: int) -> None:
        if zxid > self._last_zxid:
            self._last_zxid = zxid

    # --- requests --------------------------------------------------------------------------

    def ensure_open(self) -> None:
        """Raise what a request on this session would: not open yet, closed, or failed for good."""
        if not self._started:
            raise CoordinatorClosedError(
                "the coordinator is not open: use `async with aiocoord.connect(...)`"
            )
        if self._closed or self._closing:
            raise CoordinatorClosedError("the coordinator is closed")
        if self._fatal is not None:
            raise self._fatal

    def connection_now(self) -> Connection:
        """The connection for a request sent without awaiting; `ConnectionLostError` if none."""
        self.ensure_open()
        conn = self._conn
        if conn is None or conn.closed:
            raise ConnectionLostError("not connected")
        return conn

    async def wait_connected(self, deadline: Deadline | None = None, what: str = "") -> None:
        """Return once a connection is usable; raises `CoordinatorClosedError` if closed meanwhile.

        With `deadline`, raises `ConnectionLostError` once it passes: the message
        starts with `what` (default: no connection to ZooKeeper), says how long it
        waited and the last connect error, which is chained as the cause.
        """
        with anyio.CancelScope(deadline=math.inf if deadline is None else deadline.at):
            # Every transition (and close) sets `_changed`; `_conn` is set before it fires.
            while True:
                self.ensure_open()
                if self.connection is not None:
                    return
                await self._changed.wait()
        self.ensure_open()
        assert deadline is not None
        raise self.unreachable(deadline, what or "no connection to ZooKeeper")

    def deadline(self, timeout: float | None = None) -> Deadline:
        """A deadline `timeout` seconds from now (default: the request timeout).

        For a wait that spans several requests and reconnects (a recipe's entry),
        so that their total stays within one bound.
        """
        return Deadline.after(self.timing.request_timeout if timeout is None else timeout)

    def unreachable(self, deadline: Deadline, what: str) -> ConnectionLostError:
        """`what` failed once `deadline` passed: the error says after how long, and why if known.

        Without a connection, the last connect error is named and chained as the
        cause (``ConnectionRefusedError`` from which host, say); with one, the
        server was too slow and no earlier error explains it.
        """
        last = self.last_error if self.connection is None else None
        error = ConnectionLostError(
            f"{what} after {deadline.elapsed():.2f}s (timeout {deadline.limit:g}s)"
            + (f"; not connected: {last}" if last is not None else "")
        )
        if last is not None:
            error.__cause__ = last
        return error

    @property
    def connection(self) -> Connection | None:
        """The current connection, if one is up (requests on it go out at once)."""
        conn = self._conn
        return conn if conn is not None and not conn.closed else None

    def server_path(self, path: str) -> str:
        return add_chroot(self.chroot, path)

    def client_path(self, path: str) -> str:
        return strip_chroot(self.chroot, path)

    # --- closing ---------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the session on the server (ephemerals vanish now), stop the loop; idempotent, bounded."""
        if self._closed:
            return
        self._closing = True
        with anyio.CancelScope(shield=True):
            conn = self._conn
            if conn is not None and not conn.closed:
                with anyio.move_on_after(self.timing.close_bound):
                    with contextlib.suppress(CoordError):
                        await conn.call(_wire.close_request())
                await conn.abort("closed by the owner")
            self._closed = True
            for handle, _ in self._timers.values():
                handle.cancel()
            self._timers.clear()
            self._machine.feed(Closed())
            self.watches.close()
            self.events.close()
            self._changed.set()
            if self._run_scope is not None:
                self._run_scope.cancel()
