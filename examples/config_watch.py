"""A feature flag read live by several processes: each keeps it in a node cache.

Three pods (each with its own ZooKeeper session, as separate processes would
have) read the flag at /examples/flags/new-checkout from a `node_cache`: no
round trip per read, one persistent watch per pod.  An operator flips the flag
three times; every pod sees each change as it lands (changes that land at once
may coalesce: the cache reads the latest) and ends on the last one.  A pod
that loses its connection keeps serving the last value it read (``stale``)
and catches up when it is back.

    python examples/config_watch.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio
import json

import aiocoord
from aiocoord.cli import local_zookeeper

FLAG = "/examples/flags/new-checkout"
LAST = 3


def parse(node: aiocoord.Node | None) -> dict[str, object]:
    return json.loads(node.data) if node is not None else {"enabled": False, "rev": 0}


async def pod(
    settings: aiocoord.Settings, name: str, ready: asyncio.Event, seen: dict[str, list[int]]
) -> None:
    async with aiocoord.connect(settings) as coord, aiocoord.node_cache(coord, FLAG) as flag:
        changes = flag.changes()  # subscribed now: nothing after `current` is missed
        print(f"{name}: new-checkout starts as {parse(flag.current)}")
        seen[name] = []
        ready.set()
        async for node in changes:
            value = parse(node)
            seen[name].append(int(str(value["rev"])))
            print(
                f"{name}: new-checkout is now {'on' if value['enabled'] else 'off'} (rev {value['rev']})"
            )
            if value["rev"] == LAST:
                break


async def main(settings: aiocoord.Settings) -> None:
    async with aiocoord.connect(settings) as admin:
        await admin.client.delete_all(FLAG)
        await admin.client.create(
            FLAG, json.dumps({"enabled": False, "rev": 0}).encode(), make_parents=True
        )
        seen: dict[str, list[int]] = {}
        readies = [asyncio.Event() for _ in range(3)]
        async with asyncio.timeout(30):
            pods = [
                asyncio.create_task(pod(settings, f"pod-{i + 1}", readies[i], seen))
                for i in range(3)
            ]
            await asyncio.gather(*(ready.wait() for ready in readies))
            for rev in range(1, LAST + 1):
                value = {"enabled": rev % 2 == 1, "rev": rev}
                await admin.client.set(FLAG, json.dumps(value).encode())
                await asyncio.sleep(0.2)  # the operator thinks between flips
            await asyncio.gather(*pods)
        rising = all(revs == sorted(set(revs)) for revs in seen.values())
        ends = all(revs[-1] == LAST for revs in seen.values())
        print(f"{len(seen)} pods ended on rev {LAST}: {ends}; revisions only rose: {rising}")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
