"""The assigner's sweep of expired results, where the server has no TTL nodes.

Results are TTL nodes when the server allows them (``extendedTypesEnabled``);
otherwise they are persistent, and the assigner deletes those whose
modification time is older than the retention, by its own clock, every
quarter of the retention (between 0.5 s and a minute).
"""

from __future__ import annotations

import contextlib
import logging

import anyio

from ..errors import ConnectionLostError, CoordError, CoordinatorClosedError, ZooKeeperError
from ..zk.client import ZkClient
from ._ops import Retention, older_than
from ._records import JobsLayout

__all__ = ("sweep_results",)

log = logging.getLogger(__name__)


async def sweep_results(client: ZkClient, layout: JobsLayout, retention: Retention) -> None:
    """Delete results older than the retention, periodically, until cancelled."""
    every = max(0.5, min(retention.seconds / 4, 60.0))
    while True:
        await anyio.sleep(every)
        try:
            buckets = await client.children(layout.results)
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("result sweep of %s failed: %s", layout.results, exc)
            continue
        limiter = anyio.CapacityLimiter(32)
        for bucket in buckets:  # one bucket at a time: no reply grows with all the results
            path = f"{layout.results}/{bucket}"
            try:
                names = await client.children(path)
            except CoordinatorClosedError:
                raise
            except CoordError as exc:
                log.warning("result sweep of %s failed: %s", path, exc)
                continue
            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(_sweep_one, client, retention, limiter, f"{path}/{name}")


async def _sweep_one(
    client: ZkClient, retention: Retention, limiter: anyio.CapacityLimiter, path: str
) -> None:
    async with limiter:
        with contextlib.suppress(ConnectionLostError, ZooKeeperError):
            stat = await client.exists(path)
            if stat is not None and older_than(stat.mtime, retention.seconds):
                await client.delete(path, version=stat.version)
