"""Membership: a node kept while a block runs, groups of members, service discovery.

Curator's ``PersistentNode``, ``GroupMember`` and curator-x-discovery, on
their node layouts, so Java services take part::

    async with aiocoord.persistent_node(coord, "/registry/pod-1", data=b"...") as node:
        await node.set_data(b"...")    # created again after a lost session

Each module's docstring gives its node layout and its failure handling.
"""

from __future__ import annotations

from ._persistent import PersistentNode as PersistentNode
from ._persistent import persistent_node as persistent_node

__all__ = ("PersistentNode", "persistent_node")
