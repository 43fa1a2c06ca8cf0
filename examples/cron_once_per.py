"""A 6-hourly query run once across the fleet, whichever pods wake up for it.

Every pod runs the same cron ("at 00:00, 06:00, 12:00, 18:00 UTC, run the
revenue query").  `once_per` turns that into exactly one run per 6-hour
window: the first pod in takes a lease-based CAS lock, runs the query and
records the run in the same write that releases the lock; the others find the
window done (or being run) and skip it.  A pod that crashes mid-run leaves
only its lease behind: once it expires, another pod may run the window again.

Here three pods fire at once, twice (a second cron tick in the same window).

    python examples/cron_once_per.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack

import aiocoord
from aiocoord.cli import local_zookeeper

PATH = "/examples/revenue-query"
SIX_HOURS = 6 * 3600


async def revenue_query(token: int | None) -> None:
    await asyncio.sleep(0.2)  # the expensive query; pass `token` to what it writes (fencing)


async def cron_tick(coord: aiocoord.Coordinator, pod: str) -> bool:
    """What each pod's cron does at the top of the window: True if this pod ran the query."""
    async with aiocoord.once_per(coord, PATH, SIX_HOURS, owner=pod, lease=60) as slot:
        window = f"{slot.window:%Y-%m-%d %H:%M} UTC"
        if not slot.acquired:
            if slot.last_run is not None and slot.last_run >= slot.window:
                print(f"{pod}: skip, window {window} already ran at {slot.last_run:%H:%M:%S} UTC")
            else:
                print(f"{pod}: skip, another pod is running window {window} right now")
            return False
        print(f"{pod}: running the revenue query for the window {window}")
        await revenue_query(slot.token)
    print(f"{pod}: run recorded at {slot.last_run:%H:%M:%S} UTC")
    return True


async def main(settings: aiocoord.Settings) -> None:
    pods = ["pod-1", "pod-2", "pod-3"]
    async with asyncio.timeout(30), AsyncExitStack() as stack:
        # One session per pod, as separate processes would have.
        coords = [await stack.enter_async_context(aiocoord.connect(settings)) for _ in pods]
        runs = 0
        for tick in (1, 2):
            print(f"-- cron tick {tick}: every pod wakes up")
            ran = await asyncio.gather(
                *(cron_tick(c, p) for c, p in zip(coords, pods, strict=True))
            )
            runs += sum(ran)
        print(f"runs in this window by these pods: {runs}")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
