"""What a new connection sends before anything else: SASL, auth, watches, the namespace.

The SASL login comes first, since a server that requires it refuses every
other request before it (`_sasl`); without SASL, the first connection asks
once whether the server requires it.  Auth is replayed on every connection
(the server keeps identities per connection); on the same session every
watch is restored with SetWatches2 and the last zxid seen (so the server
fires what changed meanwhile); on a new session the persistent watches are
added again; the namespace (chroot) is created on every new session, since
the server may have been replaced by an empty one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence

import anyio

from ..errors import AuthFailedError, ConnectionLostError, NodeExistsError
from . import _errors, _wire
from ._connection import Connection
from ._sasl import SaslLogin, authenticate, probe_required
from ._watches import WatchKind, WatchRegistry
from .types import ACL, CreateMode

__all__ = ("close_session", "prime")

_SET_WATCHES_CHUNK = 128 * 1024  # the Java client splits SetWatches the same way


async def prime(
    conn: Connection,
    *,
    sasl: SaslLogin | None,
    probe_sasl: bool,
    auth: Sequence[tuple[str, bytes]],
    watches: WatchRegistry,
    new_session: bool,
    last_zxid: int,
    namespace: str | None,
    acl: Callable[[str], tuple[ACL, ...]],
) -> None:
    """Prime `conn` (its reader must be running); `namespace` is created when given.

    `probe_sasl` (without `sasl`) asks whether the server requires a SASL
    login; `acl(server_path)` is the ACL of each namespace node created.
    Raises `AuthFailedError` for a refused login or credentials (naming the
    scheme or mechanism, never the secret).
    """
    if sasl is not None:
        await authenticate(conn, sasl)
    elif probe_sasl:
        await probe_required(conn)
    for scheme, credentials in auth:
        err, _, _ = await conn.call(_wire.auth_request(scheme, credentials), xid=_wire.AUTH_XID)
        if err:
            raise AuthFailedError(f"{scheme} credentials rejected")
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


async def _ensure_namespace(
    conn: Connection, namespace: str, acl: Callable[[str], tuple[ACL, ...]]
) -> None:
    node = ""
    for part in namespace.strip("/").split("/"):
        node += "/" + part
        req = _wire.create_request(node, b"", CreateMode.PERSISTENT, None, acl(node))
        err, _, _ = await conn.call(req)
        if err and err != NodeExistsError.code:
            _errors.check(err, node)


async def close_session(conn: Connection, bound: float) -> None:
    """End the connection's session on the server within `bound` (its reader must be running)."""
    with anyio.move_on_after(bound):
        with contextlib.suppress(ConnectionLostError):
            await conn.call(_wire.close_request())
