"""A shared ledger behind a mutex: three pods append to it in turn, never two at once.

Each pod has its own ZooKeeper session (as separate processes would) and takes
the mutex at /examples/ledger-lock three times.  Inside the block it reads the
ledger, appends a line and writes it back with a version check, passing the
fencing token along; the block would be cancelled if the lock were lost
(SUSPENDED, LOST).  The lock goes round in the order it was asked for, and the
layout is Apache Curator's ``InterProcessMutex``, so Java services holding the
same path with Curator wait in the same queue.

    python examples/mutex.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio

import aiocoord
from aiocoord.cli import local_zookeeper

LOCK = "/examples/ledger-lock"
LEDGER = "/examples/ledger"


async def pod(settings: aiocoord.Settings, name: str, tokens: list[int]) -> None:
    async with aiocoord.connect(settings) as coord:
        for _ in range(3):
            async with aiocoord.mutex(coord, LOCK, participant_id=name) as held:
                node = await coord.client.get(LEDGER)
                line = f"{name} token=0x{held.token:x}\n".encode()
                # A version check as well: it would fail if anyone had written meanwhile.
                await coord.client.set(LEDGER, node.data + line, version=node.stat.version)
                tokens.append(held.token)
            await asyncio.sleep(0.05)  # other work, outside the lock


async def main(settings: aiocoord.Settings) -> None:
    async with aiocoord.connect(settings) as coord:
        try:
            await coord.client.create(LEDGER, b"", make_parents=True)
        except aiocoord.NodeExistsError:
            await coord.client.set(LEDGER, b"")
        tokens: list[int] = []
        async with asyncio.timeout(30):
            await asyncio.gather(*(pod(settings, f"pod-{i}", tokens) for i in range(1, 4)))
        ledger = (await coord.client.get(LEDGER)).data.decode().splitlines()
        print("ledger:", *ledger, sep="\n  ")
        print(
            f"{len(ledger)} appends, one holder at a time; tokens increase: {tokens == sorted(tokens)}"
        )


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
