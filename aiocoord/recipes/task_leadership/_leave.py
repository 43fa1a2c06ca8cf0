"""How a worker leaves: its ``lead()`` bodies drain (bounded), then its nodes go in one transaction.

Deleting the leader nodes and the worker node together lets the other
workers see the tasks free and the worker gone at once, so the tasks move in
one hand-over instead of two.  The worker node stops being kept
(`PersistentNode.aclose` with ``delete=False``) just before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import suppress

import anyio

from aiocoord.errors import CoordError, NoNodeError, TransactionFailed
from aiocoord.session import Coordinator
from aiocoord.zk import DeleteOp, ZkClient
from aiocoord.zk.paths import parent
from aiocoord.zk.states import ConnectionState

from ..membership import PersistentNode
from ._slot import TaskSlot

__all__ = ("delete_own_nodes", "drain", "leave")

log = logging.getLogger("aiocoord.recipes.task_leadership")

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


async def leave(
    coord: Coordinator,
    slots: Sequence[TaskSlot],
    registration: PersistentNode | None,
    worker_id: str,
    root: str,
    leaders_path: str,
    worker_path: str,
) -> None:
    """Drain the bodies (bounded), then delete this worker's nodes if its session still has them.

    `registration` (the worker node) stops being kept once the bodies have
    drained; its node is deleted here, with the leader nodes.
    """
    client = coord.client
    bound = client.session.timing.drain_bound
    if not await drain(slots, bound):
        log.warning("lead() bodies of %s did not finish within %.1fs", root, bound)
    registered = None
    if registration is not None:
        await registration.aclose(delete=False)
        stat = registration.stat
        registered = stat.ephemeral_owner if stat is not None else None
        if registered != coord.client.session.session_id:
            # A create in this session whose node the cache has not shown yet is ours too.
            registered = registration.created_in
    session = coord.client.session.session_id
    if session is None or registered != session or coord.client.session.closed:
        return  # the session is gone (or closes with the coordinator), and its nodes with it
    if coord.state not in _CONNECTED or coord.connected_address is None:
        # Disconnected, or the coordinator's own tasks were cancelled with ours: the
        # nodes go with the session; waiting for a connection would only delay the exit.
        log.info("worker %s left %s without deleting its nodes", worker_id, root)
        return
    with anyio.move_on_after(client.session.timing.request_timeout):
        try:
            await delete_own_nodes(client, leaders_path, worker_path)
        except CoordError as exc:
            log.warning("could not delete the nodes of worker %s: %s", worker_id, exc)
    log.info("worker %s left %s", worker_id, root)


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
