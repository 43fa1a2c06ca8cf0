"""A connection attempt cancelled at any step leaves nothing behind for the event loop.

Cancelled between the TCP connect and the handshake's answer (a session
closed while it reconnects, or the attempt's deadline), the socket closes and
its protocol hears of the end.  The handshake's future must not then hold an
exception nobody will read: the loop reports it ("Future exception was never
retrieved"), and under pytest's anyio runner that fails whatever test is
running at the time.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import anyio
import pytest

from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import _connection
from aiocoord.zk._timing import SessionTiming

pytestmark = pytest.mark.anyio


async def test_an_attempt_cancelled_at_any_step_leaves_no_unread_exception(
    zk_server: ZooKeeperServer,
) -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    host, port = zk_server.connect_string.split(",")[0].rsplit(":", 1)
    completed = 0
    try:
        with anyio.fail_after(60):
            # Every loop step up to the TCP connect, then every 0.15 ms up to the answer.
            for steps in [*range(20), *(-3 * i for i in range(1, 60))]:
                task = asyncio.ensure_future(
                    _connection.Connection.open(
                        (host, int(port)),
                        timing=SessionTiming(10.0),
                        last_zxid=0,
                        timeout_ms=10_000,
                        session_id=0,
                        password=b"\x00" * 16,
                        read_only=False,
                        on_notification=lambda _body: None,
                        on_zxid=lambda _zxid: None,
                    )
                )
                for _ in range(steps):
                    await asyncio.sleep(0)
                if steps < 0:
                    await asyncio.sleep(-steps / 20_000)
                task.cancel()
                try:
                    connection = await task
                except asyncio.CancelledError:
                    pass
                else:
                    completed += 1
                    await connection.abort("done")
                for _ in range(5):  # the transport's connection_lost runs soon after
                    await asyncio.sleep(0)
                del task
                gc.collect()
    finally:
        loop.set_exception_handler(previous)
    assert completed, "no attempt finished: the steps never reached the handshake's answer"
    assert not reported, [c.get("message") for c in reported]
