"""Really expiring a coordinator's session on the server, from a test.

``aiocoord.server.kill_session`` does the work (a second connection takes the
session over and closes it, as Curator's old ``KillSession``); this adds what
a test has at hand: the coordinator, whose session and server it reads.
"""

from __future__ import annotations

from typing import Protocol

import anyio.to_thread

from ..server import kill_session

__all__ = ("expire_session",)


class _SessionHolder(Protocol):
    """What ``expire_session`` needs from a coordinator (duck-typed on purpose)."""

    @property
    def session_id(self) -> int | None: ...

    @property
    def session_password(self) -> bytes | None: ...

    @property
    def connected_address(self) -> tuple[str, int] | None: ...


async def expire_session(
    coord: _SessionHolder, address: tuple[str, int] | None = None, *, timeout: float = 10.0
) -> bool:
    """Expire ``coord``'s live session on the server; returns once the server has.

    ``address`` defaults to the server the coordinator is connected to. The
    coordinator itself notices at its next contact with the server (its socket
    has been closed). Returns False if the session had already expired. The
    blocking socket work runs in a worker thread, so the event loop stays free.
    """
    session_id = coord.session_id
    password = coord.session_password
    if session_id is None or password is None:
        raise ValueError("the coordinator has no session to expire (not connected yet?)")
    if address is None:
        address = coord.connected_address
        if address is None:
            raise ValueError("the coordinator is not connected; pass address=(host, port)")
    host, port = address
    return await anyio.to_thread.run_sync(
        lambda: kill_session(host, port, session_id, password, timeout)
    )
