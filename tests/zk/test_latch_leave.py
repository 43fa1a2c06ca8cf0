"""Leaving a leader latch while the connection is down leaves no ghost node (real server).

With a request timeout below the session timeout, a latch left during a short
outage cannot delete its node in time; the session outlives the outage, and so
would the node, first in the election for the rest of the session.  The delete
goes on in the background (owned by the coordinator's session) until it is done,
the session ends or the coordinator closes.
"""

from __future__ import annotations

import logging

import anyio
import pytest

import aiocoord
from aiocoord import ConnectionState, LeaderLatch
from aiocoord.testing import FaultProxy, ZooKeeperServer
from tests.helpers import aiocoord_tasks, eventually, recording


@pytest.mark.anyio
async def test_a_latch_left_while_disconnected_deletes_its_node_once_back(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aiocoord.recipes.leader_latch")
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(
                proxy.connect_string, namespace=zk_chroot, session_timeout=10, request_timeout=0.5
            ) as ca,
            aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=10
            ) as cb,
            recording(ca) as conn,
        ):
            a = LeaderLatch(ca, "/ghost", participant_id="a")
            await a.start()
            await a.wait()
            async with aiocoord.leader_latch(cb, "/ghost", participant_id="b") as b:
                node, session = a.node, ca.session_id
                assert node is not None
                proxy.reject_new()
                proxy.cut()
                await conn.wait_for(ConnectionState.SUSPENDED)
                await a.aclose()  # the delete cannot reach the server in time
                assert "could not delete" in caplog.text
                assert await cb.client.exists(node) is not None  # a ghost, for now
                assert not b.has_leadership

                proxy.reject_new(False)  # the outage ends well inside the session
                await conn.wait_for(ConnectionState.RECONNECTED)
                with anyio.fail_after(5):
                    await b.wait()
                assert ca.session_id == session  # the same session: its node did not expire
                assert await cb.client.exists(node) is None
                assert ConnectionState.LOST not in conn.states


@pytest.mark.anyio
async def test_the_background_delete_ends_with_the_coordinator(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=10
        ) as cb:
            async with (
                aiocoord.connect(
                    proxy.connect_string,
                    namespace=zk_chroot,
                    session_timeout=10,
                    request_timeout=0.5,
                ) as ca,
                recording(ca) as conn,
            ):
                a = LeaderLatch(ca, "/ghost", participant_id="a")
                await a.start()
                node = a.node
                assert node is not None
                proxy.reject_new()
                proxy.cut()
                await conn.wait_for(ConnectionState.SUSPENDED)
                await a.aclose()
                with anyio.fail_after(5):  # the delete still waiting does not hold up the close
                    await ca.aclose()
            # Closed without reaching the server: the node goes with the session.
            assert await cb.client.exists(node) is not None
            assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
            proxy.reject_new(False)


def _chores() -> list[str]:
    return [t.get_name() for t in aiocoord_tasks() if "ghost: delete" in t.get_name()]


@pytest.mark.anyio
async def test_the_background_delete_ends_with_the_session(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(
                proxy.connect_string,
                namespace=zk_chroot,
                session_timeout=4,
                session_lost_fraction=0.3,
                request_timeout=0.3,
            ) as ca,
            recording(ca) as conn,
        ):
            a = LeaderLatch(ca, "/ghost", participant_id="a")
            await a.start()
            proxy.reject_new()
            proxy.cut()
            await conn.wait_for(ConnectionState.SUSPENDED)
            await a.aclose()
            assert _chores() != []  # waiting for the connection
            await conn.wait_for(ConnectionState.LOST)
            proxy.reject_new(False)
            back = await conn.wait_for(ConnectionState.RECONNECTED)
            assert back.new_session
            await eventually(lambda: _true(_chores() == []), timeout=5)


async def _true(value: bool) -> bool:
    return value
