"""`Coordinator` and `connect()`: one ZooKeeper session, published as connection states.

`async with aiocoord.connect(...) as coord` returns once the first session is
established (or raises `ConnectionLostError` after the connect timeout), keeps
the session alive and heals it after loss, and on exit closes the session on
the server, so its ephemeral nodes vanish at once, and stops every task it
started.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from .errors import ConnectionLostError, CoordinatorClosedError
from .settings import Settings
from .zk import ZkClient, ZkSession
from .zk.states import ConnectionEvent, ConnectionState

__all__ = ("ConnectionEvent", "ConnectionState", "Coordinator", "connect")

log = logging.getLogger(__name__)


class Coordinator:
    """One ZooKeeper session and its connection-state stream; recipes take it first.

    Use it as ``async with``: entering blocks until the first session is
    established; leaving closes the session and cancels everything it runs.
    """

    def __init__(self, settings: Settings) -> None:
        if not isinstance(settings, Settings):
            raise TypeError(f"settings must be aiocoord.Settings, not {type(settings).__name__}")
        self.settings = settings
        self.client = ZkClient(ZkSession(settings))
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Coordinator:
        if self._entered:
            raise CoordinatorClosedError(
                "a Coordinator can be entered only once; call connect() again"
            )
        self._entered = True
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self.client.session.run)
            limit = self.settings.connect_timeout
            with anyio.move_on_after(limit):
                await self.client.wait_connected()
            if self.client.state is None:
                last = self.client.last_error
                raise ConnectionLostError(
                    f"could not establish a session with {self.settings.hosts!r} within {limit:.1f}s"
                    + (f": {last}" if last else "")
                )
        except BaseException:
            await self.client.session.close()
            tg.cancel_scope.cancel()
            self._tg = None
            await tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self.close()
        return None

    async def close(self) -> None:
        """Close the session and stop the background tasks.  Safe to call twice."""
        await self.client.session.close()
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)

    # --- state -----------------------------------------------------------------------------

    @property
    def state(self) -> ConnectionState | None:
        """The current connection state (None before the first session or after close)."""
        return self.client.state

    @property
    def session_id(self) -> int | None:
        """The current session id, or None while there is none (after LOST, before the next)."""
        return self.client.session_id

    @property
    def session_password(self) -> bytes | None:
        """The session password; lets test tools attach to (and expire) the session."""
        return self.client.session_password

    @property
    def session_timeout(self) -> float:
        """The negotiated session timeout in seconds."""
        return self.client.session_timeout

    @property
    def connected_address(self) -> tuple[str, int] | None:
        """The (host, port) this coordinator is connected to, or None."""
        return self.client.connected_address

    @property
    def closed(self) -> bool:
        return self.client.closed

    async def wait_connected(self) -> None:
        """Return once CONNECTED, RECONNECTED or READ_ONLY; bound it with `anyio.fail_after`.

        Raises `CoordinatorClosedError` if the coordinator closes meanwhile.
        """
        await self.client.wait_connected()

    def connection_events(self) -> AsyncIterator[ConnectionEvent]:
        """Your own stream of `ConnectionEvent`: the current state first, then every transition.

        Each subscriber has an unbounded buffer, so a slow one never loses an
        event nor blocks the others; leaving the ``async for`` unsubscribes.  The
        stream ends when the coordinator closes.
        """
        return self.client.connection_events()

    def __repr__(self) -> str:
        state = self.state.value if self.state else ("CLOSED" if self.closed else "NEW")
        sid = f" session=0x{self.session_id:x}" if self.session_id else ""
        return f"<Coordinator {self.settings.hosts} {state}{sid}>"


def connect(settings: Settings | str | None = None, /, **overrides: Any) -> Coordinator:
    """A `Coordinator` to use as ``async with connect(...) as coord``.

    Takes a `Settings`, a host string (``"h1:2181,h2:2181/chroot"``), or
    nothing (settings from ``AIOCOORD_*``), plus keyword overrides of any
    Settings field (`session_timeout=`, `namespace=`, ...), validated the same
    way: an invalid value raises `ConfigError` naming the field.
    """
    return Coordinator(Settings.build(settings, **overrides))
