"""A server on the port that is not ZooKeeper (an HTTP server, say): said at the first attempt.

It is no ZooKeeper server that is down: it is not retried, and when it is the
only host `connect()` fails at once, saying what answered.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest

import aiocoord
from aiocoord import ConnectionLostError
from aiocoord.testing import ZooKeeperServer

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def http_server() -> AsyncIterator[tuple[int, list[int]]]:
    """An HTTP server on a free loopback port: its port and how many connections it took."""
    accepted: list[int] = []

    async def serve(stream: anyio.abc.SocketStream) -> None:
        accepted.append(1)
        async with stream:
            try:
                await stream.receive()
                await stream.send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield port, accepted
        tg.cancel_scope.cancel()


async def test_an_http_server_is_named_at_the_first_attempt_and_not_retried() -> None:
    """It took 15 s of retries to say ``ProtocolError('a packet length of 1213486160')``."""
    async with http_server() as (port, accepted):
        started = time.monotonic()
        with anyio.fail_after(10), pytest.raises(ConnectionLostError) as info:
            async with aiocoord.connect(f"127.0.0.1:{port}", connect_timeout=15.0):
                pass
        assert time.monotonic() - started < 3.0
        assert "does not speak ZooKeeper" in str(info.value), info.value
        assert "HTTP" in str(info.value)
        assert len(accepted) == 1


async def test_with_another_host_the_one_that_is_not_zookeeper_is_left_out(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    async with http_server() as (port, accepted):
        hosts = f"127.0.0.1:{port},{zk_server.connect_string}"
        with anyio.fail_after(15):
            async with aiocoord.connect(hosts, namespace=zk_chroot) as coord:
                for _ in range(3):  # dropped connections: the next host is the real one
                    conn = coord.client._session.connection
                    assert conn is not None
                    await conn.abort("dropped by the test")
                    await coord.wait_connected()
                assert coord.connected_address == zk_server.address
        assert len(accepted) <= 1
