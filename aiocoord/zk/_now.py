"""`SendNow`: requests a `ZkClient` sends from synchronous code, before the caller yields.

A watch callback that lists the children as the notification is read, a latch
that sends its node's delete the moment it is left, a cache that reads what a
notification names: each request is written at once, and the returned
function awaits its outcome (or, for `read_now`, a callback takes it where the
reply is read).  No retry across a reconnect; `ConnectionLostError` at once
when there is no connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import cast

from ..errors import ZooKeeperError
from . import _errors, _replies, _wire
from ._arguments import check_version
from ._sending import outcome_of
from ._view import SessionView
from .paths import validate_path
from .types import Node

__all__ = ("SendNow",)

log = logging.getLogger("aiocoord.zk.client")


class SendNow(SessionView):
    """The requests of a `ZkClient` that are sent without awaiting; see the module docstring."""

    def children_now(
        self, path: str, on_reply: Callable[[list[str]], None]
    ) -> Callable[[], Awaitable[list[str]]]:
        """`children`, sent at once from synchronous code (a watch callback, say).

        `on_reply(names)` runs where the reply is read, before any task wakes,
        so it must be quick and must not await (what it raises is logged and
        dropped); an error reply or a malformed one does not call it.  The
        returned function awaits the same reply: the names, or the error
        `children` raises (`ProtocolError` for a malformed reply).  No retry
        across a reconnect.  Raises `ConnectionLostError` at once when there is
        no connection.
        """
        validate_path(path, allow_reserved=True)
        session = self._session
        conn = session.connection_now()

        def parse(body: bytes) -> list[str]:
            names = _replies.parse_children(body)  # a malformed reply stops here
            try:
                on_reply(list(names))
            except Exception:
                log.exception("children of %s: the reply's callback failed", path)
            return names

        request = _wire.get_children_request(session.server_path(path), False)
        pending = conn.submit(request, parse=parse)

        async def result() -> list[str]:
            err, names = await outcome_of(pending)
            _errors.check(err, path)
            return list(cast(list[str], names))

        return result

    def delete_now(self, path: str, version: int = -1) -> Callable[[], Awaitable[None]]:
        """`delete`, sent at once from synchronous code; the returned function awaits its outcome.

        For a recipe giving a node back: the request leaves before the caller's
        task yields, rather than a task switch later.  The outcome is what
        `delete` raises (`NoNodeError`, `BadVersionError`, `ProtocolError` ...).
        No retry across a reconnect.  Raises `ConnectionLostError` at once when
        there is no connection.
        """
        validate_path(path)
        version = check_version(version)
        session = self._session
        conn = session.connection_now()
        pending = conn.submit(_wire.delete_request(session.server_path(path), version))

        async def result() -> None:
            err, _ = await outcome_of(pending)
            _errors.check(err, path)

        return result

    def read_now(
        self,
        path: str,
        on_reply: Callable[[Node | list[str] | ZooKeeperError], None],
        *,
        children: bool = False,
    ) -> None:
        """`get` (or, with `children`, `children`) sent at once; the answer goes to `on_reply`.

        For a cache that follows a watch's notifications: `on_reply` runs where
        the reply is read, in the connection's order with the notifications and
        every other reply, with the node (or the child names) or the error the
        read met (`NoNodeError`, `NoAuthError` ...), never raised.  It must be
        quick and must not await; what it raises is logged and dropped.  It is
        not called if the connection ends first (follow the connection states to
        learn that).  Raises `ConnectionLostError` at once when there is no
        connection.
        """
        validate_path(path, allow_reserved=True)
        session = self._session
        conn = session.connection_now()
        sp = session.server_path(path)
        parse: Callable[[bytes], Node | list[str]]
        if children:
            request, parse = _wire.get_children_request(sp, False), _replies.parse_children
        else:
            request, parse = _wire.get_data_request(sp, False), _replies.parse_node

        def answered(err: int, _zxid: int, body: bytes) -> None:
            # A malformed body raises here, before the callback: the connection drops.
            answer = parse(body) if err == 0 else _errors.error_for(err, path)
            try:
                on_reply(answer)
            except Exception:
                log.exception("read of %s: the reply's callback failed", path)

        conn.submit(request, on_reply=answered)
