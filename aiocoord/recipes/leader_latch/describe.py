"""A read-only look at a leader latch as its nodes say: participants in election order.

For tools that watch a cluster rather than take part (``aiocoord inspect``, the
demo, dashboards): `describe_latch` reads the election nodes under a path and
returns a `LatchView`; `latch_layout` tells from a listing of children whether
they are a latch's nodes at all.  Nothing here writes, watches or joins, and
foreign data never raises: a participant id that is not UTF-8 is shown with
replacement characters.

    view = await describe_latch(coord, "/app/leader")
    view.leader, view.leader_token     # "pod-1", 0x1f3
    [p.id for p in view.participants]  # election order, the leader first
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ...errors import NoNodeError
from ...session import Coordinator
from ...zk import ZkClient
from .._describe import client_of
from .._queue import read_nodes
from ._election import LAYOUTS

__all__ = ("LatchParticipant", "LatchView", "LayoutName", "describe_latch", "latch_layout")

LayoutName = Literal["curator", "zookeeper", "kazoo"]

# Node names as each layout's Java recipe creates them (see `_election`).
_CURATOR_NODE = re.compile(r"_c_[0-9a-fA-F-]{32,36}-latch-\d{10}|.*latch-\d{10}")
_ZOOKEEPER_NODE = re.compile(r"n_\d{10}")
_KAZOO_NODE = re.compile(r"[0-9a-f]{32}__lock__-?\d{10}")


@dataclass(frozen=True, slots=True)
class LatchParticipant:
    """One election node: the participant `id` (its data), `node` name, fencing `token`
    (the node's czxid, the token its term would have) and the `session` that owns it."""

    id: str
    node: str
    token: int
    session: int


@dataclass(frozen=True, slots=True)
class LatchView:
    """A latch at `path`: its `layout` and `participants` in election order (leader first)."""

    path: str
    layout: LayoutName
    participants: tuple[LatchParticipant, ...]

    @property
    def leader(self) -> str | None:
        """The leading participant's id, or None when nobody takes part."""
        return self.participants[0].id if self.participants else None

    @property
    def leader_token(self) -> int | None:
        """The leader's fencing token, or None when nobody takes part."""
        return self.participants[0].token if self.participants else None


def latch_layout(children: list[str]) -> LayoutName | None:
    """'curator', 'zookeeper' or 'kazoo' when every child is an election node of that
    layout, else None.

    An empty listing is no latch: nothing tells it apart from any empty node.
    """
    if not children:
        return None
    if all(_CURATOR_NODE.fullmatch(c) for c in children):
        return "curator"
    if all(_ZOOKEEPER_NODE.fullmatch(c) for c in children):
        return "zookeeper"
    if all(_KAZOO_NODE.fullmatch(c) for c in children):
        return "kazoo"
    return None


async def describe_latch(
    target: Coordinator | ZkClient, path: str, *, layout: LayoutName | None = None
) -> LatchView:
    """The latch at `path` as its nodes say, in the order its Java recipe elects them.

    `layout` defaults to the one `latch_layout` recognises (curator when the
    nodes fit neither).  A path that does not exist has no participants; nodes
    that vanish while read are left out.  One read per node, pipelined.
    """
    client = client_of(target)
    try:
        children = await client.children(path)
    except NoNodeError:
        children = []
    chosen: LayoutName = layout or latch_layout(children) or "curator"
    nodes = await read_nodes(client, path, LAYOUTS[chosen].sort(children))
    participants = [
        LatchParticipant(
            n.data.decode("utf-8", "replace"), name, n.stat.czxid, n.stat.ephemeral_owner
        )
        for name, n in nodes
    ]
    return LatchView(path, chosen, tuple(participants))
