"""The queue's node keeping: participant ids, our node, protected creates, reads.

`Protected` creates our node with Curator's protected name and remembers a
create whose outcome stayed unknown, so that what it may have left is found
by its ``_c_<uuid>-`` name and deleted instead of blocking the queue.
`EarlyListing` is the listing a waiter sends from its predecessor's watch
callback.  `read_queue` is what the observers (`participants()`) read.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from ...errors import ConfigError, CoordError, NoNodeError
from ...zk.client import PROTECTED_PREFIX, ZkClient
from ...zk.paths import basename, join
from ...zk.types import Created
from ._table import Ordering, Sorts

__all__ = (
    "MAX_ID_BYTES",
    "CreatedNode",
    "EarlyListing",
    "Protected",
    "check_participant_id",
    "created_node",
    "default_participant_id",
    "read_all",
    "read_queue",
)


# --- participant ids -------------------------------------------------------------------------

MAX_ID_BYTES = 1024  # stored in every node of the queue and read by every observer


def default_participant_id() -> str:
    """``<host name>-<pid>``: unique enough to tell processes apart in `participants()`."""
    return f"{socket.gethostname()}-{os.getpid()}"


def check_participant_id(participant_id: object) -> str:
    """`participant_id` if valid, else `TypeError` or `ConfigError` naming it."""
    if not isinstance(participant_id, str):
        raise TypeError(f"participant_id must be a str, not {type(participant_id).__name__}")
    if not participant_id:
        raise ConfigError("participant_id", "must not be empty")
    try:
        size = len(participant_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError("participant_id", "must be encodable as UTF-8") from exc
    if size > MAX_ID_BYTES:
        raise ConfigError("participant_id", f"is {size} bytes of UTF-8; at most {MAX_ID_BYTES}")
    return participant_id


# --- our node --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatedNode:
    """Our queue node: its path and name, czxid (the fencing token) and creating session."""

    path: str
    name: str
    czxid: int
    owner: int


def created_node(created: Created) -> CreatedNode:
    """The `CreatedNode` of a create's outcome."""
    stat = created.stat
    return CreatedNode(created.path, basename(created.path), stat.czxid, stat.ephemeral_owner)


class Protected:
    """Protected creates of our node under `path`, and the clean-up of an interrupted one.

    The client's protected create already finds its node again by its uuid
    after a connection loss during the create.  A create whose outcome stays
    unknown (no connection within the request timeout, or cancelled with the
    request in flight) is never simply repeated: its uuid stays `pending`, and
    the next `create`, or `sweep`, first deletes whatever it left (Curator's
    ``FindAndDeleteProtectedNodeInBackground``).
    """

    __slots__ = ("client", "path", "pending")

    def __init__(self, client: ZkClient, path: str) -> None:
        self.client = client
        self.path = path
        self.pending: str | None = None  # the uuid of a create whose outcome we may not know

    async def create(self, name: str, data: bytes, *, make_parents: bool = True) -> CreatedNode:
        """Create ``<path>/_c_<uuid>-<name><seq>``, EPHEMERAL_SEQUENTIAL, after a `sweep`."""
        if self.pending is not None:
            await self.sweep()
        self.pending = node_id = str(uuid.uuid4())
        try:
            created = await self.client.create_protected(
                join(self.path, name), data, node_id=node_id, make_parents=make_parents
            )
        except NoNodeError:
            self.pending = None  # no parent, so certainly no node
            raise
        self.pending = None
        return created_node(created)

    async def sweep(self) -> None:
        """Delete the children named ``_c_<pending uuid>-...``, if a create is pending."""
        if self.pending is None:
            return
        marker = f"{PROTECTED_PREFIX}{self.pending}-"
        try:
            names = await self.client.children(self.path)
        except NoNodeError:
            names = []
        for name in names:
            if name.startswith(marker):
                with contextlib.suppress(NoNodeError):
                    await self.client.delete(join(self.path, name))
        self.pending = None


def _ignore(_names: list[str]) -> None:
    pass


class EarlyListing:
    """A listing sent from a watch callback, the moment the watched node's deletion is read.

    The waiter lists before any task wakes, so the next holder's own waiters
    are the first to wake; `result` awaits the reply (None if none was sent),
    `order` is what the reply handler made of it, if anything.
    """

    __slots__ = ("order", "result")

    def __init__(self) -> None:
        self.result: Callable[[], Awaitable[list[str]]] | None = None
        self.order: Ordering | None = None

    def send(
        self, client: ZkClient, path: str, on_reply: Callable[[list[str]], None] = _ignore
    ) -> None:
        """List `path`'s children now (no await); not connected: the task lists later."""
        with contextlib.suppress(CoordError):
            self.result = client.children_now(path, on_reply)


# --- reading the queue -----------------------------------------------------------------------


async def read_all(client: ZkClient, paths: list[str]) -> list[bytes | None]:
    """Every node's data, requests pipelined; None for a node that vanished."""
    results: list[bytes | None] = [None] * len(paths)
    errors: list[CoordError] = []

    async def read(i: int, path: str, scope: anyio.CancelScope) -> None:
        try:
            results[i] = (await client.get(path)).data
        except NoNodeError:
            pass
        except CoordError as exc:
            errors.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for i, path in enumerate(paths):
            tg.start_soon(read, i, path, tg.cancel_scope)
    if errors:
        raise errors[0]
    return results


async def read_queue(client: ZkClient, path: str, layout: Sorts) -> list[tuple[str, bytes]]:
    """The queue's nodes in order, each name with its data; nodes that vanish while
    read are skipped, and a path that does not exist has none."""
    try:
        names = layout.sort(await client.children(path))
    except NoNodeError:
        return []
    datas = await read_all(client, [join(path, n) for n in names])
    return [(name, data) for name, data in zip(names, datas, strict=True) if data is not None]
