"""What an operator sees with default logging (WARNING): losses are WARNING, the rest INFO.

Session LOST, leadership lost and a gone worker's jobs returned to the queue
are WARNING; leadership gained, a reconnect and leaving on purpose are INFO,
and so is a selector giving leadership back (`lead` returned, `interrupt`,
`step_down`, `lead` raised, leaving).
"""

from __future__ import annotations

import logging

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState, LeaderLatch, LeadershipTerm, leader_selector
from aiocoord.recipes.leader_latch import ElectionState
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer, expire_session
from tests.helpers import eventually, recording

pytestmark = pytest.mark.anyio


class Seen(logging.Handler):
    """Sets `event` when a record with `needle` in its message is logged (on the loop's thread)."""

    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.event.set()


def levels(caplog: pytest.LogCaptureFixture, needle: str) -> set[str]:
    return {r.levelname for r in caplog.records if needle in r.getMessage()}


async def test_session_lost_and_leadership_lost_are_warnings_gains_and_reconnects_info(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiocoord")
    with anyio.fail_after(30):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
        ) as coord:
            async with LeaderLatch(
                coord, "/app/leader", participant_id="pod-a", lose_on_suspend=True
            ) as latch:
                await latch.wait()
                async with recording(coord) as rec:
                    await expire_session(coord)
                    await rec.wait_for(ConnectionState.LOST, timeout=15)
                    await rec.wait_for(ConnectionState.RECONNECTED, timeout=15)
                async for change in latch.changes():
                    if change.state is ElectionState.ELECTED:
                        break
    assert levels(caplog, "leader of /app/leader as pod-a (token") == {"INFO"}
    assert levels(caplog, "connection LOST") == {"WARNING"}
    assert levels(caplog, "connection RECONNECTED") == {"INFO"}
    assert levels(caplog, "no longer leader of /app/leader as pod-a: suspended") == {"WARNING"}
    assert levels(caplog, "no longer leader of /app/leader as pod-a: closed") == {"INFO"}


