"""A partner API taken at most two calls at a time, and a catalogue read by many, rebuilt by one.

Four pods, each with its own ZooKeeper session (as separate processes would),
share a semaphore of two leases at /examples/partner-api: each calls the
"partner API" three times, never more than two at once across the pods.  Then
they share a read/write lock at /examples/catalog: readers overlap, the one
rebuild overlaps nobody.  The layouts are Apache Curator's
``InterProcessSemaphoreV2`` and ``InterProcessReadWriteLock``, so Java services
on the same paths count and queue with them.

    python examples/semaphore.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio

import aiocoord
from aiocoord.cli import local_zookeeper

API = "/examples/partner-api"
CATALOG = "/examples/catalog"


class Gauge:
    """How many are inside at once, and the most ever."""

    def __init__(self) -> None:
        self.now = self.most = 0

    def enter(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


async def pod(settings: aiocoord.Settings, name: str, calls: Gauge, readers: Gauge) -> None:
    async with aiocoord.connect(settings) as coord:
        for _ in range(3):
            async with aiocoord.semaphore(coord, API, max_leases=2, participant_id=name):
                calls.enter()
                await asyncio.sleep(0.05)  # the call to the partner API
                calls.leave()
        rw = aiocoord.ReadWriteLock(coord, CATALOG, participant_id=name)
        if name == "pod-1":
            async with rw.write() as held:
                assert readers.now == 0
                print(f"{name}: rebuilt the catalogue alone (token 0x{held.token:x})")
        else:
            async with rw.read():
                readers.enter()
                await asyncio.sleep(0.2)  # serving from the catalogue
                readers.leave()


async def main(settings: aiocoord.Settings) -> None:
    calls, readers = Gauge(), Gauge()
    async with asyncio.timeout(30):
        await asyncio.gather(*(pod(settings, f"pod-{i}", calls, readers) for i in range(1, 5)))
    print(f"partner API calls at once, at most: {calls.most}")
    print(f"readers of the catalogue at once, at most: {readers.most}")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
