"""Run slots: at most N runs of one job name at once across the fleet (``concurrency=N``).

    <root>/slots/<name>/<i>   EPHEMERAL, i in 0..N-1, data: the holder's token

A worker takes a slot before it marks a run RUNNING and gives it back when
the run ends, whatever the outcome.  Taking one is a create of the first free
index (the server lets one create win), so no more than N exist; when all
are taken, the worker waits on a child watch of the folder.  The nodes are
ephemeral, so a dead worker's slots go when its session ends (as Curator's
semaphore leases do).  A create whose reply was lost is recognised by its
token after the reconnect.  The assigner also stops giving out a capped
name at its cap, so runs rarely wait here; after a failover its count starts
from the jobs it gives out, and these slots keep the cap meanwhile.
"""

from __future__ import annotations

import contextlib
import uuid

import anyio

from ..errors import ConnectionLostError, NodeExistsError, NoNodeError
from ..session import Coordinator
from ..zk.types import CreateMode
from ._ops import retry_connection
from ._records import JobsLayout

__all__ = ("acquire_slot", "release_slot")


async def acquire_slot(coord: Coordinator, layout: JobsLayout, name: str, cap: int) -> str:
    """Take a free slot of `name`; blocks until one is free.  Returns its path.

    Cancelling the wait leaves no slot taken (a create in flight is undone).
    """
    client = coord.client
    parent = f"{layout.slots}/{name}"
    token = uuid.uuid4().hex.encode()
    while True:
        try:
            taken = set(await client.children(parent))
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                await client.ensure_path(parent, mode=CreateMode.PERSISTENT)
            continue
        except ConnectionLostError:
            await coord.client.session.wait_connected()
            continue
        for index in range(cap):
            if str(index) in taken:
                continue
            path = layout.slot(name, index)
            try:
                await client.create(path, token, mode=CreateMode.EPHEMERAL)
                return path
            except NodeExistsError:
                continue
            except ConnectionLostError:
                await coord.client.session.wait_connected()
                if await _holds(coord, path, token):
                    return path
            except BaseException:
                with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                    if await _holds(coord, path, token):
                        await release_slot(coord, path)
                raise
        names, watch = await client.children_watch(parent)
        try:
            if sum(1 for n in names if n.isdigit() and int(n) < cap) < cap:
                continue
            await watch.wait()
        finally:
            client.remove_watch(watch)


async def _holds(coord: Coordinator, path: str, token: bytes) -> bool:
    try:
        node = await retry_connection(coord, lambda: coord.client.get(path))
    except NoNodeError:
        return False
    return node.data == token


async def release_slot(coord: Coordinator, path: str) -> None:
    """Give a slot back (shielded, bounded: the session's end frees it anyway)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(10):
        with contextlib.suppress(NoNodeError):
            await retry_connection(coord, lambda: coord.client.delete(path))
