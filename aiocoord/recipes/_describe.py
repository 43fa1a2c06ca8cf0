"""What the recipes' read-only ``describe`` modules share: the client, every child of a node.

Nothing here writes or watches.  `read_children` reports a child whose
record does not decode next to the others (its `NodeDataError`), never
raising it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import NodeDataError, NoNodeError
from ..session import Coordinator
from ..zk import ZkClient

__all__ = ("client_of", "read_children")

T = TypeVar("T")


def client_of(target: Coordinator | ZkClient) -> ZkClient:
    """The client a describe function reads with: a coordinator's, or `target` itself."""
    return target.client if isinstance(target, Coordinator) else target


async def read_children(
    client: ZkClient, path: str, read: Callable[[str], Awaitable[T | None]]
) -> tuple[dict[str, T], dict[str, NodeDataError]]:
    """`read` each child of `path` by name, in turn, in name order: what it found, and the
    error of each that did not decode.

    Blocks for one listing, then each `read`.  A missing `path` has no
    children; a child that `read` finds gone (None) is left out; any other
    error is raised.
    """
    try:
        names = sorted(await client.children(path))
    except NoNodeError:
        return {}, {}
    found: dict[str, T] = {}
    invalid: dict[str, NodeDataError] = {}
    for name in names:
        try:
            item = await read(name)
        except NodeDataError as exc:
            invalid[name] = exc
            continue
        if item is not None:
            found[name] = item
    return found, invalid
