"""Fault campaigns: the checker on synthetic logs, findings as scenarios, and one bounded campaign."""

from __future__ import annotations

import time

import anyio
import pytest

import aiocoord
from aiocoord.recipes._cas_record import decode
from aiocoord.testing import ZooKeeperServer

# --- scenarios found by the campaigns ------------------------------------------------------


@pytest.mark.anyio
async def test_cancelling_around_connect_lets_recipes_clean_up(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """SIGTERM handlers and Ctrl-C cancel the scope around ``connect()`` and every recipe.

    The recipes' shielded clean-up then needs the session's reader, which used
    to be cancelled with them: the lock stayed held for its lease, the latch
    node stayed until the session closed, and leaving took a request timeout
    per recipe.  Found by the campaign's participants, which took 6 s to stop.
    """
    hosts = zk_server.connect_string
    with anyio.fail_after(20):
        async with aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as observer:
            with anyio.CancelScope() as outer:
                async with aiocoord.connect(
                    hosts, namespace=zk_chroot, session_timeout=4.0
                ) as coord:
                    async with aiocoord.leader_latch(coord, "/latch", participant_id="a") as latch:
                        await latch.wait()
                        async with aiocoord.cas_lock(coord, "/lock", owner="a", lease=60.0):
                            started = time.monotonic()
                            outer.cancel()
                            await anyio.sleep_forever()
            assert time.monotonic() - started < 2.0  # not a request timeout per recipe
            assert await observer.client.children("/latch") == []
            record = decode("/lock", (await observer.client.get("/lock")).data)
            assert record is not None and not record.held
