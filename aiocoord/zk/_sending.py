"""`Sender`: requests sent on a session's current connection, waiting for one if needed.

Every awaiting request of `ZkClient` goes through here.  A request has one
`Deadline` (the request timeout unless given), which a caller may carry across
retries and reconnect waits so that their total stays within it.  While
connected, with at least a read timeout left, a request is sent at once (the
connection's read timeout bounds it); otherwise it waits for a connection
within the deadline.  A connection lost with the request in flight raises
`ConnectionLostError`: the outcome is unknown, and only the caller knows
whether trying again is safe.  A deadline that passes raises
`ConnectionLostError` saying how long it waited and, when there is no
connection, why (the last connect error, chained as the cause).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from ..errors import ConnectionLostError
from . import _errors
from ._connection import Connection, _Pending, wait_reply
from ._wire import OpCode, WireRequest

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("Deadline", "Sender", "unreachable")

T = TypeVar("T")


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


def unreachable(session: ZkSession, deadline: Deadline, what: str) -> ConnectionLostError:
    """`what` failed once `deadline` passed: the error says after how long, and why if known.

    Without a connection, the last connect error is named and chained as the
    cause (``ConnectionRefusedError`` from which host, say); with one, the
    server was too slow and no earlier error explains it.
    """
    last = session.last_error if session.connection is None else None
    error = ConnectionLostError(
        f"{what} after {deadline.elapsed():.2f}s (timeout {deadline.limit:g}s)"
        + (f"; not connected: {last}" if last is not None else "")
    )
    if last is not None:
        error.__cause__ = last
    return error


class Sender:
    """Sends requests on `session`'s current connection; see the module docstring."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session

    async def call(
        self,
        request: WireRequest,
        *,
        path: str | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        timeout: float | None = None,
        deadline: Deadline | None = None,
    ) -> tuple[int, bytes]:
        """Send one request on the current connection, waiting for one if needed.

        Returns ``(zxid, body)``; raises the `CoordError` for a non-zero error
        code, `ConnectionLostError` if no connection came within the deadline
        (`deadline`, else `timeout`, else the request timeout from now) or the
        connection dropped with the request in flight (outcome unknown).
        """
        return await self._call(
            lambda conn: conn.call(request, on_reply=on_reply), path, timeout, deadline
        )

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

        return await self._call(send, path, timeout, None, check=False)

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

        return await self._on_connection(send, timeout, None)

    async def _call(
        self,
        send: Callable[[Connection], Awaitable[tuple[int, int, bytes]]],
        path: str | None,
        timeout: float | None,
        deadline: Deadline | None,
        check: bool = True,
    ) -> tuple[int, bytes]:
        err, zxid, body = await self._on_connection(send, timeout, deadline)
        if check:
            _errors.check(err, path)
            return zxid, body
        return err, body

    async def _on_connection(
        self,
        send: Callable[[Connection], Awaitable[T]],
        timeout: float | None,
        deadline: Deadline | None,
    ) -> T:
        """`send` on the current connection, waiting for one within the deadline."""
        session = self._session
        session.ensure_open()
        conn = session.connection
        read_timeout = session.timing.read_timeout
        if deadline is None:
            limit = timeout if timeout is not None else session.timing.request_timeout
            if conn is not None and limit >= read_timeout:
                # Fast path: connected, and the connection's read timeout (after which it
                # drops and the request fails with ConnectionLostError) ends first.
                return await send(conn)
            deadline = Deadline.after(limit)
        elif conn is not None and deadline.remaining() >= read_timeout:
            return await send(conn)
        with anyio.CancelScope(deadline=deadline.at):
            while True:
                conn = session.connection
                if conn is None:
                    await session.wait_usable()
                    continue
                return await send(conn)
        session.ensure_open()
        raise unreachable(session, deadline, "no answer from ZooKeeper")
