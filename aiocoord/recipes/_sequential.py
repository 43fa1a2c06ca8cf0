"""Queues of sequential nodes, shared by the leader latch and the mutex.

Both recipes line up EPHEMERAL_SEQUENTIAL nodes under one parent, as Apache
Curator's do (``_c_<uuid>-latch-<seq>``, ``_c_<uuid>-lock-<seq>``): the first
node in Curator's order holds the right, every other one watches only the node
just ahead of its own.  What they share lives here:

- Curator's order: children sort by the text after the *last* marker
  (``latch-``, ``lock-``); a name without it sorts by its whole name and still
  counts as a contender (``StandardLockInternalsDriver.standardFixForSorting``),
  compared as Java's ``String.compareTo`` does (UTF-16 code units).
- The decision (`next_move`): first, follow the predecessor, our node is missing,
  or our node belongs to an earlier session; and the last check before the
  right is taken (`may_take`): our node was created by the session we are
  connected on right now (the ephemeral-owner check of Curator's CURATOR-696
  fix) and has not been reported deleted.
- Node keeping: the participant id written in each node, pipelined reads of
  the queue, and deleting what a protected create whose outcome is unknown
  left behind (found by its ``_c_<uuid>-`` name, Curator's protected mode).

The pure half (order, decision) awaits nothing and is tested directly.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import anyio

from ..errors import ConfigError, CoordError, NoNodeError
from ..zk.client import PROTECTED_PREFIX, ZkClient
from ..zk.paths import basename, join
from ..zk.types import Created

__all__ = (
    "MAX_ID_BYTES",
    "Move",
    "Follow",
    "Lead",
    "Missing",
    "Ordering",
    "CreatedNode",
    "Sorts",
    "Stale",
    "check_participant_id",
    "curator_sorted",
    "next_move",
    "default_participant_id",
    "may_take",
    "created_node",
    "read_all",
    "read_queue",
    "sort_key",
    "sweep_protected",
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


# --- Curator's order -------------------------------------------------------------------------


def sort_key(name: str, marker: str) -> str:
    """Curator's sort key: the text after the last `marker`, else the whole name."""
    index = name.rfind(marker)
    return name[index + len(marker) :] if index >= 0 else name


def curator_sorted(names: Sequence[str], marker: str) -> list[str]:
    """Children in Curator's order for `marker` (index 0 holds the right)."""
    keys = [sort_key(n, marker) for n in names]
    if all(k.isascii() for k in keys):
        # Code-point order is Java's UTF-16 order for ASCII (the only case in practice).
        order = sorted(range(len(names)), key=lambda i: (keys[i], names[i]))
    else:
        utf16: Callable[[str], bytes] = lambda s: s.encode("utf-16-be", "surrogatepass")  # noqa: E731
        order = sorted(range(len(names)), key=lambda i: (utf16(keys[i]), utf16(names[i])))
    return [names[i] for i in order]


class Sorts(Protocol):
    """A layout of queue nodes: how its Java recipe orders them."""

    def sort(self, names: Sequence[str]) -> list[str]: ...


class Ordering:
    """Children in queue order, with each name's position; built once per listing."""

    __slots__ = ("_position", "names")

    def __init__(self, children: Sequence[str], layout: Sorts) -> None:
        self.names = layout.sort(children)
        self._position = {name: i for i, name in enumerate(self.names)}

    def position(self, name: str) -> int | None:
        return self._position.get(name)


# --- the decision ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lead:
    """Our node is first: the right is ours (once `may_take` agrees)."""


@dataclass(frozen=True, slots=True)
class Follow:
    """Watch `predecessor`, the node just ahead of ours; `ahead` nodes precede ours.

    Nodes created after the listing sort after ours, so the nodes ahead can only
    go: when the predecessor goes and it was the only one ahead, ours is first,
    with no listing in between.
    """

    predecessor: str
    ahead: int


@dataclass(frozen=True, slots=True)
class Missing:
    """Our node is not among the children: someone deleted it (or its parent); join again."""


@dataclass(frozen=True, slots=True)
class Stale:
    """Our node belongs to an earlier session: delete it and join again at the tail."""


Move = Lead | Follow | Missing | Stale


def next_move(order: Ordering, ours: str, *, owner: int, session_id: int | None) -> Move:
    """What to do given a listing in queue order, our node's name and owner, and the session.

    `owner` is the ephemeral owner our node was created with.  A node owned by
    another session is never taken on, even when it is still listed first: the
    server deletes it as soon as it expires that session, and the next in line
    would take the right too (Curator's CURATOR-696).
    """
    if session_id is None or owner != session_id:
        return Stale()
    index = order.position(ours)
    if index is None:
        return Missing()
    if index == 0:
        return Lead()
    return Follow(order.names[index - 1], index)


def may_take(*, owner: int, session_id: int | None, connected: bool, node_gone: bool) -> bool:
    """The last check before the right is taken, made with no await after it.

    Our node must have been created by the session we are connected on right
    now (CURATOR-696), and must not have been reported deleted.
    """
    return connected and not node_gone and session_id is not None and owner == session_id


# --- nodes -----------------------------------------------------------------------------------


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


async def sweep_protected(client: ZkClient, path: str, node_id: str) -> None:
    """Delete the children of `path` named ``_c_<node_id>-...``: what an interrupted
    protected create may have left (Curator's ``FindAndDeleteProtectedNodeInBackground``)."""
    marker = f"{PROTECTED_PREFIX}{node_id}-"
    try:
        names = await client.children(path)
    except NoNodeError:
        return
    for name in names:
        if name.startswith(marker):
            with contextlib.suppress(NoNodeError):
                await client.delete(join(path, name))


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
