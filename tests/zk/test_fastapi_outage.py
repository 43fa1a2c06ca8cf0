"""The FastAPI integration while ZooKeeper is away, at startup and at shutdown.

Leader-only routes answer at once from what the process knows; the status
route answers quickly whatever the connection does, and shows details only
when asked to; a route that requires a path the lifespan does not run stops
the app from starting; a process that is shutting down takes no leadership.
Times are asserted as bounds with generous margins.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from types import FrameType
from typing import Annotated, Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from fastapi import Depends, FastAPI

from aiocoord import ConfigError, ConnectionState
from aiocoord.integrations.fastapi import lifespan, require_leader
from aiocoord.recipes.leader_latch import ElectionState, LeadershipTerm
from aiocoord.testing import ZooKeeperServer
from tests.helpers import Door, recording
from tests.zk.test_fastapi import CRON, Cron, Pod

S = ConnectionState
pytestmark = pytest.mark.anyio


@pytest.fixture
def door(zk_server: ZooKeeperServer) -> Iterator[Door]:
    d = Door(zk_server)
    try:
        yield d
    finally:
        d.close()


async def timed(call: Any) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = await call
    return answer, time.monotonic() - started


@pytest.mark.parametrize("until", [S.SUSPENDED, S.LOST], ids=["suspended", "lost"])
async def test_leader_only_routes_and_status_answer_at_once_while_zookeeper_is_away(
    door: Door, zk_chroot: str, until: S
) -> None:
    """`POST /admin/rebuild -> 503 in 20.0 s` and `/coordination/status` in 2.0 s, before."""
    cron = Cron()
    follower = Pod(
        lifespan(
            door.connect_string,
            participant_id="pod-b",
            latches=[CRON],
            namespace=zk_chroot,
            session_timeout=3.0,
            request_timeout=2.0,
        )
    )
    leader = Pod(
        lifespan(
            door.connect_string,
            participant_id="pod-a",
            leader_tasks={CRON: cron},
            namespace=zk_chroot,
            session_timeout=3.0,
        )
    )
    with anyio.fail_after(40):
        async with anyio.create_task_group() as tg:
            await tg.start(leader.run)
            await cron.started.wait()
            await tg.start(follower.run)
            async for change in follower.coordination.latches[CRON].changes():
                if change.state is ElectionState.FOLLOWING:
                    break
            # Connected: the leader's id is known without a round trip (the node just ahead).
            refused, took = await timed(follower.http.post("/admin/rebuild"))
            assert refused.status_code == 503 and took < 0.5
            assert refused.json()["detail"]["leader"] == "pod-a"
            coord = follower.coordination.coord
            async with recording(coord) as rec:
                door.close()
                await rec.wait_for(until, timeout=15)
            try:
                for _ in range(3):
                    refused, took = await timed(follower.http.post("/admin/rebuild"))
                    assert refused.status_code == 503 and took < 0.25, took
                    assert refused.headers["retry-after"] == "1"
                    assert refused.json()["detail"] == {
                        "error": "not the leader",
                        "path": CRON,
                        "leader": None,  # not known without asking ZooKeeper
                    }
                    status, took = await timed(follower.http.get("/coordination/status"))
                    assert status.status_code == 200 and took < 0.5, took
                    [latch] = status.json()["latches"]
                    assert latch["error"] == f"not read: ZooKeeper is unreachable ({until.value})"
                    assert latch["is_leader"] is False
            finally:
                door.open()
            await coord.wait_connected()
            await leader.stop()
            await follower.stop()


async def test_a_route_requiring_a_path_the_lifespan_does_not_run_fails_at_startup(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """It failed only at request time, with a RuntimeError (a 500)."""
    app = FastAPI(
        lifespan=lifespan(
            zk_server.connect_string, leader_tasks={CRON: Cron()}, namespace=zk_chroot
        )
    )

    @app.post("/admin/other")
    async def other(term: Annotated[LeadershipTerm, Depends(require_leader("/m/other"))]) -> None:
        pass

    with anyio.fail_after(20), pytest.raises(ConfigError) as info:
        async with app.router.lifespan_context(app):
            pass
    assert info.value.field == "require_leader"
    assert "'/m/other'" in str(info.value) and "POST /admin/other" in str(info.value)


async def test_status_is_redacted_unless_asked_for_detail(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Hosts, the session id, lock owners and tokens and exception texts went to anyone."""
    failed = anyio.Event()

    async def failing() -> None:
        failed.set()
        raise ValueError("secret-text")

    pod = Pod(
        lifespan(
            zk_server.connect_string,
            participant_id="pod-a",
            leader_tasks={CRON: failing},
            namespace=zk_chroot,
        )
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(pod.run)
            await failed.wait()
            async with pod.coordination.lock("/locks/report", owner="secret-owner", lease=5):
                raw = (await pod.http.get("/coordination/status")).text
                status = (await pod.http.get("/coordination/status")).json()
                health = (await pod.http.get("/coordination/health")).json()
                detailed = await pod.coordination.status(detail=True)
            coord = pod.coordination.coord
            secrets = [
                zk_server.connect_string,
                f"0x{coord.session_id:x}",
                "secret-owner",
                "secret-text",
            ]
            assert [s for s in secrets if s in raw] == []
            assert "session" not in health
            assert status["detail"] is False
            [latch] = status["latches"]
            assert latch["leader"] == "pod-a" and latch["participant_count"] == 1
            assert latch["task"]["last_error"] == "ValueError"
            assert status["locks"][0]["path"] == "/locks/report"
            assert set(status["locks"][0]) == {"path", "held_for"}
            # Asked for: everything.
            text = repr(detailed)
            assert [s for s in secrets if s not in text] == []
            await pod.stop()


# --- shutdown: a process that is stopping takes no leadership -----------------------------------


@pytest.fixture
def sigterm_to_server() -> Iterator[list[int]]:
    """A server's own SIGTERM handler (as uvicorn installs), recording what it got."""
    got: list[int] = []

    def server_handler(signum: int, _frame: FrameType | None) -> None:
        got.append(signum)

    previous = signal.signal(signal.SIGTERM, server_handler)
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, previous)


