"""One-shot watches set by a request: registered by its reply, removed when no longer wanted.

A read that sets a watch (`get_watch`, `exists_watch`, `children_watch`,
`set_and_get`) runs inside `arming`; a wait given up removes its watch with
`remove_watch` (here and on the server) or `forget_watch` (here only).  The
server keeps one watch per path and connection, whatever the number of
requests that set it, so it is asked to drop one only once nothing of this
client watches the path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from ..errors import CoordError
from . import _wire
from ._watches import Watch, WatchKind

if TYPE_CHECKING:
    from ._session import ZkSession

__all__ = ("arming", "forget_watch", "remove_watch")


@contextmanager
def arming(
    session: ZkSession, watch: Watch, server_path: str, kinds: dict[int, WatchKind]
) -> Iterator[Callable[[int, int, bytes], None]]:
    """Around a request that sets a one-shot watch; yields the reply callback to send with it.

    The reply registers `watch` (as ``kinds[error code]``; no watch for other
    codes) before any notification that follows it is read.  A request given
    up (cancelled, or failing) leaves no watch: registered already, it is
    removed; still in flight, its reply does not register it, and the watch
    the server set is removed then.
    """
    watches = session.watches
    abandoned = False

    def on_reply(err: int, _zxid: int, _body: bytes) -> None:
        kind = kinds.get(err)
        if kind is None:
            return
        watch.kind = kind
        if abandoned:
            _unwatch_on_server(session, server_path)
        else:
            watches.add(watch, server_path)

    watches.arm(server_path)
    try:
        yield on_reply
    except BaseException:
        watches.disarm(server_path)
        abandoned = True
        if watches.discard(watch, server_path):
            _unwatch_on_server(session, server_path)
        raise
    watches.disarm(server_path)


def remove_watch(session: ZkSession, watch: Watch) -> None:
    """`ZkClient.remove_watch`: forget `watch` and ask the server to drop its side."""
    if watch.fired:
        return
    server_path = _server_path(session, watch)
    if session.watches.discard(watch, server_path):
        _unwatch_on_server(session, server_path)


def forget_watch(session: ZkSession, watch: Watch) -> None:
    """`ZkClient.forget_watch`: forget `watch`, sending nothing."""
    if not watch.fired:
        session.watches.discard(watch, _server_path(session, watch))


def _server_path(session: ZkSession, watch: Watch) -> str:
    # The config watch is on /zookeeper/config itself, outside any chroot.
    return watch.path if getattr(watch, "absolute", False) else session.server_path(watch.path)


def _unwatch_on_server(session: ZkSession, server_path: str) -> None:
    """Ask the server to drop our watches on `server_path`, if nothing of ours watches there.

    Sent without waiting for the answer (a server without one to remove says
    so; nothing to do); while disconnected there is nothing to send: the
    server's watches went with the connection, and a forgotten watch is not
    restored.
    """
    if session.closed or session.watches.watched(server_path):
        return
    with suppress(CoordError, ValueError):
        session.connection_now().submit(_wire.remove_watches_request(server_path))
