"""Mixed fleets, for real: kazoo's ``Election`` and ``leader_latch(..., layout="kazoo")``.

kazoo 2.x's ``Election(path, identifier)`` is a kazoo ``Lock`` at the path;
the holder leads.  kazoo elections (each in a thread with its own
``KazooClient``, running ``election.run(func)`` term after term) and aiocoord
latches (each with its own session, taking leadership and giving it back)
share one path; on one clock (``time.monotonic`` in both) no two terms
overlap and every participant leads.  Then the aiocoord leader's session is
expired while a kazoo election waits: kazoo's side leads, after our term ended.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import LeadershipLost, leader_latch
from aiocoord.recipes.leader_latch import describe_latch
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually
from tests.zk._kazoo_fleet import Holders, coordinator, kazoo_client

pytestmark = pytest.mark.anyio

RUN = 8.0  # seconds of terms going back and forth
TERM = 0.12  # seconds a term lasts: long enough for an overlap to show


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


def kazoo_elector(hosts: str, path: str, name: str, holders: Holders, until: float) -> None:
    """Run kazoo's ``Election.run`` term after term until `until` (monotonic)."""

    def lead() -> None:
        holders.enter(name)
        time.sleep(TERM)
        holders.leave(name)

    with kazoo_client(hosts) as zk:
        election = zk.Election(path, name)
        while time.monotonic() < until:
            election.run(lead)


async def aiocoord_elector(
    hosts: str, path: str, name: str, holders: Holders, until: float
) -> None:
    """Lead and give it back until `until`: by `step_down`, then by leaving and rejoining."""
    async with coordinator(hosts) as coord:
        rounds = 0
        while time.monotonic() < until:
            async with leader_latch(coord, path, participant_id=name, layout="kazoo") as latch:
                while time.monotonic() < until:
                    async with latch.leadership():
                        holders.enter(name)
                        try:
                            await anyio.sleep(TERM)
                        finally:
                            holders.leave(name)
                    rounds += 1
                    if rounds % 2:
                        break  # leave: the node goes; a new latch joins at the tail
                    assert await latch.step_down()


async def test_kazoo_elections_and_kazoo_layout_latches_elect_one_leader(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/election"
    hosts = zk_server.connect_string
    holders = Holders()
    until = time.monotonic() + RUN
    with anyio.fail_after(RUN + 60):
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(
                    anyio.to_thread.run_sync,
                    kazoo_elector,
                    hosts,
                    path,
                    f"kazoo-{i}",
                    holders,
                    until,
                )
                tg.start_soon(aiocoord_elector, hosts, path, f"aiocoord-{i}", holders, until)
    assert holders.most == 1, "two leaders at once"
    assert holders.overlaps() == []
    led = {who for _, _, who in holders.intervals}
    assert led == {"kazoo-0", "kazoo-1", "aiocoord-0", "aiocoord-1"}
    assert holders.handovers() >= 6  # leadership really went back and forth


async def test_an_expired_leader_session_hands_leadership_to_a_waiting_kazoo_election(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/expired"
    hosts = zk_server.connect_string
    holders = Holders()
    kazoo_led = threading.Event()
    with anyio.fail_after(60):
        async with coordinator(hosts) as coord:
            # lose_on_suspend=True: the expiry is forced from outside (the server deletes
            # the node at once), so the term must end on the first sign of trouble.
            latch = leader_latch(
                coord, path, participant_id="aiocoord-a", layout="kazoo", lose_on_suspend=True
            )
            async with latch, anyio.create_task_group() as tg:
                term = await latch.wait()
                node = latch.node
                assert node is not None
                assert re.fullmatch(r"[0-9a-f]{32}__lock__\d{10}", node.rsplit("/", 1)[1])
                assert term.token == (await coord.client.exists(node)).czxid  # type: ignore[union-attr]

                def kazoo_waits() -> None:
                    with kazoo_client(hosts) as zk:
                        election = zk.Election(path, "kazoo-w")

                        def lead() -> None:
                            holders.enter("kazoo-w")
                            time.sleep(TERM)
                            holders.leave("kazoo-w")
                            kazoo_led.set()

                        election.run(lead)

                tg.start_soon(anyio.to_thread.run_sync, kazoo_waits)

                async def queued() -> bool:
                    return [p.id for p in await latch.participants()] == ["aiocoord-a", "kazoo-w"]

                await eventually(queued)
                view = await describe_latch(coord, path)  # recognised as kazoo's election
                assert (view.layout, view.leader) == ("kazoo", "aiocoord-a")

                async def lead_until_expired() -> None:
                    holders.enter("aiocoord-a")
                    try:
                        async with latch.leadership():
                            # In a task of its own: the body is cancelled while it runs.
                            tg.start_soon(expire_session, coord)
                            await anyio.sleep_forever()
                    finally:
                        holders.leave("aiocoord-a")

                with pytest.raises(LeadershipLost):
                    await lead_until_expired()
                await anyio.to_thread.run_sync(kazoo_led.wait, 30.0)
    assert kazoo_led.is_set()
    assert [who for _, _, who in sorted(holders.intervals)] == ["aiocoord-a", "kazoo-w"]
    assert holders.overlaps() == []
