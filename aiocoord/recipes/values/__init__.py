"""Shared values and barriers: Curator's ``SharedCount``, ``DistributedAtomicLong`` and barriers.

Java processes using Curator's ``SharedCount``, ``DistributedAtomicLong``,
``DistributedBarrier`` or ``DistributedDoubleBarrier`` on the same paths take part::

    async with aiocoord.shared_count(coord, "/counters/epoch", initial=0) as count:
        await count.add(1)                 # Curator SharedCount: 4-byte big-endian int
    await aiocoord.atomic_long(coord, "/counters/hits").increment()   # DistributedAtomicLong
    barrier = aiocoord.Barrier(coord, "/barriers/deploy")             # DistributedBarrier
    await barrier.set(); await barrier.wait(timeout=30.0); await barrier.remove()
    async with aiocoord.double_barrier(coord, "/barriers/batch", members=5): ...

Each module's docstring gives its node layout and its failure handling.
"""

from __future__ import annotations

from ._atomic_long import AtomicLong as AtomicLong
from ._atomic_long import atomic_long as atomic_long
from ._barrier import Barrier as Barrier
from ._barrier import barrier as barrier
from ._double_barrier import DoubleBarrier as DoubleBarrier
from ._double_barrier import double_barrier as double_barrier
from ._shared_count import SharedCount as SharedCount
from ._shared_count import shared_count as shared_count

__all__ = (
    "AtomicLong",
    "Barrier",
    "DoubleBarrier",
    "SharedCount",
    "atomic_long",
    "barrier",
    "double_barrier",
    "shared_count",
)
