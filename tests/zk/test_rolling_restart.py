"""Rights through SUSPENDED (the default loss policy) against real servers.

A short SUSPENDED on the same session keeps every right (mutex body, latch
term, semaphore lease, cron leadership: same token, nothing cancelled); a
holder cut off for good ends its body before the server could expire its
session; a rolling restart of a 3-member ensemble, the leader included,
moves no right, and scheduler jobs running through it each run once.  ``lose_on_suspend=True`` still loses at SUSPENDED.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
import anyio.abc
import pytest

import aiocoord
from aiocoord import ConnectionState as S
from aiocoord import Coordinator, Cron, Firing, LockLost, Worker
from aiocoord.testing import FaultProxy, ZooKeeperEnsemble, ZooKeeperServer
from tests.helpers import recording

pytestmark = pytest.mark.anyio

_USABLE = {S.CONNECTED, S.RECONNECTED}


class Body:
    """A right's body in a task of its own: entered, then kept until `leave` (or cancelled)."""

    def __init__(self, enter: Callable[[], AbstractAsyncContextManager[Any]]) -> None:
        self._enter = enter
        self.entered = anyio.Event()
        self.left = anyio.Event()
        self._leave = anyio.Event()
        self.token = 0
        self.tokens: list[int] = []
        self.cancelled = False
        self.ended_at = 0.0  # time.monotonic() when the body stopped running
        self.error: BaseException | None = None

    async def run(self) -> None:
        try:
            async with self._enter() as right:
                self.token = _token(right)
                self.tokens.append(self.token)
                self.entered.set()
                try:
                    await self._leave.wait()
                except anyio.get_cancelled_exc_class():
                    self.ended_at = time.monotonic()
                    self.cancelled = True
                    raise
        except Exception as exc:  # LockLost / LeadershipLost when the right was lost
            self.error = exc
        finally:
            if not self.ended_at:
                self.ended_at = time.monotonic()
            self.left.set()

    async def leave(self) -> None:
        self._leave.set()
        await self.left.wait()


def _token(right: Any) -> int:
    token = right.token
    assert isinstance(token, int)
    return token


@asynccontextmanager
async def _term(coord: Coordinator, path: str, pid: str, **kw: Any) -> AsyncIterator[Any]:
    async with (
        aiocoord.leader_latch(coord, path, participant_id=pid, **kw) as latch,
        latch.leadership() as term,
    ):
        yield term


async def test_a_short_suspension_keeps_the_right_by_default_and_strict_still_loses(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40), FaultProxy(*zk_server.address) as proxy:
        hosts = proxy.connect_string
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=8) as c1,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=8) as c2,
            anyio.create_task_group() as tg,
        ):
            kept = [
                Body(lambda: aiocoord.mutex(c1, "/m", participant_id="kept")),
                Body(lambda: _term(c1, "/l", "kept")),
            ]
            strict = [
                Body(lambda: aiocoord.mutex(c2, "/ms", participant_id="s", lose_on_suspend=True)),
                Body(lambda: _term(c2, "/ls", "s", lose_on_suspend=True)),
            ]
            for body in kept + strict:
                tg.start_soon(body.run)
                await body.entered.wait()
            async with recording(c1) as events:
                mark = events.mark()
                proxy.cut()  # the member "restarts": both sessions SUSPENDED, then back
                down = await events.wait_for(S.SUSPENDED, after=mark)
                back = await events.wait_for(S.RECONNECTED, after=mark, timeout=10)
            assert not back.new_session and back.at - down.at < 8 * 2 / 3
            for body in strict:
                with anyio.fail_after(5):
                    await body.left.wait()
                assert body.cancelled
            assert isinstance(strict[0].error, LockLost) and strict[0].error.reason == "suspended"
            await anyio.sleep(0.5)  # a right that was to go would have gone
            for body in kept:
                assert not body.left.is_set() and not body.cancelled
            for body in kept:
                await body.leave()
                assert body.error is None and not body.cancelled and body.tokens == [body.token]


async def test_a_holder_cut_off_for_good_ends_its_body_a_tenth_of_the_timeout_before_a_rival(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    timeout = 6.0
    with anyio.fail_after(40), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=timeout
            ) as cut,
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as rival_coord,
            anyio.create_task_group() as tg,
        ):
            holder = Body(lambda: aiocoord.mutex(cut, "/cut", participant_id="holder"))
            tg.start_soon(holder.run)
            await holder.entered.wait()
            rival = Body(lambda: aiocoord.mutex(rival_coord, "/cut", participant_id="rival"))
            tg.start_soon(rival.run)
            await anyio.sleep(0.2)
            assert cut.client.session.timing.session_timeout == timeout  # as negotiated
            answered = cut.client.session.answered_at
            cut_at = time.monotonic()
            proxy.pause()  # blackholed: nothing more gets through, no reset
            await holder.left.wait()
            await rival.entered.wait()
            granted_at = time.monotonic()  # one clock: this process's monotonic clock
            assert holder.cancelled and isinstance(holder.error, LockLost)
            assert rival.token > holder.token
            margin = granted_at - holder.ended_at
            print(  # the figures for docs/operations.md
                f"blackhole: body ended {holder.ended_at - cut_at:.2f}s after the cut, "
                f"{answered + timeout - holder.ended_at:.2f}s before the earliest expiry, "
                f"{margin:.2f}s before the rival's grant (timeout {timeout:g}s)"
            )
            assert margin >= timeout / 10
            assert holder.ended_at <= answered + timeout - timeout / 10
            await rival.leave()
            proxy.resume()


