"""Leader latch in an asyncio app: three pods elect one leader at a time.

Each pod has its own ZooKeeper session (as separate processes would) and joins
the latch at /examples/leader.  The leader runs its job inside
``latch.leadership()``: that block is cancelled if leadership is lost
(SUSPENDED, LOST), so the job never runs without the right to.  Here each
leader steps down after a moment; the next pod in line takes over, with a
larger fencing token.

    python examples/leader_latch.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio

import aiocoord
from aiocoord.cli import local_zookeeper

PATH = "/examples/leader"


async def pod(settings: aiocoord.Settings, name: str, tokens: list[int]) -> None:
    async with (
        aiocoord.connect(settings) as coord,
        aiocoord.leader_latch(coord, PATH, participant_id=name) as latch,
    ):
        async with latch.leadership() as term:  # waits until this pod leads
            ids = [p.id for p in await latch.participants()]
            print(f"{name}: leader with token 0x{term.token:x}; in line: {ids}")
            tokens.append(term.token)
            await asyncio.sleep(0.3)  # the leader's work
            print(f"{name}: done, stepping down")


async def main(settings: aiocoord.Settings) -> None:
    tokens: list[int] = []
    async with asyncio.timeout(30):
        await asyncio.gather(*(pod(settings, f"pod-{i}", tokens) for i in range(1, 4)))
    print(f"3 terms, one leader at a time; tokens increase: {tokens == sorted(tokens)}")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
