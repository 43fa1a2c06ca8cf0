"""The read/write lock on real servers: readers share, a writer is exclusive, queue order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import (
    ConfigError,
    Coordinator,
    InvalidPathError,
    LockLost,
    ReadLock,
    ReadWriteLock,
    WriteLock,
)
from aiocoord.testing import ZooKeeperServer, expire_session
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def test_bad_arguments_are_refused_by_name() -> None:
    coord = aiocoord.connect("127.0.0.1:1")
    for path in ("relative", "/", "/zookeeper/x"):
        with pytest.raises(InvalidPathError):
            ReadWriteLock(coord, path)
    with pytest.raises(ConfigError, match="participant_id"):
        ReadWriteLock(coord, "/rw", participant_id="")
    with pytest.raises(ConfigError, match="timeout"):
        ReadWriteLock(coord, "/rw", timeout=-1)
    with pytest.raises(TypeError, match="coord"):
        ReadWriteLock(None, "/rw")  # type: ignore[arg-type]
    rw = ReadWriteLock(coord, "/rw", participant_id="p")
    assert isinstance(rw.read(), ReadLock) and isinstance(rw.write_lock(), WriteLock)
    assert rw.read() is not rw.read()
    assert repr(rw.read_lock()) == "<ReadLock /rw id=p FREE>"


@asynccontextmanager
async def sessions(
    hosts: str, chroot: str, n: int, **settings: Any
) -> AsyncIterator[list[Coordinator]]:
    settings.setdefault("session_timeout", 4.0)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(aiocoord.connect(hosts, namespace=chroot, **settings))
            for _ in range(n)
        ]


async def queued(rw: ReadWriteLock, count: int) -> None:
    async def check() -> bool:
        return len(await rw.participants()) == count

    await eventually(check, timeout=10, every=0.02)


async def test_readers_share_a_writer_waits_and_a_reader_behind_it_waits_for_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/rw/order"
    order: list[str] = []
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 4) as (c1, c2, c3, c4),
            anyio.create_task_group() as tg,
        ):
            r1 = ReadWriteLock(c1, path, participant_id="r1").read_lock()
            r2 = ReadWriteLock(c2, path, participant_id="r2").read_lock()
            assert await r1.acquire(timeout=5) and await r2.acquire(timeout=5)  # readers share
            assert r1.is_held and r2.is_held and r2.token is not None and r1.token is not None

            async def take(rw: ReadWriteLock, write: bool, name: str) -> None:
                async with rw.write() if write else rw.read() as held:
                    assert held.is_held
                    order.append(name)

            observer = ReadWriteLock(c1, path)
            tg.start_soon(take, ReadWriteLock(c3, path, participant_id="w"), True, "w")
            await queued(observer, 3)
            tg.start_soon(take, ReadWriteLock(c4, path, participant_id="r3"), False, "r3")
            await queued(observer, 4)
            queue = await observer.participants()
            assert [(p.id, p.holds) for p in queue] == [
                ("r1", True),
                ("r2", True),
                ("w", False),
                ("r3", False),  # behind a writer: waits for it
            ]
            assert "__READ__" in queue[0].node and "__WRIT__" in queue[2].node
            await r1.release()
            await anyio.sleep(0.2)
            assert order == []  # the writer waits for every reader ahead
            await r2.release()
        assert order == ["w", "r3"]


async def test_not_reentrant_an_error_not_a_deadlock(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with sessions(zk_server.connect_string, zk_chroot, 1) as (coord,):
            rw = ReadWriteLock(coord, "/rw/again", participant_id="p")
            async with rw.read():
                with pytest.raises(RuntimeError, match="not reentrant"):
                    async with rw.write():
                        pass
                with pytest.raises(RuntimeError, match="not reentrant"):
                    await rw.read_lock().acquire()
            async with rw.write() as held:
                assert held.token is not None
            assert await rw.participants() == []


async def test_a_lost_session_cancels_the_readers_body_then_lock_lost(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    errors: list[BaseException] = []
    entered, left = anyio.Event(), anyio.Event()

    async def read(rw: ReadWriteLock) -> None:
        try:
            async with rw.read():
                entered.set()
                await anyio.sleep_forever()
        except LockLost as exc:
            errors.append(exc)
        finally:
            left.set()

    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(read, ReadWriteLock(ca, "/rw/lost", participant_id="a"))
            await entered.wait()
            await expire_session(ca)
            writer = ReadWriteLock(cb, "/rw/lost").write_lock()
            assert await writer.acquire(timeout=15)  # the reader's node went with its session
            await writer.release()
            await left.wait()
            assert isinstance(errors[0], LockLost) and errors[0].path == "/rw/lost"