class Jobs:
    """Scheduler jobs that run until released, counting each job's starts and cancellations."""

    def __init__(self, coord: Coordinator) -> None:
        self.sched = aiocoord.Scheduler(coord, "/jobs")
        self.starts: dict[int, int] = {}
        self.cancelled: list[int] = []
        self.running: dict[int, anyio.Event] = {}
        self.release = anyio.Event()
        self.ids: dict[int, str] = {}

        @self.sched.job("hold")
        async def hold(n: int) -> int:
            self.starts[n] = self.starts.get(n, 0) + 1
            self.running[n].set()
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.append(n)
                raise
            return n

    async def submit_running(self, n: int) -> None:
        """Submit job `n` and return once its body runs."""
        self.running[n] = anyio.Event()
        self.ids[n] = await self.sched.submit("hold", {"n": n})
        with anyio.fail_after(20):
            await self.running[n].wait()


async def _suspended_for(events: Any, mark: int) -> float | None:
    """How long the first SUSPENDED after `mark` lasted (None: none), on the same session."""
    for down in events.events[mark:]:
        if down.state is S.SUSPENDED:
            up = await events.wait_for(S.RECONNECTED, after=mark)
            assert not up.new_session
            seconds: float = up.at - down.at
            return seconds
    return None


async def test_a_rolling_restart_moves_no_right(zk_chroot: str) -> None:
    """Each member restarted in turn (the leader last): nothing moves, nothing is cancelled,
    and jobs running through every restart each run once, to the end."""
    with (
        ZooKeeperEnsemble(3, extra_config={"maxSessionTimeout": "20000"}) as ensemble,
        anyio.fail_after(150),
    ):
        hosts = ensemble.connect_string
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=12) as coord,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=12) as jobs_coord,
            anyio.create_task_group() as tg,
        ):
            bodies = [
                Body(lambda: _term(coord, "/latch", "p1")),
                Body(lambda: aiocoord.mutex(coord, "/mutex", participant_id="p1")),
                Body(lambda: aiocoord.semaphore(coord, "/sem", max_leases=1, participant_id="p1")),
            ]
            for body in bodies:
                tg.start_soon(body.run)
                await body.entered.wait()
            tokens: set[int] = set()
            cron = Cron(coord, "/cron", worker=Worker("1.0", id="w1"))

            @cron.job(every=timedelta(seconds=0.5))
            async def tick(firing: Firing) -> None:
                tokens.add(firing.token)

            jobs = Jobs(jobs_coord)
            suspended: list[str] = []  # the figures for docs/operations.md
            jobs_suspended: list[str] = []
            async with (
                cron,
                jobs.sched.worker(capacity=8, participant_id="j1"),
                recording(coord) as events,
                recording(jobs_coord) as job_events,
            ):
                with anyio.fail_after(20):
                    while not tokens:  # noqa: ASYNC110 - the cron's first firing
                        await anyio.sleep(0.1)
                await jobs.submit_running(0)  # runs through every restart
                leader = ensemble.leader()
                assert leader is not None
                order = [m for m in ensemble.members if m is not leader] + [leader]
                for i, member in enumerate(order, start=1):
                    mark, job_mark = events.mark(), job_events.mark()
                    await anyio.to_thread.run_sync(member.restart)
                    await anyio.to_thread.run_sync(ensemble.wait_formed)
                    with anyio.fail_after(30):
                        while not {coord.state, jobs_coord.state} <= _USABLE:  # noqa: ASYNC110
                            await anyio.sleep(0.05)
                    role = "leader" if member is leader else "follower"
                    took = await _suspended_for(events, mark)
                    if took is not None:
                        suspended.append(f"{member.name} ({role}) {took:.2f}s")
                    took = await _suspended_for(job_events, job_mark)
                    if took is not None:
                        jobs_suspended.append(f"{member.name} ({role}) {took:.2f}s")
                    await anyio.sleep(1.0)  # a tick or two under the new member
                    for body in bodies:
                        assert not body.left.is_set() and not body.cancelled, member.name
                    assert jobs.cancelled == [], member.name
                    await jobs.submit_running(i)  # started under the new member, runs on
                assert cron.leading == {"tick"}
                jobs.release.set()
                with anyio.fail_after(20):
                    results = {n: await jobs.sched.result(jid) for n, jid in jobs.ids.items()}
            print(f"rolling restart: SUSPENDED when restarting {', '.join(suspended)}")
            print(f"rolling restart: jobs' SUSPENDED when restarting {', '.join(jobs_suspended)}")
            assert len(tokens) == 1  # cron leadership never moved
            for body in bodies:
                await body.leave()
                assert body.error is None and not body.cancelled and body.tokens == [body.token]
            assert results == {n: n for n in range(len(order) + 1)}  # none lost
            assert jobs.starts == dict.fromkeys(results, 1)  # none ran twice
            assert jobs.cancelled == []


async def test_the_session_port_gives_the_send_time_of_the_last_answered_request(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=3
        ) as coord:
            session = coord.client.session
            before = time.monotonic()
            await coord.client.exists("/")
            after_request = session.answered_at
            assert before <= after_request <= time.monotonic()
            await anyio.sleep(1.5)  # no request: a heartbeat (every T/3 = 1 s) is answered
            heartbeat = session.answered_at
            assert after_request + 0.5 < heartbeat <= time.monotonic()
