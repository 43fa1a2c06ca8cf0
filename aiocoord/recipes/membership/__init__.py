"""Membership: a node kept while a block runs, groups of members, service discovery.

Curator's ``PersistentNode``, ``GroupMember`` and curator-x-discovery's
``ServiceDiscovery``.  A Java ``GroupMember`` on the same path takes part in
the group; docs/compatibility.md says which of the others are tested against
their Java peer (discovery is not yet)::

    async with aiocoord.persistent_node(coord, "/registry/pod-1", data=b"...") as node:
        await node.set_data(b"...")    # created again after a lost session
    async with aiocoord.persistent_ttl_node(coord, "/registry/batch-7", ttl=60_000) as node:
        ...                            # outlives its owner by about a TTL
    async with aiocoord.group_member(coord, "/groups/api", member_id="pod-1") as group:
        group.members()                # {member id: data}, from a cache
    async with aiocoord.service_discovery(coord, "/services") as sd:   # curator-x-discovery
        await sd.register(aiocoord.ServiceInstance(name="api", address="10.0.0.5", port=8080))
        await sd.provider("api").get()

Each module's docstring gives its node layout and its failure handling.
"""

from __future__ import annotations

from ._discovery import ServiceDiscovery as ServiceDiscovery
from ._discovery import service_discovery as service_discovery
from ._group import GroupMember as GroupMember
from ._group import group_member as group_member
from ._instance import ServiceInstance as ServiceInstance
from ._persistent import PersistentNode as PersistentNode
from ._persistent import persistent_node as persistent_node
from ._provider import ServiceProvider as ServiceProvider
from ._ttl import PersistentTtlNode as PersistentTtlNode
from ._ttl import persistent_ttl_node as persistent_ttl_node

__all__ = (
    "GroupMember",
    "PersistentNode",
    "PersistentTtlNode",
    "ServiceDiscovery",
    "ServiceInstance",
    "ServiceProvider",
    "group_member",
    "persistent_node",
    "persistent_ttl_node",
    "service_discovery",
)
