"""`Sender`: requests sent on a session's current connection, waiting for one if needed.

Every awaiting request of `ZkClient` goes through here.  While connected and
with the default deadline a request is sent at once (the connection's read
timeout bounds it); otherwise it waits for a connection within the request
deadline.  A connection lost with the request in flight raises
`ConnectionLostError`, a malformed reply `ProtocolError` (the connection is
dropped): the outcome is unknown, and only the caller knows whether trying
again is safe.  Each reply is read by its request's parser where the packet
arrives (`Connection._dispatch`), never here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio

from ..errors import ConnectionLostError
from . import _errors
from ._connection import Connection, _Pending
from ._wire import OpCode, WireRequest

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("Sender", "outcome_of")

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
    ) -> None:
        """Send a request whose reply carries nothing but its error code; see `fetch`."""
        await self.fetch(request, _nothing, path=path, on_reply=on_reply, timeout=timeout)

    async def fetch(
        self,
        request: WireRequest,
        parse: Callable[[bytes], T],
        *,
        path: str | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        timeout: float | None = None,
    ) -> T:
        """Send one request on the current connection, waiting for one if needed.

        Returns what `parse` read from the reply (it runs where the reply is
        read); raises the `CoordError` for a non-zero error code, `ProtocolError`
        for a malformed reply, `ConnectionLostError` if no connection came within
        the deadline or the connection dropped with the request in flight
        (outcome unknown).
        """

        async def send(conn: Connection) -> tuple[int, object]:
            return await outcome_of(conn.submit(request, on_reply=on_reply, parse=parse))

        err, value = await self._on_connection(send, timeout)
        _errors.check(err, path)
        return cast(T, value)

    async def fetch_packet(
        self,
        build: Callable[[int], bytes],
        opcode: OpCode,
        parse: Callable[[bytes], T],
        *,
        timeout: float | None = None,
    ) -> tuple[int, T | None]:
        """Like `fetch`, for a prebuilt packet (multi): `build(xid)` returns the framed bytes.

        Returns ``(err, value)``: the error code is not raised, and the value
        is None unless the error code is 0.
        """

        async def send(conn: Connection) -> tuple[int, object]:
            xid = conn.next_xid()
            return await outcome_of(conn.queue(build(xid), xid, opcode, parse=parse))

        err, value = await self._on_connection(send, timeout)
        return err, cast(T | None, value)

    def queue_packet(
        self, build: Callable[[int], bytes], opcode: OpCode, parse: Callable[[bytes], object]
    ) -> _Pending:
        """Queue a prebuilt packet on the current connection now, without awaiting anything.

        The entry's ``done`` future completes with the reply (read by `parse`
        into its ``value``) or the connection's end.  Raises `ConnectionLostError`
        at once when there is no connection (`fetch_packet` waits for one).
        """
        conn = self._session.connection_now()
        xid = conn.next_xid()
        return conn.queue(build(xid), xid, opcode, parse=parse)

    async def fetch_pipelined(
        self,
        requests: list[
            tuple[WireRequest, Callable[[bytes], object], Callable[[int, int, bytes], None] | None]
        ],
        *,
        timeout: float | None = None,
    ) -> list[tuple[int, Any]]:
        """Send `(request, parse, on_reply)`s back to back on one connection; ``(err, value)`` of each.

        They leave in one write and the server answers them in order, so a
        write followed by a read costs one round trip and one wake-up.  Error
        codes are returned, not raised (a value is None unless its code is 0);
        `ProtocolError` and `ConnectionLostError` as in `fetch`.
        """

        async def send(conn: Connection) -> list[tuple[int, Any]]:
            pendings = [
                conn.submit(request, on_reply=on_reply, parse=parse)
                for request, parse, on_reply in requests
            ]
            return [await outcome_of(pending) for pending in pendings]

        return await self._on_connection(send, timeout)

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


def _nothing(_body: bytes) -> None:
    return None


async def outcome_of(pending: _Pending) -> tuple[int, object]:
    """Wait for a queued request's reply: ``(err, value read by its parser)``."""
    if not pending.done.done():
        await pending.done
    if pending.error is not None:
        raise pending.error
    return pending.header[1], pending.value
