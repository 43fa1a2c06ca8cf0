"""`GroupMember` and `group_member()`: be a member of a group and see the others.

Curator's ``GroupMember``.  Node layout, Curator's: each member is an
ephemeral child ``<path>/<member id>`` holding its data; a Java
``GroupMember`` on the same path sees Python members and the other way round.

This member's node is a `PersistentNode` (created again after a lost
session); the group is a `TreeCache` of depth 1 (one persistent recursive
watch).  `members()` always includes this member, as Curator's
``getCurrentMembers()`` does.

Failure handling: while SUSPENDED (or LOST) `members()` is the last view
read, `stale` says so, and `changes()` waits; once connected again the
cache reads the group afresh and `changes()` yields the new view if it
differs.  After LOST this member's node is created again on the new session.
A dead member's node goes when the server expires its session, so it stays
listed for up to that session's timeout.

``layout="kazoo"``: kazoo 2.x's ``Party(path, identifier)``, so kazoo
processes and aiocoord ones list each other.  Each member is an ephemeral
child ``<path>/<uuid4 hex>__party__`` whose data is its identifier (our
`member_id`); children without ``__party__`` are not members, as in kazoo.
A kazoo Party member carries no data of its own: `members()` maps each
identifier to ``b""``, members that share an identifier show once, and `data`
and `set_data()` are refused (`ConfigError`).  The group's path is created
persistent, as kazoo's ``ensure_path`` makes it.  Unlike a kazoo ``Party``,
this member's node is created again after a lost session.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import AsyncExitStack, aclosing
from typing import Final, cast

from ..._checks import check_bytes, check_coordinator, check_layout, check_node_name
from ..._lifecycle import Service
from ..._status_view import StatusView
from ...errors import ConfigError, ConnectionLostError
from ...session import Coordinator
from ...zk import CreateMode
from ...zk.paths import join, validate_path
from .._queue import check_participant_id
from ..cache import CacheEvent, CacheEventType, TreeCache, tree_cache
from ._persistent import PersistentNode

PARTY: Final = "__party__"
"""The marker of a kazoo ``Party`` member's node: ``<uuid4 hex>__party__``."""

__all__ = ("GroupMember", "group_member")


class GroupMember(Service):
    """Membership of the group at `path` as `member_id` (Curator's ``GroupMember``).

    Entering blocks until this member's node is there and the group has been
    read (waiting for a connection if need be: bound it with
    `anyio.fail_after`); leaving deletes the node and stops watching.
    ``layout="kazoo"``: a member of kazoo's ``Party`` at `path` instead, with
    `member_id` as its identifier and no data (see the module docstring).
    Raises `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        member_id: str,
        data: bytes = b"",
        layout: str = "curator",
    ) -> None:
        self._coord = check_coordinator(coord)
        self._path = validate_path(path)
        self._layout = check_layout(layout)
        if self._layout == "kazoo":
            self._id = check_participant_id(member_id)  # the node's data, not its name
            if check_bytes(data):
                raise ConfigError("data", "a kazoo Party member carries no data of its own")
            name = uuid.uuid4().hex + PARTY  # kazoo's Party.node
            node_data = self._id.encode("utf-8")
        else:
            self._id = check_node_name("member_id", member_id, protected=False)
            name, node_data = self._id, check_bytes(data)
        self._node = PersistentNode(
            coord, join(self._path, name), data=node_data, mode=CreateMode.EPHEMERAL
        )
        self._cache: TreeCache = tree_cache(coord, self._path, max_depth=1)
        self._stack: AsyncExitStack | None = None

    async def start(self) -> None:
        """Create this member's node and read the group; see the class docstring."""
        if self._layout == "kazoo":
            await self._ensure_party()
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(self._node)
            await stack.enter_async_context(self._cache)
            self._stack = stack.pop_all()

    async def _ensure_party(self) -> None:
        """The group's path, persistent, as kazoo's ``Party._ensure_parent`` makes it."""
        while True:
            await self._coord.client.session.wait_connected()
            try:
                await self._coord.client.ensure_path(self._path, mode=CreateMode.PERSISTENT)
                return
            except (ConnectionLostError, TimeoutError):
                continue

    async def aclose(self) -> None:
        """Delete this member's node and stop watching the group; from any task, idempotent."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    @property
    def path(self) -> str:
        return self._path

    @property
    def member_id(self) -> str:
        return self._id

    @property
    def layout(self) -> str:
        """The node layout: ``"curator"`` or ``"kazoo"``."""
        return self._layout

    @property
    def stale(self) -> bool:
        """Whether `members()` may be behind the server (no connection, or a re-read under way)."""
        return self._cache.stale

    async def set_data(self, data: bytes) -> None:
        """Set this member's data; blocks until the server holds it (see `PersistentNode`).

        `ConfigError` in the kazoo layout: a kazoo Party member has no data.
        """
        if self._layout == "kazoo":
            raise ConfigError("data", "a kazoo Party member carries no data of its own")
        await self._node.set_data(data)

    def members(self) -> dict[str, bytes]:
        """{member id: data} as last read, this member always included; never blocks.

        In the kazoo layout, {identifier: ``b""``} (a kazoo member's id is its
        node's data, decoded as UTF-8 with replacement).
        """
        if self._layout == "kazoo":
            return self._party()
        found = {
            name: node.data
            for name in self._cache.children(self._path)
            if (node := self._cache.get(join(self._path, name))) is not None
        }
        found.setdefault(self._id, self._node.data)
        return found

    def _party(self) -> dict[str, bytes]:
        found = {
            node.data.decode("utf-8", "replace"): b""
            for name in self._cache.children(self._path)
            if PARTY in name  # kazoo's Party._get_children
            if (node := self._cache.get(join(self._path, name))) is not None
        }
        found.setdefault(self._id, b"")
        return found

    def changes(self) -> AsyncIterator[dict[str, bytes]]:
        """Your own stream of `members()` after each change of the group, from now on.

        A view is yielded only if it differs from the one before; while stale
        nothing is (the view after a reconnect comes once read).  Ends when
        the member is left.
        """
        events = cast(AsyncGenerator[CacheEvent, None], self._cache.events())
        return self._changes(events, self.members())  # both as of the call

    async def _changes(
        self, events: AsyncGenerator[CacheEvent, None], last: dict[str, bytes]
    ) -> AsyncIterator[dict[str, bytes]]:
        async with aclosing(events):
            async for event in events:
                if event.type is CacheEventType.STALE or self._cache.stale:
                    continue
                now = self.members()
                if now != last:
                    last = now
                    yield now

    def status_view(self) -> StatusView:
        """This membership for a status page, from memory: the group's view (FRESH, STALE or
        CLOSED), its member count, whether this member's node is there; its id with detail."""
        facts = {
            "layout": self._layout,
            "members": len(self.members()),
            "registered": self._node.present,
        }
        view = self._cache.status_view()
        return StatusView("group_member", self._path, view.state, facts, {"member_id": self._id})

    def __repr__(self) -> str:
        stale = " STALE" if self.stale else ""
        return f"<GroupMember {self._path} id={self._id} members={len(self.members())}{stale}>"


def group_member(
    coord: Coordinator, path: str, *, member_id: str, data: bytes = b"", layout: str = "curator"
) -> GroupMember:
    """A `GroupMember` of the group at `path`, to use as ``async with``; ``layout="kazoo"``
    joins kazoo's ``Party`` at `path` (`member_id` as the identifier, no data)."""
    return GroupMember(coord, path, member_id=member_id, data=data, layout=layout)
