"""One-shot watches given up leave nothing behind, in the client or on the server (``wchc``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.testing import ZooKeeperServer, four_letter_word


def server_watches(zk_server: ZooKeeperServer, session_id: int | None) -> list[str]:
    """The paths the server watches for one session (``wchc`` lists them by session)."""
    answer = four_letter_word(*zk_server.address, "wchc")
    paths: list[str] = []
    mine = False
    for line in answer.splitlines():
        if line.startswith("0x"):
            mine = int(line, 16) == session_id
        elif mine and line.strip():
            paths.append(line.strip())
    return paths


async def settled(client: aiocoord.ZkClient) -> None:
    """Two round trips: a removal sent on the first one's answer is done by the second's."""
    await client.exists("/")
    await client.exists("/")


@pytest.mark.anyio
async def test_watch_requests_given_up_in_flight_leave_no_watch(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer
) -> None:
    client = coordinator.client
    watches = client._session.watches
    with anyio.fail_after(10):
        await client.create("/here", b"x")
        calls: list[tuple[Callable[[str], Awaitable[Any]], str]] = [
            (client.exists_watch, "/here"),
            (client.exists_watch, "/absent"),
            (client.get_watch, "/here"),
            (client.children_watch, "/here"),
        ]
        for call, path in calls:
            given_up = 0
            while not given_up:
                with anyio.CancelScope() as scope:
                    scope.cancel()  # the request is sent, then its wait cancelled
                    _, watch = await call(path)
                    # Rarely the reply completes the call before the cancellation
                    # reaches it: then it was not given up, and the watch is ours.
                    client.remove_watch(watch)
                given_up = scope.cancelled_caught
            await settled(client)
            server_path = client._session.server_path(path)
            assert not watches.watched(server_path), (call, path)
            assert server_path not in server_watches(zk_server, coordinator.session_id)


@pytest.mark.anyio
async def test_remove_watch_keeps_the_servers_watch_while_another_of_ours_needs_it(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer
) -> None:
    client = coordinator.client
    with anyio.fail_after(10):
        _, first = await client.exists_watch("/later")
        _, second = await client.exists_watch("/later")
        server_path = client._session.server_path("/later")
        client.remove_watch(first)
        await settled(client)
        assert server_path in server_watches(zk_server, coordinator.session_id)
        await client.create("/later")
        assert (await second.wait()).type is aiocoord.zk.EventType.CREATED
        assert not first.fired  # removed: it never fires

        _, third = await client.exists_watch("/later")
        client.remove_watch(third)
        await settled(client)
        assert server_path not in server_watches(zk_server, coordinator.session_id)
        await client.delete("/later")
        await settled(client)
        assert not third.fired
