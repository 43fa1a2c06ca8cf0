"""`Coordinator` and `connect()`: one ZooKeeper session, published as connection states.

`async with aiocoord.connect(...) as coord` returns once the first session is
established (or raises `ConnectionLostError` after the connect timeout,
retrying meanwhile: a server may be starting), keeps
the session alive and heals it after loss, and on exit closes the session on
the server, so its ephemeral nodes vanish at once, and stops every task it
started.

The session's state has one owner, `zk._session.ZkSession`: the coordinator
runs and closes it and shows its state; `coord.client` sends the requests on it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ._lifecycle import Lifecycle, Service
from .errors import ConnectionLostError, CoordinatorClosedError
from .zk import AclProvider, ZkClient, ZkSession
from .zk.states import ConnectionEvent, ConnectionState

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ("ConnectionEvent", "ConnectionState", "Coordinator", "connect")

log = logging.getLogger(__name__)


class Coordinator(Service):
    """One ZooKeeper session and its connection-state stream; recipes take it first.

    Use it as ``async with`` (or ``await coord.start()`` ... ``await
    coord.aclose()``): entering blocks until the first session is
    established; leaving closes the session and stops everything it runs.
    It may be left from another task than the one that entered it.
    """

    def __init__(self, settings: Settings, *, acl_provider: AclProvider | None = None) -> None:
        from .settings import Settings  # pydantic loads on first use, not on import

        if not isinstance(settings, Settings):
            raise TypeError(f"settings must be aiocoord.Settings, not {type(settings).__name__}")
        self.settings = settings
        self._session = ZkSession(settings, acl_provider)
        self.client = ZkClient(self._session)
        self._life = Lifecycle(
            f"coordinator {settings.hosts}", self._run_session, stopping=self._session.close
        )

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect: block until the first session is established.

        Connect attempts are retried until the connect timeout (a server may be
        starting); each one refused after the first second is logged at
        WARNING.  Raises `ConnectionLostError` if no session is established
        within the connect timeout, naming the last connect error (chained as
        its cause) and, for the default address, how to start the embedded
        server; `CoordinatorClosedError` if this coordinator was started or
        closed before.  Cancelled while connecting, it closes what it opened.
        """
        if self._life.started:
            raise CoordinatorClosedError(
                "a Coordinator can be entered only once; call connect() again"
            )
        await self._life.start()

    async def _run_session(self, tg: anyio.abc.TaskGroup) -> None:
        session = self._session
        await tg.start(session.run)
        limit = self.settings.connect_timeout
        with anyio.move_on_after(limit):
            await session.wait_connected()
        if session.state is None:
            last = session.last_error
            hint = ""
            if _embedded_default(self.settings):
                hint = " (start one with 'aiocoord zk start', or set AIOCOORD_HOSTS)"
            raise ConnectionLostError(
                f"could not establish a session with {self.settings.hosts!r} within {limit:.1f}s"
                + (f": {last}" if last else "")
                + hint
            ) from last

    async def aclose(self) -> None:
        """Close the session on the server and stop the background tasks; from any task.

        Blocks until done (bounded by the request timeout).  Safe to call
        twice, and before `start()`.
        """
        await self._life.aclose()
        await self._session.close()

    async def close(self) -> None:
        """The same as `aclose()` (the name async objects use); kept for one release."""
        await self.aclose()

    # --- state -----------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState | None:
        """The current connection state (None before the first session or after close)."""
        return self._session.state

    @property
    def session_id(self) -> int | None:
        """The current session id, or None while there is none (after LOST, before the next)."""
        return self._session.session_id

    @property
    def session_password(self) -> bytes | None:
        """The session password; lets test tools attach to (and expire) the session."""
        return self._session.session_password

    @property
    def session_timeout(self) -> float:
        """The negotiated session timeout in seconds."""
        return self._session.timing.session_timeout

    @property
    def connected_address(self) -> tuple[str, int] | None:
        """The (host, port) this coordinator is connected to, or None."""
        return self._session.connected_address

    @property
    def closed(self) -> bool:
        return self._session.closed

    @property
    def hosts(self) -> str:
        """The host list the next connection attempt uses (``h1:2181,h2:2181``, no chroot).

        The settings' hosts at first; then what `set_hosts` gave, or the
        ensemble's members as its config (``/zookeeper/config``) lists them
        after a reconfig (``follow_ensemble``, on by default).
        """
        return self._session.host_list

    async def set_hosts(self, hosts: str) -> None:
        """Connect to `hosts` (``"h1:2181,h2:2181"``) from the next connection attempt on.

        kazoo's ``set_hosts``: for a host list learned elsewhere (a service
        registry, a new DNS record).  The current connection, if healthy, is
        kept; names are resolved at each attempt.  A chroot may follow the
        hosts only if it is this coordinator's own (it cannot change while the
        session lives).  Does not block; raises `ConfigError` naming ``hosts``
        for a bad host string, `CoordinatorClosedError` once closed.  A later
        ensemble config change replaces the list again (unless
        ``follow_ensemble=False``).
        """
        self._session.replace_hosts(hosts)

    async def wait_connected(self) -> None:
        """Return once CONNECTED, RECONNECTED or READ_ONLY; bound it with `anyio.fail_after`.

        Raises `CoordinatorClosedError` if the coordinator closes meanwhile.
        """
        await self._session.wait_connected()

    def connection_events(self) -> AsyncIterator[ConnectionEvent]:
        """Your own stream of `ConnectionEvent`: the current state first, then every transition.

        Each subscriber has its own buffer, so a slow one never loses an event
        nor blocks the others.  One that falls `SUBSCRIBER_BACKLOG` (4096) events
        behind has stopped reading: it gets what it had buffered, then
        `SubscriberLagged` (subscribe again for the current state).  Leaving the
        ``async for`` unsubscribes.  The stream ends when the coordinator closes.
        """
        return self._session.events.subscribe()

    def __repr__(self) -> str:
        state = self.state.value if self.state else ("CLOSED" if self.closed else "NEW")
        sid = f" session=0x{self.session_id:x}" if self.session_id else ""
        return f"<Coordinator {self.settings.hosts} {state}{sid}>"


