"""What a new connection sends before anything else: auth, watches, the namespace.

Auth is replayed on every connection; on the same session every watch is
restored with SetWatches2 and the last zxid seen (so the server fires what
changed meanwhile); on a new session the persistent watches are added again;
the namespace (chroot) is created on every new session, since the server may
have been replaced by an empty one.
"""

from __future__ import annotations

import contextlib

import anyio

from ..errors import AuthFailedError, ConnectionLostError, NodeExistsError
from . import _errors, _wire
from ._connection import Connection
from ._watches import WatchKind, WatchRegistry
from .types import ACL, CreateMode

__all__ = ("close_session", "prime")

_SET_WATCHES_CHUNK = 128 * 1024  # the Java client splits SetWatches the same way


async def prime(
    conn: Connection,
    *,
    auth: str | None,
    watches: WatchRegistry,
    new_session: bool,
    last_zxid: int,
    namespace: str | None,
    acl: tuple[ACL, ...],
) -> None:
    """Prime `conn` (its reader must be running); `namespace` is created when given."""
    if auth:
        err, _, _ = await conn.call(_wire.auth_request("digest", auth.encode()), xid=_wire.AUTH_XID)
        if err:
            raise AuthFailedError("digest credentials rejected")
    if new_session:
        for kind, path in list(watches.persistent_keys()):
            recursive = kind is WatchKind.PERSISTENT_RECURSIVE
            err, _, _ = await conn.call(_wire.add_watch_request(path, recursive))
            _errors.check(err, path)
    else:
        await _restore_watches(conn, watches, last_zxid)
    if namespace:
        await _ensure_namespace(conn, namespace, acl)


async def _restore_watches(conn: Connection, watches: WatchRegistry, last_zxid: int) -> None:
    snap = watches.snapshot()
    if not any(snap.values()):
        return
    batch: dict[WatchKind, list[str]] = {k: [] for k in WatchKind}
    size = 0
    items = [(kind, path) for kind, paths in snap.items() for path in paths]
    for i, (kind, path) in enumerate(items):
        batch[kind].append(path)
        size += len(path) + 4
        if size >= _SET_WATCHES_CHUNK or i == len(items) - 1:
            req = _wire.set_watches2_request(
                last_zxid,
                data=batch[WatchKind.DATA],
                exist=batch[WatchKind.EXIST],
                child=batch[WatchKind.CHILD],
                persistent=batch[WatchKind.PERSISTENT],
                persistent_recursive=batch[WatchKind.PERSISTENT_RECURSIVE],
            )
            err, _, _ = await conn.call(req, xid=_wire.SET_WATCHES_XID)
            _errors.check(err, None)
            batch = {k: [] for k in WatchKind}
            size = 0


async def _ensure_namespace(conn: Connection, namespace: str, acl: tuple[ACL, ...]) -> None:
    node = ""
    for part in namespace.strip("/").split("/"):
        node += "/" + part
        req = _wire.create_request(node, b"", CreateMode.PERSISTENT, None, acl)
        err, _, _ = await conn.call(req)
        if err and err != NodeExistsError.code:
            _errors.check(err, node)


async def close_session(conn: Connection, bound: float) -> None:
    """End the connection's session on the server within `bound` (its reader must be running)."""
    with anyio.move_on_after(bound):
        with contextlib.suppress(ConnectionLostError):
            await conn.call(_wire.close_request())
