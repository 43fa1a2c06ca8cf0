"""The queue's node keeping: participant ids, our node (`OurNode`: protected create,
withdraw, the chore that finishes it), the listing sent from a watch callback
(`EarlyListing`) and the reads of the observers (`read_queue`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
import anyio.lowlevel

from ...errors import (
    ConfigError,
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NoNodeError,
)
from ...zk.client import PROTECTED_PREFIX, ZkClient
from ...zk.paths import basename, join
from ...zk.types import Created, CreateMode, Node
from ._kazoo import kazoo_id
from ._table import Ordering, Sorts

__all__ = (
    "MAX_ID_BYTES",
    "CreatedNode",
    "EarlyListing",
    "OurNode",
    "check_participant_id",
    "created_node",
    "default_participant_id",
    "read_nodes",
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


Ours = tuple[CreatedNode | None, str | None]  # our node, the uuid of a create in doubt


class OurNode:
    """Our node under `path`, from its protected create to its delete, leaving nothing behind.

    The client's protected create finds the node again by its uuid after a
    connection loss during the create.  A create whose outcome stays unknown
    (no connection within the request timeout, or cancelled with the request
    in flight) is never simply repeated: its uuid stays `pending`, and the next
    `create`, or the withdraw, first deletes whatever it left (Curator's
    ``FindAndDeleteProtectedNodeInBackground``).  `recipe` names the recipe
    in log lines (its logger is ``aiocoord.recipes.<recipe with _>``).
    ``kazoo=True`` names the node as kazoo does, ``<uuid4 hex><name>``, found
    again by its uuid, and makes missing parents persistent, as kazoo's
    ``ensure_path`` does (a kazoo recipe object ensures its path once: a
    container reaped under it would fail its next create).
    """

    def __init__(self, client: ZkClient, path: str, recipe: str, *, kazoo: bool = False) -> None:
        self.client = client
        self.path = path
        self.recipe = recipe
        self.kazoo = kazoo
        self.node: CreatedNode | None = None
        self.pending: str | None = None  # the uuid of a create whose outcome we may not know
        self.listed: tuple[str, ...] | None = None  # the children, listed right behind `create`
        self.log = logging.getLogger("aiocoord.recipes." + recipe.replace(" ", "_"))

    async def create(
        self,
        name: str,
        data: bytes,
        *,
        make_parents: bool = True,
        mode: CreateMode = CreateMode.EPHEMERAL_SEQUENTIAL,
        list_parent: bool = False,
    ) -> CreatedNode:
        """Create ``<path>/_c_<uuid>-<name><seq>`` (kazoo: ``<path>/<uuid hex><name><seq>``),
        EPHEMERAL_SEQUENTIAL unless `mode` says otherwise, after a `sweep`.

        `list_parent` sends the children listing right behind the create (one
        round trip for both; the server answers in order, so our node is in
        it): `listed`, None if its reply did not come with the create's.
        """
        self.listed = None
        await self.sweep()
        self.pending = node_id = kazoo_id() if self.kazoo else str(uuid.uuid4())
        try:
            if self.kazoo:
                created = await self.client.create_findable(
                    join(self.path, node_id + name),
                    data,
                    prefix=node_id,
                    mode=mode,
                    parent_mode=CreateMode.PERSISTENT,
                    list_parent=list_parent,
                )
            else:
                created = await self.client.create_protected(
                    join(self.path, name),
                    data,
                    node_id=node_id,
                    make_parents=make_parents,
                    mode=mode,
                    list_parent=list_parent,
                )
        except NoNodeError:
            self.pending = None  # no parent, so certainly no node
            raise
        self.pending = None
        self.node = node = created_node(created)
        self.listed = created.listing
        return node

    async def delete(self) -> None:
        """Delete our node, if we have one (already gone is fine)."""
        node = self.node
        if node is not None:
            with contextlib.suppress(NoNodeError):
                await self.client.delete(node.path)
            if self.node is node:
                self.node = None

    async def sweep(self) -> None:
        """Delete the children named ``_c_<pending uuid>-...``, if a create is pending."""
        if self.pending is None:
            return
        marker = self.pending if self.kazoo else f"{PROTECTED_PREFIX}{self.pending}-"
        try:
            names = await self.client.children(self.path)
        except NoNodeError:
            names = []
        for name in names:
            if name.startswith(marker):
                with contextlib.suppress(NoNodeError):
                    await self.client.delete(join(self.path, name))
        self.pending = None

    def ours(self, what: Ours | None = None) -> Ours:
        """What of `what` (default: what we have now) is still ours to delete."""
        node, pending = what or (self.node, self.pending)
        return (
            node if node is not None and self.node is node else None,
            pending if pending is not None and self.pending == pending else None,
        )

    async def withdraw(self, what: Ours | None = None) -> None:
        """Delete our node and whatever an interrupted create left, across reconnects.

        Only `what` (default: what is ours now): a node joined meanwhile stays.
        The caller bounds it (and shields it).  A closed coordinator has nothing
        left to delete: closing its session removed our node.
        """
        what = self.ours(what)
        while what != (None, None):
            try:
                if what[0] is not None:
                    await self.delete()
                if what[1] is not None:
                    await self.sweep()
            except CoordinatorClosedError:
                return
            except (ConnectionLostError, TimeoutError) as exc:
                self.log.debug(
                    "%s %s: withdrawing after a connection loss (%s)", self.recipe, self.path, exc
                )
                try:
                    await self.client.session.wait_connected()
                except CoordinatorClosedError:
                    return
                await anyio.lowlevel.checkpoint()
            except CoordError as exc:
                self.log.warning(
                    "%s %s: could not delete our node: %s", self.recipe, self.path, exc
                )
                return
            what = self.ours(what)

    async def leave(self, sent: Callable[[], Awaitable[None]] | None = None) -> bool:
        """`withdraw` within the request timeout (after `sent`, a delete already on its way).

        Shield it.  What is still left past the timeout is deleted by a chore of
        the session once the connection is back (`withdraw_later`), so that it
        does not block the queue for as long as the session lives: False then.
        """
        what = self.ours()
        with anyio.move_on_after(self.client.session.timing.request_timeout) as scope:
            if sent is not None:
                with contextlib.suppress(CoordError):  # `withdraw` tries again
                    await sent()
            await self.withdraw(what)
        left = not (scope.cancelled_caught and self.withdraw_later(what))
        if sent is not None:
            # The delete's reply may come in the same read as the notification that wakes
            # a successor in this process: let it take over before the rest of our teardown.
            await anyio.lowlevel.checkpoint()
        return left

    def withdraw_later(self, what: Ours | None = None) -> bool:
        """Finish the withdraw of `what` in a chore of the session; False if there is nothing
        to do (nothing left, or the coordinator closed: closing its session removed our node)."""
        what = self.ours(what)
        if what == (None, None) or self.client.session.closed:
            return False
        node = what[0].path if what[0] is not None else f"a node under {self.path}"
        self.log.warning(
            "%s %s: could not delete %s in time; deleting it once the connection is back",
            self.recipe,
            self.path,
            node,
        )
        name = f"{self.recipe} {self.path}: delete {node}"
        return self.client.session.start_chore(lambda: self.withdrawn(what), name)

    async def withdrawn(self, what: Ours) -> None:
        """The chore of `withdraw_later`."""
        await self.withdraw(what)


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

    def send(self, client: ZkClient, path: str, on_reply: Callable[[list[str]], None]) -> None:
        """List `path`'s children now (no await); not connected: the task lists later."""
        with contextlib.suppress(CoordError):
            self.result = client.children_now(path, on_reply)


# --- reading the queue -----------------------------------------------------------------------


async def read_nodes(client: ZkClient, path: str, names: list[str]) -> list[tuple[str, Node]]:
    """The nodes `names` under `path`, each with its name, requests pipelined; nodes that
    vanish while read are skipped."""
    results: list[Node | None] = [None] * len(names)
    errors: list[CoordError] = []

    async def read(i: int, name: str, scope: anyio.CancelScope) -> None:
        try:
            results[i] = await client.get(join(path, name))
        except NoNodeError:
            pass
        except CoordError as exc:
            errors.append(exc)
            scope.cancel()

    async with anyio.create_task_group() as tg:
        for i, name in enumerate(names):
            tg.start_soon(read, i, name, tg.cancel_scope)
    if errors:
        raise errors[0]
    return [(name, node) for name, node in zip(names, results, strict=True) if node is not None]


async def read_queue(client: ZkClient, path: str, layout: Sorts) -> list[tuple[str, Node]]:
    """The queue's nodes in order (`read_nodes`); a path that does not exist has none."""
    try:
        names = layout.sort(await client.children(path))
    except NoNodeError:
        return []
    return await read_nodes(client, path, names)
