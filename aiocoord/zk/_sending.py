"""`Sender`: requests sent on a session's current connection, waiting for one if needed.

Every awaiting request of `ZkClient` goes through here (the session knows
nothing of it).  A request has one
`Deadline` (the request timeout unless given), which a caller may carry across
retries and reconnect waits so that their total stays within it.  While
connected, with at least a read timeout left, a request is sent at once (the
connection's read timeout bounds it); otherwise it waits for a connection
within the deadline.  A connection lost with the request in flight raises
`ConnectionLostError`, a malformed reply `ProtocolError` (the connection is
dropped): the outcome is unknown, and only the caller knows whether trying
again is safe.  A deadline that passes raises `ConnectionLostError` saying how
long it waited and, when there is no connection, why (the last connect error,
chained as the cause).  Each reply is read by its request's parser where the
packet arrives (`Connection._dispatch`), never here.  An idempotent read is
tried again after a connection loss within one request deadline (`retrying`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.lowlevel

from ..errors import ConnectionLostError, CoordError, ReplyTooLargeError, SessionExpiredError
from . import _errors
from ._connection import Connection, _Pending
from ._timing import Deadline
from ._wire import OpCode, WireRequest

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("Sender", "outcome_of")

T = TypeVar("T")
U = TypeVar("U")


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
    ) -> None:
        """Send a request whose reply carries nothing but its error code; see `fetch`."""
        await self.fetch(
            request, _nothing, path=path, on_reply=on_reply, timeout=timeout, deadline=deadline
        )

    async def fetch(
        self,
        request: WireRequest,
        parse: Callable[[bytes], T],
        *,
        path: str | None = None,
        on_reply: Callable[[int, int, bytes], None] | None = None,
        timeout: float | None = None,
        deadline: Deadline | None = None,
    ) -> T:
        """Send one request on the current connection, waiting for one if needed.

        Returns what `parse` read from the reply (it runs where the reply is
        read); raises the `CoordError` for a non-zero error code, `ProtocolError`
        for a malformed reply, `ConnectionLostError` if no connection came within
        the deadline (`deadline`, else `timeout`, else the request timeout from
        now) or the connection dropped with the request in flight (outcome
        unknown), `ReplyTooLargeError` naming `path` for a reply over the
        packet limit (the connection stays).
        """

        async def send(conn: Connection) -> tuple[int, object]:
            return await outcome_of(conn.submit(request, on_reply=on_reply, parse=parse))

        try:
            err, value = await self._on_connection(send, timeout, deadline)
        except ReplyTooLargeError as exc:
            if path is None or exc.path is not None:
                raise
            raise ReplyTooLargeError(exc.size, exc.limit, path=path) from None
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

        err, value = await self._on_connection(send, timeout, None)
        return err, cast(T | None, value)

    def send_now(
        self, request: WireRequest, parse: Callable[[bytes], T], *, path: str | None = None
    ) -> Callable[[], Awaitable[T]]:
        """Write one request to the current connection now; the returned function awaits it.

        It returns what `parse` read from the reply or raises as `fetch` does;
        no retry across a reconnect.  Raises `ConnectionLostError` at once when
        there is no connection (`fetch` waits for one).
        """
        pending = self._session.connection_now().submit(request, parse=parse)

        async def result() -> T:
            err, value = await outcome_of(pending)
            _errors.check(err, path)
            return cast(T, value)

        return result

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

        return await self._on_connection(send, timeout, None)

    async def fetch_then(
        self,
        request: WireRequest,
        parse: Callable[[bytes], T],
        then: WireRequest,
        then_parse: Callable[[bytes], U],
        *,
        path: str | None = None,
    ) -> tuple[T, U | None]:
        """`fetch` `request`, with `then` sent right behind it on the same connection.

        The server answers a session's requests in order, so `then` sees what
        `request` did, at no extra round trip.  `request`'s outcome is raised
        or returned as `fetch` does; `then`'s is None when it failed (an error
        code, a malformed reply, or the connection lost between the two
        replies): `request`'s outcome stands, and the caller asks again.
        """

        async def send(conn: Connection) -> tuple[tuple[int, object], tuple[int, object] | None]:
            first = conn.submit(request, parse=parse)
            second = conn.submit(then, parse=then_parse)
            answer = await outcome_of(first)
            try:
                return answer, await outcome_of(second)
            except CoordError:  # the connection lost after the first reply, a malformed one
                return answer, None

        (err, value), after = await self._on_connection(send, None, None)
        _errors.check(err, path)
        return cast(T, value), (cast(U, after[1]) if after is not None and after[0] == 0 else None)

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
                    await session.wait_connected()
                    continue
                return await send(conn)
        session.ensure_open()
        raise session.unreachable(deadline, "no answer from ZooKeeper")

    async def read(
        self, request: WireRequest, parse: Callable[[bytes], T], *, path: str | None = None
    ) -> T:
        """`fetch` an idempotent read, `retrying` it after a connection loss."""
        return await self.retrying(
            lambda deadline: self.fetch(request, parse, path=path, deadline=deadline)
        )

    async def retrying(self, op: Callable[[Deadline], Awaitable[T]]) -> T:
        """Run an idempotent read, again after a connection loss, within one request deadline.

        `op` sends with the deadline it is given, so waiting for a connection,
        the requests and the retries together take at most the request timeout;
        the error of the try that ends past it is raised (it names the time
        waited and the cause).
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


def _nothing(_body: bytes) -> None:
    return None


async def outcome_of(pending: _Pending) -> tuple[int, object]:
    """Wait for a queued request's reply: ``(err, value read by its parser)``."""
    if not pending.done.done():
        await pending.done
    if pending.error is not None:
        raise pending.error
    return pending.header[1], pending.value
