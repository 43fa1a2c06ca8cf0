"""A read-only look at a mutex as its nodes say: the holder, then the waiters in order.

For tools that watch a cluster rather than contend (``aiocoord inspect``,
dashboards): `describe_mutex` reads the lock nodes under a path and returns a
`MutexView`; `is_mutex` tells from a listing of children whether they are a
mutex's nodes at all.  Nothing here writes, watches or joins the queue.  A
node whose data is not a participant id (not UTF-8, too large) is shown with
the reason next to the others, never raised; it still takes its place in the
queue, as it does for the contenders.

    view = await describe_mutex(coord, "/locks/ledger")
    view.holder, view.holder_token     # "pod-3", 0x2a1
    [c.id for c in view.waiters]       # in the order they will hold the lock
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..._records import load_text
from ...errors import NodeDataError
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import join
from ...zk.types import Node
from .._describe import client_of
from .._queue import LEASE, LOCK, READ_WRITE, WRITE_MARKER, CuratorNames, first, read_queue, reader

__all__ = (
    "MutexContender",
    "MutexView",
    "ReadWriteView",
    "SemaphoreView",
    "describe_mutex",
    "describe_read_write_lock",
    "describe_semaphore",
    "is_mutex",
    "is_read_write_lock",
    "is_semaphore",
)

# Node names as Curator's InterProcessMutex creates them (protected, or not), see `recipes/_queue`.
_LOCK_NODE = re.compile(r"_c_[0-9a-fA-F-]{32,36}-lock-\d{10}|.*lock-\d{10}")
# ... and its InterProcessReadWriteLock.
_RW_NODE = re.compile(r".*__(READ|WRIT)__\d{10}")


@dataclass(frozen=True, slots=True)
class MutexContender:
    """One lock node: the participant `id` (its data; None when `invalid` says why it
    cannot be read), its `node` name, the fencing `token` it holds or will hold (the
    node's czxid) and the `session` that owns it."""

    id: str | None
    node: str
    token: int
    session: int
    invalid: str | None = None


@dataclass(frozen=True, slots=True)
class MutexView:
    """A mutex at `path`: `contenders` in queue order, the holder first."""

    path: str
    contenders: tuple[MutexContender, ...]

    @property
    def holder(self) -> MutexContender | None:
        """The contender holding the lock (first in line), or None when the lock is free."""
        return self.contenders[0] if self.contenders else None

    @property
    def holder_token(self) -> int | None:
        """The holder's fencing token, or None when the lock is free."""
        return self.contenders[0].token if self.contenders else None

    @property
    def waiters(self) -> tuple[MutexContender, ...]:
        """The contenders behind the holder, in the order they will hold the lock."""
        return self.contenders[1:]


@dataclass(frozen=True, slots=True)
class ReadWriteView:
    """A read/write lock at `path`: `contenders` in queue order (readers' nodes have
    ``__READ__`` in their name, writers' ``__WRIT__``), `holding` the same length:
    whether each holds its lock now."""

    path: str
    contenders: tuple[MutexContender, ...]
    holding: tuple[bool, ...]

    @property
    def holders(self) -> tuple[MutexContender, ...]:
        """The readers, or the one writer, holding the lock now (none when it is free)."""
        return tuple(c for c, h in zip(self.contenders, self.holding, strict=True) if h)


@dataclass(frozen=True, slots=True)
class SemaphoreView:
    """A semaphore at `path`: its `leases` in lease order, and the `waiting`: the
    contenders of its inner mutex, the first of which waits for a lease (Curator's
    ``InterProcessSemaphoreV2``; the maximum is not stored, so a waiter's lease node,
    if created already, is the last of `leases`)."""

    path: str
    leases: tuple[MutexContender, ...]
    waiting: tuple[MutexContender, ...]


def is_mutex(children: Iterable[str]) -> bool:
    """Whether every child is a lock node of Curator's layout (and there is at least one).

    An empty listing is no mutex: nothing tells a free lock apart from any empty node.
    """
    names = list(children)
    return bool(names) and all(_LOCK_NODE.fullmatch(c) for c in names)


def is_read_write_lock(children: Iterable[str]) -> bool:
    """Whether every child is a ``__READ__`` or ``__WRIT__`` node (and there is at least one)."""
    names = list(children)
    return bool(names) and all(_RW_NODE.fullmatch(c) for c in names)


def is_semaphore(children: Iterable[str]) -> bool:
    """Whether the children are a semaphore's: ``leases`` and perhaps ``locks``, nothing else."""
    names = set(children)
    return "leases" in names and names <= {"leases", "locks"}


def _contender(path: str, name: str, node: Node) -> MutexContender:
    try:
        pid: str | None = load_text(join(path, name), node.data, "participant id")
        invalid = None
    except NodeDataError as exc:
        pid, invalid = None, exc.reason
    stat = node.stat
    return MutexContender(pid, name, stat.czxid, stat.ephemeral_owner, invalid)


async def _queue(client: ZkClient, path: str, names: CuratorNames) -> list[MutexContender]:
    return [_contender(path, n, node) for n, node in await read_queue(client, path, names)]


async def describe_mutex(target: Coordinator | ZkClient, path: str) -> MutexView:
    """The mutex at `path` as its nodes say, in the order Curator's mutex grants it.

    A path that does not exist has no contenders (a free lock); nodes that
    vanish while read are left out.  One read per node, pipelined.
    """
    return MutexView(path, tuple(await _queue(client_of(target), path, LOCK)))


async def describe_read_write_lock(target: Coordinator | ZkClient, path: str) -> ReadWriteView:
    """The read/write lock at `path` as its nodes say, in queue order, with who holds it."""
    contenders = await _queue(client_of(target), path, READ_WRITE)
    names = [c.node for c in contenders]
    holding = tuple(
        (first if WRITE_MARKER in n else reader)(names, i) is None for i, n in enumerate(names)
    )
    return ReadWriteView(path, tuple(contenders), holding)


async def describe_semaphore(target: Coordinator | ZkClient, path: str) -> SemaphoreView:
    """The semaphore at `path` as its nodes say: its leases, and who waits for one."""
    client = client_of(target)
    leases = await _queue(client, join(path, "leases"), LEASE)
    waiting = await _queue(client, join(path, "locks"), LOCK)
    return SemaphoreView(path, tuple(leases), tuple(waiting))
