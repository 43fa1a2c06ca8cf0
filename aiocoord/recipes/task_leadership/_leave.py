"""How a worker leaves: its ``lead()`` bodies drain (bounded), then its nodes go in one transaction.

Deleting the leader nodes and the worker node together lets the other
workers see the tasks free and the worker gone at once, so the tasks move in
one hand-over instead of two.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import suppress

import anyio

from aiocoord.errors import NoNodeError, TransactionFailed
from aiocoord.zk import DeleteOp, ZkClient
from aiocoord.zk.paths import parent

from ._slot import TaskSlot

__all__ = ("delete_own_nodes", "drain")


async def drain(slots: Sequence[TaskSlot], bound: float) -> bool:
    """Wait until no ``lead()`` body of `slots` runs, for at most `bound` seconds; False if cut."""
    with anyio.move_on_after(bound) as scope:
        for slot in slots:
            await slot.drained()
    return not scope.cancelled_caught


async def delete_own_nodes(client: ZkClient, leaders_path: str, worker_path: str) -> None:
    """Delete the leader nodes this session owns and `worker_path`, in one transaction.

    Exactly the leader nodes the session owns (`ZkClient.ephemerals`), even
    one whose create was cut short.  If one of them is gone already, the rest
    are deleted one by one.  Raises `CoordError` as the requests do.
    """
    ours = await client.ephemerals(leaders_path)
    paths = [p for p in ours if parent(p) == leaders_path]
    paths.append(worker_path)
    try:
        await client.multi([DeleteOp(p) for p in paths])
    except TransactionFailed:
        for path in paths:
            with suppress(NoNodeError):
                await client.delete(path)
