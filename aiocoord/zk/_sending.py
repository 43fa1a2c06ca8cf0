"""`Sender`: requests sent on a session's current connection, waiting for one if needed.

Every awaiting request of `ZkClient` goes through here.  While connected and
with the default deadline a request is sent at once (the connection's read
timeout bounds it); otherwise it waits for a connection within the request
deadline.  A connection lost with the request in flight raises
`ConnectionLostError`: the outcome is unknown, and only the caller knows
whether trying again is safe.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio

from ..errors import ConnectionLostError
from . import _errors
from ._connection import Connection, _Pending, wait_reply
from ._wire import OpCode, WireRequest

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("Sender",)

T = TypeVar("T")


class Sender:
    """Sends requests on `session`'s current connection; see the module docstring."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        # Settings are frozen: no per-request deadline unless configured.
        self._default_deadline = session.settings.request_timeout is None

    async def call(
        self,
        request: WireRequest,
        *,
        path: str | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        """Send one request on the current connection, waiting for one if needed.

        Returns ``(zxid, body)``; raises the `CoordError` for a non-zero error
        code, `ConnectionLostError` if no connection came within the deadline or
        the connection dropped with the request in flight (outcome unknown).
        """
        return await self._call(lambda conn: conn.call(request, on_reply=on_reply), path, timeout)

    async def call_packet(
        self,
        build: Callable[[int], bytes],
        opcode: OpCode,
        *,
        path: str | None = None,
        timeout: float | None = None,
    ) -> tuple[int, bytes]:
        """Like `call`, for a prebuilt packet (multi): `build(xid)` returns the framed bytes."""

        async def send(conn: Connection) -> tuple[int, int, bytes]:
            xid = conn.next_xid()
            return await wait_reply(conn.queue(build(xid), xid, opcode))

        return await self._call(send, path, timeout, check=False)

    def queue_packet(self, build: Callable[[int], bytes], opcode: OpCode) -> _Pending:
        """Queue a prebuilt packet on the current connection now, without awaiting anything.

        The entry's ``done`` future completes with the reply or the connection's
        end.  Raises `ConnectionLostError` at once when there is no connection
        (`call_packet` waits for one).
        """
        conn = self._session.connection_now()
        xid = conn.next_xid()
        return conn.queue(build(xid), xid, opcode)

    async def call_pipelined(
        self,
        requests: list[tuple[WireRequest, Callable[[int, int, bytes], None] | None]],
        *,
        path: str | None = None,
        timeout: float | None = None,
    ) -> list[tuple[int, int, bytes]]:
        """Send `requests` back to back on one connection; ``(err, zxid, body)`` of each.

        They leave in one write and the server answers them in order, so a
        write followed by a read costs one round trip and one wake-up.  Error
        codes are returned, not raised; `ConnectionLostError` as in `call`.
        """

        async def send(conn: Connection) -> list[tuple[int, int, bytes]]:
            pendings = [conn.submit(request, on_reply=on_reply) for request, on_reply in requests]
            return [await wait_reply(pending) for pending in pendings]

        return await self._on_connection(send, timeout)

    async def _call(
        self,
        send: Callable[[Connection], Awaitable[tuple[int, int, bytes]]],
        path: str | None,
        timeout: float | None,
        check: bool = True,
    ) -> tuple[int, bytes]:
        err, zxid, body = await self._on_connection(send, timeout)
        if check:
            _errors.check(err, path)
            return zxid, body
        return err, body

    async def _on_connection(
        self, send: Callable[[Connection], Awaitable[T]], timeout: float | None
    ) -> T:
        """`send` on the current connection, waiting for one within the request deadline."""
        session = self._session
        session.ensure_open()
        conn = session.connection
        if conn is not None and timeout is None and self._default_deadline:
            # Fast path: connected, default deadline.  A request in flight is bounded
            # by the connection's read timeout (2/3 of the session timeout), after
            # which the connection drops and the request fails with ConnectionLostError.
            return await send(conn)
        limit = timeout if timeout is not None else session.timing.request_timeout
        with anyio.move_on_after(limit):
            while True:
                conn = session.connection
                if conn is None:
                    await session.wait_usable()
                    continue
                return await send(conn)
        session.ensure_open()
        last = session.last_error
        raise ConnectionLostError(
            f"no answer from ZooKeeper within {limit:.2f}s"
            + (f" (last error: {last})" if last else "")
        )
