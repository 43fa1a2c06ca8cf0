"""Revocation, Curator's convention: ``__REVOKE__`` written to a holder's node asks it to let go.

Curator's ``Revoker.attemptRevoke(client, nodePath)`` writes the bytes
``__REVOKE__`` to a lock node; a holder made revocable
(``InterProcessMutex.makeRevocable``) keeps a data watch on its own node and,
when the data reads ``__REVOKE__``, is asked to release.  Revocation is
cooperative: a holder that is not revocable ignores it.

`Revocable` is the holder's half for the locks of this folder: once granted,
a data watch on our node; a change is read again (from a chore of the
session, which sets the watch again) and ``__REVOKE__`` ends the hold with
the reason ``"revoked"``, which cancels the ``async with`` block, then
`LockLost`.  `revoke` is the other half: it writes ``__REVOKE__`` to the
current holders' nodes of a lock path (the first node of a mutex, every
holding node of a read/write lock), or to one node given by its path.
"""

from __future__ import annotations

import contextlib
import re

from ..._checks import check_coordinator
from ...errors import CoordError, NoNodeError
from ...session import Coordinator
from ...zk import EventType, Watch, WatchedEvent, ZkClient
from ...zk.paths import basename, join, validate_path
from .._queue import LOCK, READ_WRITE, WRITE_MARKER, Ordering, first, reader
from ._hold import Hold

__all__ = ("REVOKE", "Revocable", "revoke")

REVOKE = b"__REVOKE__"  # Curator's LockInternals.REVOKE_MESSAGE

# A lock node itself (mutex, read or write lock), rather than the lock's path.
_NODE = re.compile(r".*(lock-|__READ__|__WRIT__)\d{10}")


class Revocable:
    """Ends `hold` when ``__REVOKE__`` is written to its node, until `stop`."""

    __slots__ = ("_client", "_hold", "_watch")

    def __init__(self, client: ZkClient, hold: Hold) -> None:
        self._client = client
        self._hold = hold
        self._watch: Watch | None = None

    async def arm(self) -> None:
        """Read our node with a data watch; end the hold if it already reads ``__REVOKE__``."""
        hold = self._hold
        if hold.lost is not None:
            return
        try:
            node, watch = await self._client.get_watch(hold.node.path)
        except CoordError:  # gone, or no connection: the hold's own rules apply
            return
        if hold.lost is not None:
            self._client.remove_watch(watch)
            return
        self._watch = watch
        if node.data == REVOKE:
            hold.end("revoked")
            return
        watch.add_callback(self._changed)

    def _changed(self, event: WatchedEvent) -> None:
        """Our node's data changed (a callback: no await): read it again from a chore."""
        if event.type is EventType.DATA_CHANGED and self._hold.lost is None:
            name = f"{self._hold.recipe} {self._hold.tenure.path}: revocation watch"
            self._client.session.start_chore(self.arm, name)

    def stop(self) -> None:
        """No more watching (released or lost; safe to call twice)."""
        watch, self._watch = self._watch, None
        if watch is not None and not watch.fired:
            self._client.remove_watch(watch)


async def revoke(coord: Coordinator, path: str) -> list[str]:
    """Ask the holder of the lock at `path` to let go: write ``__REVOKE__`` to its node.

    `path` is a lock's path (a mutex's, or a read/write lock's: then every
    holding node, all the readers or the one writer) or one lock node's path,
    as Curator's ``Revoker.attemptRevoke`` takes.  Revocable holders, Curator's
    or aiocoord's, end their hold; others ignore it.  Returns the paths of the
    nodes written (none when the lock is free).  Waits for the writes; raises
    `InvalidPathError` for a bad path and `CoordError` subclasses for the
    server's refusals.
    """
    check_coordinator(coord)
    validate_path(path)
    client = coord.client
    if _NODE.fullmatch(basename(path)):
        targets = [path]
    else:
        try:
            names = await client.children(path)
        except NoNodeError:
            names = []
        if any(READ_WRITE.marker in n or WRITE_MARKER in n for n in names):
            order = Ordering(names, READ_WRITE).names
            targets = [
                join(path, n)
                for i, n in enumerate(order)
                if (first if WRITE_MARKER in n else reader)(order, i) is None
            ]
        else:
            order = Ordering(names, LOCK).names
            targets = [join(path, order[0])] if order else []
    written: list[str] = []
    for target in targets:
        with contextlib.suppress(NoNodeError):
            await client.set(target, REVOKE)
            written.append(target)
    return written
