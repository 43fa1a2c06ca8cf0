"""A reply over the packet limit fails its request only: the connection and the session stay.

Against a real server with a small `max_packet`: a folder whose listing is
longer than the limit, and a node whose data is, fail with
`ReplyTooLargeError` naming the path and the size, at once, without a
SUSPENDED (the Java client drops the connection instead, and a retried
listing drops it again, for ever), and the next requests on the same
connection are answered.
"""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, ConnectionState, ReplyTooLargeError
from aiocoord.testing import ZooKeeperServer
from tests.helpers import recording

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LIMIT = 4096


async def test_an_oversized_reply_fails_only_its_request(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, max_packet=LIMIT
        ) as coord:
            client = coord.client
            await client.create("/big", b"")
            names = [f"child-{i:04d}-{'x' * 40}" for i in range(200)]  # about 11 KB listed
            async with anyio.create_task_group() as tg:
                for name in names:
                    tg.start_soon(client.create, f"/big/{name}", b"")
            await client.create("/blob", b"y" * 300_000)  # spans many reads of the socket
            await client.create("/small", b"ok")
            async with recording(coord) as events:
                mark = events.mark()
                session = coord.session_id
                for _attempt in range(3):  # never a loop of reconnects: each try fails alike
                    with anyio.fail_after(5):
                        with pytest.raises(ReplyTooLargeError) as caught:
                            await client.children("/big")
                    error = caught.value
                    assert error.path == "/big"
                    assert error.size > LIMIT and error.limit == LIMIT
                    assert "/big" in str(error) and str(error.size) in str(error)
                with pytest.raises(ReplyTooLargeError) as caught:
                    await client.children_watch("/big")
                assert caught.value.path == "/big"
                with pytest.raises(ReplyTooLargeError) as caught:
                    await client.get("/blob")
                assert caught.value.path == "/blob" and caught.value.size > 300_000
                # Pipelined behind the oversized reply: answered on the same connection.
                async with anyio.create_task_group() as tg:
                    results: list[object] = []

                    async def too_big() -> None:
                        with pytest.raises(ReplyTooLargeError):
                            await client.get("/blob")
                        results.append("refused")

                    async def small() -> None:
                        node = await client.get("/small")
                        results.append(node.data)

                    tg.start_soon(too_big)
                    tg.start_soon(small)
                assert sorted(map(str, results)) == ["b'ok'", "refused"]
                stat = await client.exists("/big")
                assert stat is not None and stat.num_children == len(names)
                assert coord.session_id == session
                assert coord.state is ConnectionState.CONNECTED
                assert events.states[mark:] == []  # no SUSPENDED: the connection was kept


def test_max_packet_is_a_checked_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOCOORD_MAX_PACKET", "65536")
    assert aiocoord.Settings().max_packet == 65536
    with pytest.raises(ConfigError, match="max_packet"):
        aiocoord.Settings(max_packet=100)
    monkeypatch.delenv("AIOCOORD_MAX_PACKET")
    assert aiocoord.Settings().max_packet > 0xFFFFF  # jute.maxbuffer's 1 MiB, headers on top
