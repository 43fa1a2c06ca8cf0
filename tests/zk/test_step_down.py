"""Step-down on real servers: a latch gives leadership up and joins at the back; a selector's
`interrupt` cancels `lead` and hands over."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import (
    Coordinator,
    CoordinatorClosedError,
    LeadershipLost,
    LeadershipTerm,
    leader_latch,
    leader_selector,
)
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def sessions(hosts: str, chroot: str, n: int) -> AsyncIterator[list[Coordinator]]:
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                aiocoord.connect(hosts, namespace=chroot, session_timeout=4.0)
            )
            for _ in range(n)
        ]


async def test_a_leader_steps_down_the_next_leads_and_it_joins_at_the_back(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/step/latch"
    lost: list[LeadershipLost] = []
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 3) as (ca, cb, cc),
            leader_latch(ca, path, participant_id="a") as a,
            leader_latch(cb, path, participant_id="b") as b,
            leader_latch(cc, path, participant_id="c") as c,
            anyio.create_task_group() as tg,
        ):
            await a.wait()
            assert not await b.step_down()  # not the leader: nothing happens
            entered = anyio.Event()

            async def lead() -> None:
                try:
                    async with a.leadership():
                        entered.set()
                        await anyio.sleep_forever()
                except LeadershipLost as exc:
                    lost.append(exc)

            tg.start_soon(lead)
            await entered.wait()
            assert await a.step_down()
            assert not a.has_leadership
            await b.wait()

            async def order_is(expected: list[str]) -> bool:
                return [p.id for p in await a.participants()] == expected

            async def rejoined() -> bool:
                return await order_is(["b", "c", "a"])

            await eventually(rejoined, timeout=10)
            assert lost and lost[0].reason == "stepped down"
            assert await b.step_down()
            await c.wait()
            assert await c.step_down()
            term = await a.wait()  # a's turn again, from the back of the queue
            assert isinstance(term, LeadershipTerm)
    with pytest.raises(CoordinatorClosedError):
        await a.step_down()


async def test_interrupt_cancels_lead_and_the_next_selector_leads(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/step/selector"
    leads: list[str] = []
    cancelled: list[str] = []
    started = {"a": anyio.Event(), "b": anyio.Event()}

    def lead_as(name: str) -> Callable[[LeadershipTerm], Awaitable[None]]:
        async def lead(term: LeadershipTerm) -> None:
            leads.append(name)
            started[name].set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.append(name)
                raise

        return lead

    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb),
            leader_selector(ca, path, lead_as("a"), participant_id="a") as a,
        ):
            await started["a"].wait()
            async with leader_selector(cb, path, lead_as("b"), participant_id="b") as b:
                assert not await b.interrupt()
                assert await a.interrupt()
                await started["b"].wait()
                assert cancelled == ["a"] and a.losses == 1

                async def a_queued_behind_b() -> bool:
                    return [p.id for p in await a.latch.participants()] == ["b", "a"]

                await eventually(a_queued_behind_b, timeout=10)
            assert leads[:2] == ["a", "b"]
