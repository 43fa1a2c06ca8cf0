"""`require_leader`'s 503 names the leader from the moment the lifespan reports ready.

Three pods on one path: the leader, the follower just behind it (which learns
the leader's id with its watch) and one further back, which must know it too,
at startup and after the leader changes.
"""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from aiocoord import ElectionState
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


async def test_a_follower_further_back_never_forgets_the_leader_while_it_stands(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Once known, the id stays known until the leader's node goes.

    Each change of the latch's or the connection's state starts a new round
    of reading the leader; the rounds began by forgetting the id, so for the
    round trips of every new read (the first comes at once: both streams
    replay the current state) a follower further back answered ``None``.
    """
    from aiocoord.integrations._leader_names import LeaderNames
    from tests.zk.test_leader_latch import coordinators, latches

    with anyio.fail_after(30):
        async with (
            coordinators(zk_server.connect_string, 3, namespace=zk_chroot) as coords,
            latches(coords, "/names") as (_a, _b, c),
        ):

            async def following() -> bool:
                return c.state is ElectionState.FOLLOWING and c.known_leader is None

            await eventually(following)
            names = LeaderNames(coords[2])
            known = anyio.Event()
            seen: list[str | None] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(names.follow, c, known)
                await known.wait()
                end = anyio.current_time() + 0.5
                while anyio.current_time() < end:
                    seen.append(names.leader("/names"))
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()
            assert set(seen) == {"p0"}, [s for s in seen if s != "p0"][:3]