async def test_workers_told_to_stop_take_no_leadership_from_each_other(
    zk_server: ZooKeeperServer, zk_chroot: str, sigterm_to_server: list[int]
) -> None:
    """Leadership hopped to the other worker, itself shutting down, which started its task."""
    installed = signal.getsignal(signal.SIGTERM)
    cron_a, cron_b = Cron(), Cron()
    pods = [
        Pod(
            lifespan(
                zk_server.connect_string,
                participant_id=name,
                leader_tasks={CRON: cron},
                namespace=zk_chroot,
                session_timeout=4.0,
            )
        )
        for name, cron in (("worker-a", cron_a), ("worker-b", cron_b))
    ]
    a, b = pods
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await cron_a.started.wait()
            await tg.start(b.run)
            signal.raise_signal(signal.SIGTERM)  # both workers are told to stop
            await anyio.lowlevel.checkpoint()  # the handlers' calls into the loop run first
            assert a.coordination.retiring and b.coordination.retiring
            assert sigterm_to_server == [signal.SIGTERM]  # the server still got it
            assert cron_a.cancelled == 0  # the leader runs on until its lifespan ends
            status = (await b.http.get("/coordination/status")).json()
            assert status["retiring"] is True
            await a.stop()
            with anyio.move_on_after(1.0):
                await cron_b.started.wait()
            assert cron_b.tokens == []
            assert not b.coordination.latches[CRON].has_leadership
            assert (await b.http.post("/admin/rebuild")).status_code == 503
            await b.stop()
    assert signal.getsignal(signal.SIGTERM) is installed  # the server's handler is back


async def test_a_worker_not_told_to_stop_still_takes_over(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    cron_a, cron_b = Cron(), Cron()
    a = Pod(
        lifespan(
            zk_server.connect_string, participant_id="a", leader_tasks={CRON: cron_a},
            namespace=zk_chroot,
        )
    )  # fmt: skip
    b = Pod(
        lifespan(
            zk_server.connect_string, participant_id="b", leader_tasks={CRON: cron_b},
            namespace=zk_chroot,
        )
    )  # fmt: skip
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(a.run)
            await cron_a.started.wait()
            await tg.start(b.run)
            a.coordination.retire()  # only the leader is stopping (a rolling restart)
            await a.stop()
            await cron_b.started.wait()
            await b.stop()
