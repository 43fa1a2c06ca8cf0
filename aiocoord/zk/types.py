"""Typed values the zk layer hands to the rest of aiocoord: stats, nodes, modes, events, ops."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..errors import ZooKeeperError

__all__ = (
    "ACL",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "CheckOp",
    "CheckResult",
    "CreateMode",
    "CreateOp",
    "CreateResult",
    "Created",
    "DeleteOp",
    "DeleteResult",
    "ErrorResult",
    "EventType",
    "Node",
    "Op",
    "OpResult",
    "SetDataOp",
    "SetDataResult",
    "Stat",
    "WatchedEvent",
)


@dataclass(frozen=True, slots=True)
class ACL:
    """One access-control entry: permission bits for an identity (`scheme`, `id`)."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31

    perms: int
    scheme: str
    id: str


OPEN_ACL_UNSAFE = (ACL(ACL.ALL, "world", "anyone"),)
"""Anyone may do anything (ZooKeeper's default)."""
CREATOR_ALL_ACL = (ACL(ACL.ALL, "auth", ""),)
"""Only the identities the creating session authenticated as."""
READ_ACL_UNSAFE = (ACL(ACL.READ, "world", "anyone"),)
"""Anyone may read."""


@dataclass(frozen=True, slots=True)
class Stat:
    """A node's metadata (ZooKeeper's ``Stat``), with its zxids and versions."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


@dataclass(frozen=True, slots=True)
class Node:
    """A node's data and stat as read by `get`."""

    data: bytes
    stat: Stat


@dataclass(frozen=True, slots=True)
class Created:
    """The outcome of a create: the real path (with any sequence number) and the stat.

    `listing` is the parent's children as listed right behind the create
    (``list_parent=True``), the new node among them; None if not asked for
    or not had in the same round trip.
    """

    path: str
    stat: Stat
    listing: tuple[str, ...] | None = field(default=None, compare=False)


class CreateMode(enum.IntEnum):
    """ZooKeeper's create modes (the wire flag values)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)


class EventType(enum.IntEnum):
    """What a watch saw.  `SESSION_LOST` is aiocoord's own: the watch died with its session."""

    CREATED = 1
    DELETED = 2
    DATA_CHANGED = 3
    CHILDREN_CHANGED = 4
    SESSION_LOST = -112


@dataclass(frozen=True, slots=True)
class WatchedEvent:
    """One watch notification: what happened to which (client-side) path."""

    type: EventType
    path: str


# --- multi ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateOp:
    """Create a node inside a `multi`."""

    path: str
    data: bytes = b""
    mode: CreateMode = CreateMode.PERSISTENT
    ttl: int | None = None
    acl: tuple[ACL, ...] | None = None


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """Delete a node inside a `multi` (version -1: any)."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class SetDataOp:
    """Set a node's data inside a `multi` (version -1: any)."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    """Require a node's version inside a `multi`."""

    path: str
    version: int


Op = CreateOp | DeleteOp | SetDataOp | CheckOp


@dataclass(frozen=True, slots=True)
class CreateResult:
    path: str
    stat: Stat | None = None


@dataclass(frozen=True, slots=True)
class DeleteResult:
    pass


@dataclass(frozen=True, slots=True)
class SetDataResult:
    stat: Stat


@dataclass(frozen=True, slots=True)
class CheckResult:
    pass


@dataclass(frozen=True, slots=True)
class ErrorResult:
    """An operation of a failed `multi`: its own error (or a rolled-back marker)."""

    error: ZooKeeperError = field(compare=False)
    code: int = 0


OpResult = CreateResult | DeleteResult | SetDataResult | CheckResult | ErrorResult
