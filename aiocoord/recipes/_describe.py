"""What the recipes' read-only ``describe`` modules share: reading every child of a node.

Nothing here writes or watches.  A record that does not decode is reported
next to the others (`NodeDataError`), never raised, as each ``describe``
module promises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import NodeDataError, NoNodeError
from ..zk import ZkClient

__all__ = ("read_children",)

T = TypeVar("T")


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
