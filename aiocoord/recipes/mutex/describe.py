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
from .._queue import LOCK, read_queue

__all__ = ("MutexContender", "MutexView", "describe_mutex", "is_mutex")

# Node names as Curator's InterProcessMutex creates them (protected, or not), see `recipes/_queue`.
_LOCK_NODE = re.compile(r"_c_[0-9a-fA-F-]{32,36}-lock-\d{10}|.*lock-\d{10}")


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


def is_mutex(children: Iterable[str]) -> bool:
    """Whether every child is a lock node of Curator's layout (and there is at least one).

    An empty listing is no mutex: nothing tells a free lock apart from any empty node.
    """
    names = list(children)
    return bool(names) and all(_LOCK_NODE.fullmatch(c) for c in names)


async def describe_mutex(target: Coordinator | ZkClient, path: str) -> MutexView:
    """The mutex at `path` as its nodes say, in the order Curator's mutex grants it.

    A path that does not exist has no contenders (a free lock); nodes that
    vanish while read are left out.  One read per node, pipelined.
    """
    client = target.client if isinstance(target, Coordinator) else target
    contenders: list[MutexContender] = []
    for name, node in await read_queue(client, path, LOCK):
        try:
            pid: str | None = load_text(join(path, name), node.data, "participant id")
            invalid = None
        except NodeDataError as exc:
            pid, invalid = None, exc.reason
        stat = node.stat
        contenders.append(MutexContender(pid, name, stat.czxid, stat.ephemeral_owner, invalid))
    return MutexView(path, tuple(contenders))
