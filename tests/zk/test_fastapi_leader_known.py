"""`require_leader`'s 503 names the leader from the moment the lifespan reports ready.

Three pods on one path: the leader, the follower just behind it (which learns
the leader's id with its watch) and one further back, which must know it too,
at startup and after the leader changes.
"""

from __future__ import annotations

import anyio
import pytest

from aiocoord.integrations.fastapi import lifespan
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually
from tests.zk.test_fastapi import CRON, Cron, Pod, zk

pytestmark = pytest.mark.anyio


async def leader_named(pod: Pod) -> object:
    answer = await pod.http.post("/admin/rebuild")
    assert answer.status_code == 503, answer.text
    return answer.json()["detail"]["leader"]


async def test_every_follower_names_the_leader_once_ready_and_after_it_changes(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Right after startup the 503 said ``"leader": null`` though pod-a had led for a while."""
    hosts = zk_server.connect_string
    cron = Cron()
    a = Pod(
        lifespan(
            hosts, participant_id="pod-a", leader_tasks={CRON: cron}, **zk(zk_server, zk_chroot)
        )
    )
    b = Pod(lifespan(hosts, participant_id="pod-b", latches=[CRON], **zk(zk_server, zk_chroot)))
    c = Pod(lifespan(hosts, participant_id="pod-c", latches=[CRON], **zk(zk_server, zk_chroot)))
    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await cron.started.wait()
            await tg.start(b.run)
            assert await leader_named(b) == "pod-a"  # at once: no waiting after ready
            await tg.start(c.run)
            assert await leader_named(c) == "pod-a"
            await a.stop()

            async def c_names_b() -> bool:
                return await leader_named(c) == "pod-b"

            await eventually(c_names_b, timeout=15)
            await c.stop()
            await b.stop()
