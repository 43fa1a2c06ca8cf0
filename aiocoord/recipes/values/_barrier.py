"""`Barrier`: processes wait while a node exists (Curator's ``DistributedBarrier``).

Node layout: the barrier is the node at `path` (persistent, no data; its
parents containers, as Curator's ``creatingParentContainersIfNeeded``).  It
is up while the node exists; `wait()` returns once it is gone.  A Java
``DistributedBarrier`` on the same path sets, removes and waits on the same
node.

Failure handling: `wait()` follows the node with a `NodeCache` (one
persistent watch, added for the wait and removed after it).  While SUSPENDED
or LOST it goes on waiting, and decides on what the server shows once
connected again: a barrier removed meanwhile ends the wait then.  `set()`
and `remove()` are one request each; after a connection loss their outcome
is unknown (`ConnectionLostError`): both may be called again safely.
"""

from __future__ import annotations

import contextlib
import math

import anyio

from ..._checks import check_coordinator, check_timeout
from ...errors import ConnectionLostError, CoordinatorClosedError, NodeExistsError, NoNodeError
from ...session import Coordinator
from ...zk.paths import validate_path
from ...zk.states import ConnectionState
from ..cache import node_cache

__all__ = ("Barrier", "barrier")

_UP = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED, ConnectionState.READ_ONLY)


class Barrier:
    """A barrier at `path`: `set()` raises it, `remove()` lowers it, `wait()` waits until it is down.

    Holds nothing between calls, so it needs no ``async with``.  Raises
    `InvalidPathError` or `TypeError` for bad arguments.
    """

    def __init__(self, coord: Coordinator, path: str) -> None:
        self._coord = check_coordinator(coord)
        self._path = validate_path(path)

    @property
    def path(self) -> str:
        return self._path

    async def set(self) -> None:
        """Raise the barrier (create its node); nothing if it is up already."""
        with contextlib.suppress(NodeExistsError):
            await self._coord.client.create(self._path, make_parents=True)

    async def remove(self) -> None:
        """Lower the barrier (delete its node); nothing if it is down already."""
        with contextlib.suppress(NoNodeError):
            await self._coord.client.delete(self._path)

    async def is_set(self) -> bool:
        """Whether the barrier is up now (one read)."""
        return await self._coord.client.exists(self._path) is not None

    async def wait(self, timeout: float | None = None) -> bool:
        """Block until the barrier is down; True then, False if `timeout` seconds passed first.

        Returns at once if it is down (one read).  The deadline is fixed when
        the call starts and covers that read too: while ZooKeeper cannot be
        reached it goes on waiting (through SUSPENDED and LOST, see the module
        docstring) and returns False at the deadline.  ``timeout=0`` only
        looks: one read if connected, False without one (or if its answer is
        lost with the connection).  Cancelling it only stops the wait.
        Raises `CoordinatorClosedError` if the coordinator closes meanwhile,
        `TypeError` or `ConfigError` (naming `timeout`) for a bad timeout.
        """
        bound = check_timeout(timeout)
        session = self._coord.client.session
        if bound == 0:
            if self._coord.state not in _UP:
                return False  # nothing to read it on right away
            try:
                return not await self.is_set()
            except ConnectionLostError:
                return False
        with anyio.move_on_after(math.inf if bound is None else bound):
            while True:
                try:
                    return await self._wait_down()
                except ConnectionLostError:
                    await session.wait_connected()  # then look again, within the deadline
        return False

    async def _wait_down(self) -> bool:
        """One read, then (if up) follow the node until it is gone; True once it is."""
        if not await self.is_set():
            return True
        async with node_cache(self._coord, self._path) as cache:
            changes = cache.changes()
            if cache.current is None:
                return True
            async for node in changes:
                if node is None:
                    return True
            raise CoordinatorClosedError("the coordinator closed while waiting on a barrier")

    def __repr__(self) -> str:
        return f"<Barrier {self._path}>"


def barrier(coord: Coordinator, path: str) -> Barrier:
    """A `Barrier` at `path`: ``await barrier(coord, path).wait(timeout=30.0)``."""
    return Barrier(coord, path)
