"""Mixed fleets, for real: kazoo's ``ReadLock``/``WriteLock`` and ``ReadWriteLock(layout="kazoo")``.

kazoo 2.x readers and writers (threads, each with its own ``KazooClient``)
and aiocoord readers and writers (each with its own session) share one path:
no reader holds beside a writer, no two writers at once; a kazoo reader and
an aiocoord reader hold together, and a writer of either kind waits for both.  Then the aiocoord side's connection is cut while a
kazoo writer holds, and its reader still waits for that writer.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aiocoord import ConnectionState, ReadWriteLock
from aiocoord.testing import FaultProxy, ZooKeeperServer
from tests.helpers import eventually, recording
from tests.zk._kazoo_fleet import coordinator, kazoo_client

pytestmark = pytest.mark.anyio

N = 20  # holds per contender
HOLD = 0.003


@pytest.fixture(scope="module")
def anyio_backend() -> Any:
    return ("asyncio", {"use_uvloop": False})


class Inside:
    """Readers and writers inside now, from any thread; what was wrong, and the most readers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.readers: set[str] = set()
        self.writers: set[str] = set()
        self.wrong: list[str] = []
        self.most_readers = 0
        self.mixed_readers = False  # a kazoo and an aiocoord reader held at once
        self.holds = 0

    def enter(self, who: str, write: bool) -> None:
        with self._lock:
            self.holds += 1
            if self.writers or (write and self.readers):
                self.wrong.append(f"{who} beside {sorted(self.readers | self.writers)}")
            (self.writers if write else self.readers).add(who)
            self.most_readers = max(self.most_readers, len(self.readers))
            kinds = {r.split("-", 1)[0] for r in self.readers}
            self.mixed_readers |= len(kinds) == 2

    def leave(self, who: str, write: bool) -> None:
        with self._lock:
            (self.writers if write else self.readers).discard(who)


def kazoo_contender(hosts: str, path: str, name: str, write: bool, inside: Inside) -> None:
    with kazoo_client(hosts) as zk:
        lock = zk.WriteLock(path, name) if write else zk.ReadLock(path, name)
        for _ in range(N):
            assert lock.acquire(timeout=30), f"{name} timed out"
            try:
                inside.enter(name, write)
                time.sleep(HOLD * (1 if write else 4))
                inside.leave(name, write)
            finally:
                lock.release()


async def aiocoord_contender(hosts: str, path: str, name: str, write: bool, inside: Inside) -> None:
    async with coordinator(hosts) as coord:
        rw = ReadWriteLock(coord, path, participant_id=name, layout="kazoo", timeout=30)
        for _ in range(N):
            async with rw.write() if write else rw.read():
                inside.enter(name, write)
                await anyio.sleep(HOLD * (1 if write else 4))
                inside.leave(name, write)


async def test_no_reader_beside_a_writer_across_kazoo_and_aiocoord(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/rw"
    hosts = zk_server.connect_string
    inside = Inside()
    roles = [("reader-0", False), ("reader-1", False), ("writer-0", True)]
    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            for role, write in roles:
                tg.start_soon(
                    anyio.to_thread.run_sync,
                    kazoo_contender,
                    hosts,
                    path,
                    f"kazoo-{role}",
                    write,
                    inside,
                )
                tg.start_soon(aiocoord_contender, hosts, path, f"aiocoord-{role}", write, inside)
    assert inside.holds == 6 * N
    assert inside.wrong == []


async def test_readers_of_both_kinds_share_and_writers_of_both_wait_for_them(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/share"
    hosts = zk_server.connect_string
    with anyio.fail_after(30), kazoo_client(hosts) as zk:
        kazoo_read = zk.ReadLock(path, "kazoo-r")
        assert kazoo_read.acquire(timeout=10)
        async with coordinator(hosts) as coord, coordinator(hosts) as other:
            rw = ReadWriteLock(coord, path, participant_id="aiocoord-r", layout="kazoo")
            writers = ReadWriteLock(other, path, participant_id="aiocoord-w", layout="kazoo")
            ours = rw.read_lock()
            assert await ours.acquire(timeout=10)  # beside kazoo's reader
            assert not await writers.write_lock().acquire(timeout=0)
            kazoo_write = zk.WriteLock(path, "kazoo-w")
            assert not await anyio.to_thread.run_sync(lambda: kazoo_write.acquire(blocking=False))
            await anyio.to_thread.run_sync(kazoo_read.release)
            assert not await anyio.to_thread.run_sync(lambda: kazoo_write.acquire(blocking=False))
            await ours.release()
            assert await anyio.to_thread.run_sync(lambda: kazoo_write.acquire(timeout=10))
            assert not await rw.read_lock().acquire(timeout=0)
            await anyio.to_thread.run_sync(kazoo_write.release)


async def test_a_cut_connection_keeps_our_reader_behind_a_kazoo_writer(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = f"{zk_chroot}/cut"
    granted_at: list[float] = []
    with anyio.fail_after(60), kazoo_client(zk_server.connect_string) as zk:
        writer = zk.WriteLock(path, "kazoo-writer")
        assert writer.acquire(timeout=10)
        with FaultProxy(*zk_server.address) as proxy:
            async with (
                coordinator(proxy.connect_string, session_timeout=8) as coord,
                anyio.create_task_group() as tg,
            ):
                read = ReadWriteLock(coord, path, participant_id="aiocoord-r", layout="kazoo")
                lock = read.read_lock()

                async def wait() -> None:
                    assert await lock.acquire(timeout=40)
                    granted_at.append(time.monotonic())
                    await lock.release()

                tg.start_soon(wait)

                async def queued() -> bool:
                    return len(await anyio.to_thread.run_sync(writer.contenders)) == 2

                await eventually(queued)
                async with recording(coord) as conn:
                    assert proxy.cut() >= 1
                    back = await conn.wait_for(ConnectionState.RECONNECTED, timeout=20)
                assert not back.new_session
                assert not granted_at
                assert [(p.id, p.holds) for p in await read.participants()] == [
                    ("kazoo-writer", True),
                    ("aiocoord-r", False),
                ]
                released = time.monotonic()
                await anyio.to_thread.run_sync(writer.release)
        assert granted_at and granted_at[0] > released
