"""Two services find each other through `service_discovery`; a third is written as Java would.

A pricing service registers two instances under /examples/services (each
process with its own ZooKeeper session, as separate pods would have); a
"Java" inventory service is registered by writing curator-x-discovery's JSON
byte for byte, as a Java service using Curator's ``JsonInstanceSerializer``
would.  The order service discovers both from its cache: it spreads calls
over the pricing instances by round robin, marks one down after two errors
(Curator's down-instance policy), reads the Java instance, and sees a pricing
instance go when its process stops.

    python examples/discovery.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiocoord
from aiocoord.cli import local_zookeeper

BASE = "/examples/services"
# What a Java service's ServiceDiscovery writes for an instance with a Map payload.
JAVA_INSTANCE = (
    b'{"name":"inventory","id":"inv-1","address":"10.0.0.9","port":9090,"sslPort":null,'
    b'"payload":{"@class":"java.util.LinkedHashMap","lang":"java"},'
    b'"registrationTimeUTC":1764201600000,"serviceType":"DYNAMIC",'
    b'"uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},'
    b'{"value":"address","variable":true},{"value":":","variable":false},'
    b'{"value":"port","variable":true}]},"enabled":true}'
)


async def pricing(settings: aiocoord.Settings, name: str, port: int, stop: asyncio.Event) -> None:
    async with aiocoord.connect(settings) as coord, aiocoord.service_discovery(coord, BASE) as sd:
        await sd.register(
            aiocoord.ServiceInstance(
                name="pricing",
                id=name,
                address="127.0.0.1",
                port=port,
                payload={"zone": "a"},
                uri_spec="{scheme}://{address}:{port}/prices",
            )
        )
        await stop.wait()  # leaving unregisters


async def until(
    check: Callable[[aiocoord.ServiceDiscovery], Awaitable[bool]], sd: aiocoord.ServiceDiscovery
) -> None:
    """Wait for the discovery's cache (one watch, no request per look) to satisfy `check`."""
    changes = sd.changes()  # subscribed before looking: no change is missed
    if await check(sd):
        return
    async for _ in changes:
        if await check(sd):
            return


async def main(settings: aiocoord.Settings) -> None:
    stops = [asyncio.Event(), asyncio.Event()]
    async with aiocoord.connect(settings) as coord, aiocoord.connect(settings) as java:
        await java.client.create(
            f"{BASE}/inventory/inv-1",
            JAVA_INSTANCE,
            mode=aiocoord.zk.CreateMode.EPHEMERAL,
            make_parents=True,
        )
        async with asyncio.timeout(30), aiocoord.service_discovery(coord, BASE) as sd:
            pods = [
                asyncio.create_task(pricing(settings, f"pricing-{i}", 8000 + i, stops[i]))
                for i in range(2)
            ]

            async def both(sd: aiocoord.ServiceDiscovery) -> bool:
                return len(await sd.instances("pricing")) == 2

            await until(both, sd)
            print(f"services: {await sd.names()}")
            provider = sd.provider("pricing")
            calls = [await provider.get() for _ in range(4)]
            print(f"round robin: {[c.id for c in calls if c is not None]}")
            first = calls[0]
            assert first is not None
            print(f"uri of {first.id}: {first.uri()}")
            provider.note_error(first)
            provider.note_error(first)  # two errors: down for 30 seconds
            after = {c.id for c in [await provider.get() for _ in range(3)] if c is not None}
            print(f"after two errors from {first.id}: {sorted(after)}")

            inventory = await sd.instance("inventory", "inv-1")
            assert inventory is not None
            print(f"java instance: {inventory.address}:{inventory.port} {inventory.payload}")

            stops[1].set()  # pricing-1 stops: its registration goes with it
            await pods[1]

            async def one(sd: aiocoord.ServiceDiscovery) -> bool:
                return len(await sd.instances("pricing")) == 1

            await until(one, sd)
            print(f"after pricing-1 stopped: {[i.id for i in await sd.instances('pricing')]}")
            stops[0].set()
            await pods[0]


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