async def test_a_selector_giving_leadership_back_is_info_and_a_loss_still_a_warning(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every voluntary end of a selector's term once logged "no longer leader ...: released"
    (or interrupted, stepped down, failed) at WARNING, as a loss is."""
    caplog.set_level(logging.DEBUG, logger="aiocoord")
    path, runs, running = "/app/selector", [0], anyio.Event()

    async def lead(term: LeadershipTerm) -> None:
        runs[0] += 1
        if runs[0] == 2:
            raise RuntimeError("a failing term")
        if runs[0] >= 3:  # the first term returns; from the third on, each is held
            running.set()
            await anyio.sleep_forever()

    async def ran(n: int) -> bool:
        return runs[0] >= n

    with anyio.fail_after(40):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
        ) as coord:
            async with leader_selector(
                coord, path, lead, participant_id="pod-s", backoff=0.05
            ) as sel:
                await eventually(lambda: ran(3))  # returned (released), raised (failed), held
                await running.wait()
                running = anyio.Event()
                assert await sel.interrupt()
                await running.wait()  # requeued, leads again
                running = anyio.Event()
                assert await sel.latch.step_down()
                await running.wait()
            # Left while leading: closed.
            voluntary = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert voluntary == [], [r.getMessage() for r in voluntary]
            for reason in ("released", "failed", "interrupted", "stepped down", "closed"):
                assert levels(caplog, f"no longer leader of {path} as pod-s: {reason}") == {"INFO"}

            # A real loss still is a WARNING.
            caplog.clear()
            running = anyio.Event()
            async with leader_selector(coord, path, lead, participant_id="pod-s") as sel:
                await running.wait()
                running = anyio.Event()
                async with recording(coord) as rec:
                    await expire_session(coord)
                    await rec.wait_for(ConnectionState.RECONNECTED, timeout=15)
                await running.wait()  # leads again on the new session
    lost = levels(caplog, f"no longer leader of {path} as pod-s: suspended")
    lost |= levels(caplog, f"no longer leader of {path} as pod-s: session lost")
    assert lost == {"WARNING"}, [r.getMessage() for r in caplog.records]


async def test_a_gone_workers_jobs_returned_to_the_queue_is_a_warning(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aiocoord")
    started = anyio.Event()
    hosts = zk_server.connect_string
    with anyio.fail_after(40):
        async with aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as coord:
            sched = Scheduler(coord, "/jobs")

            @sched.job("wait")
            async def wait() -> None:
                started.set()
                await anyio.sleep_forever()

            async with aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as other:
                theirs = Scheduler(other, "/jobs")
                theirs.job("wait")(wait)
                async with theirs.worker():
                    await sched.submit("wait", {})
                    await started.wait()
                    await expire_session(other)  # the worker's session ends: it is gone
                    returned = Seen("to the pending queue")
                    logging.getLogger("aiocoord").addHandler(returned)
                    try:
                        with anyio.fail_after(20):
                            # An assigner here returns its job (and may then run it here:
                            # leaving does not wait for that run to drain).
                            async with sched.worker(drain_timeout=0.5):
                                await returned.event.wait()
                    finally:
                        logging.getLogger("aiocoord").removeHandler(returned)
    assert levels(caplog, "to the pending queue") == {"WARNING"}


@pytest.mark.ensemble
async def test_a_member_restart_logs_no_warning_on_a_client_that_holds_nothing(
    zk_ensemble: ZooKeeperEnsemble, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A non-leading latch participant, a scheduler worker that is not the assigner and a
    cache ride a restart of the member they are connected to (a blip: SUSPENDED, then
    RECONNECTED on the same session) without a WARNING.  "waiting for leadership while
    ZooKeeper is unreachable" was one, once per latch, the assigner's latch included."""
    with anyio.fail_after(90):
        await anyio.to_thread.run_sync(zk_ensemble.wait_formed, 30)
        member = zk_ensemble.followers()[0]  # the leader's restart would suspend everyone
        rest = [m.connect_string for m in zk_ensemble.members if m is not member]
        async with aiocoord.connect(",".join(rest), namespace=zk_chroot) as holder:
            theirs = Scheduler(holder, "/jobs")
            async with (
                LeaderLatch(holder, "/app/leader", participant_id="holder") as led,
                theirs.worker(worker_id="holder"),
            ):
                await led.wait()
                await eventually(lambda: _leads(holder, "/jobs", "holder"))
                async with aiocoord.connect(
                    ",".join([member.connect_string, *rest]),
                    namespace=zk_chroot,
                    session_timeout=8,
                    randomize_hosts=False,  # on the member to restart
                ) as coord:
                    address = coord.connected_address
                    assert address is not None and address[1] == member.address[1]
                    sched = Scheduler(coord, "/jobs")
                    async with (
                        LeaderLatch(coord, "/app/leader", participant_id="idle") as latch,
                        sched.worker(worker_id="idle"),
                        aiocoord.tree_cache(coord, "/app"),
                    ):
                        waiting = anyio.Event()

                        async def wait_for_leadership() -> None:
                            waiting.set()
                            await latch.wait()

                        async with anyio.create_task_group() as tg:
                            tg.start_soon(wait_for_leadership)
                            await waiting.wait()
                            caplog.clear()
                            caplog.set_level(logging.DEBUG, logger="aiocoord")
                            session = coord.session_id
                            async with recording(coord) as rec:
                                await anyio.to_thread.run_sync(member.restart)
                                await rec.wait_for(ConnectionState.SUSPENDED, timeout=15)
                                await rec.wait_for(ConnectionState.RECONNECTED, timeout=15)
                            assert coord.session_id == session
                            await anyio.sleep(0.5)  # what follows the reconnect is logged
                            tg.cancel_scope.cancel()
                        warnings = [
                            f"{r.name}: {r.getMessage()}"
                            for r in caplog.records
                            if r.levelno >= logging.WARNING and r.name.startswith("aiocoord")
                        ]
                        assert warnings == [], warnings
                        assert not latch.has_leadership
        await anyio.to_thread.run_sync(zk_ensemble.wait_formed, 30)


async def _leads(coord: aiocoord.Coordinator, root: str, who: str) -> bool:
    participants = await LeaderLatch(coord, f"{root}/assigner").participants()
    return bool(participants) and participants[0].id == who