def _embedded_default(settings: Settings) -> bool:
    """Whether `settings` point at the default address, where ``aiocoord zk start`` serves."""
    from .settings import Settings

    default = Settings.model_fields["hosts"].default
    host, _, port = default.partition(":")
    return settings.addresses in ([(host, int(port))], [("localhost", int(port))])


def connect(
    settings: Settings | str | None = None,
    /,
    *,
    acl_provider: AclProvider | None = None,
    **overrides: Any,
) -> Coordinator:
    """A `Coordinator` to use as ``async with connect(...) as coord``.

    Takes a `Settings`, a host string (``"h1:2181,h2:2181/chroot"``), or
    nothing (settings from ``AIOCOORD_*``; with no hosts there either, the
    embedded server ``aiocoord zk start [--port P]`` recorded if it runs, as
    the ``aiocoord`` command does, else 127.0.0.1:2181), plus keyword overrides of any
    Settings field (`session_timeout=`, `namespace=`, ...), validated the same
    way: an invalid value raises `ConfigError` naming the field.

    `acl_provider` (Curator's ``ACLProvider``) picks the ACL of every node this
    coordinator creates without an ACL of its own: called with the node's full
    server path (the namespace included), it returns a sequence of
    `aiocoord.zk.ACL`, or None for the default (creator-only with credentials,
    open without).  `TypeError` if it is not callable.
    """
    from .settings import Settings

    built = Settings.build(settings, **overrides)
    if settings is None and "hosts" not in built.model_fields_set:
        built = _with_recorded_embedded(built)
    return Coordinator(built, acl_provider=acl_provider)


def _with_recorded_embedded(settings: Settings) -> Settings:
    """`settings` on the embedded server ``aiocoord zk start`` recorded, if it runs.

    As the ``aiocoord`` command finds it: with no hosts configured (no
    argument, no ``hosts=``, no ``AIOCOORD_HOSTS``), the server recorded in
    the per-user folder (``aiocoord zk start --port P``) is used when its
    process is alive; else `settings` as they are (127.0.0.1:2181).  Reads one
    small file; does not connect.
    """
    from ._embedded_record import recorded_connect_string

    recorded = recorded_connect_string()
    if recorded is None:
        return settings
    return type(settings).build(settings, hosts=recorded)
