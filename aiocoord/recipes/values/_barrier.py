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

import anyio

from ..._checks import check_coordinator, check_timeout
from ...errors import CoordinatorClosedError, NodeExistsError, NoNodeError
from ...session import Coordinator
from ...zk.paths import validate_path
from ..cache import node_cache

__all__ = ("Barrier", "barrier")


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

        Returns at once if it is down (one read); ``timeout=0`` only looks.
        Waits through SUSPENDED and LOST (see the module docstring).
        Cancelling it only stops the wait.  Raises `TypeError` or
        `ConfigError` (naming `timeout`) for a bad timeout.
        """
        bound = check_timeout(timeout)
        if not await self.is_set():
            return True
        with anyio.move_on_after(bound if bound is not None else float("inf")):
            async with node_cache(self._coord, self._path) as cache:
                changes = cache.changes()
                if cache.current is None:
                    return True
                async for node in changes:
                    if node is None:
                        return True
                raise CoordinatorClosedError("the coordinator closed while waiting on a barrier")
        return False

    def __repr__(self) -> str:
        return f"<Barrier {self._path}>"


def barrier(coord: Coordinator, path: str) -> Barrier:
    """A `Barrier` at `path`: ``await barrier(coord, path).wait(timeout=30.0)``."""
    return Barrier(coord, path)
