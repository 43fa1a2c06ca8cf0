"""Revocation on real servers: ``__REVOKE__`` ends a revocable holder's block, others ignore it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest

import aiocoord
from aiocoord import Coordinator, LockLost, Mutex, ReadWriteLock, mutex, revoke
from aiocoord.recipes.mutex import Mutex as _Mutex
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


class Holder:
    """An ``async with`` block on `lock` in a task of its own, until revoked or told to leave."""

    def __init__(self, lock: _Mutex) -> None:
        self.lock = lock
        self.entered = anyio.Event()
        self.left = anyio.Event()
        self.error: BaseException | None = None
        self.cancelled_inside = False
        self._leave = anyio.Event()

    async def run(self) -> None:
        try:
            async with self.lock:
                self.entered.set()
                try:
                    await self._leave.wait()
                except anyio.get_cancelled_exc_class():
                    self.cancelled_inside = True
                    raise
        except LockLost as exc:
            self.error = exc
        finally:
            self.left.set()

    async def leave(self) -> None:
        self._leave.set()
        await self.left.wait()


async def test_bad_arguments_are_refused_by_name() -> None:
    coord = aiocoord.connect("127.0.0.1:1")
    with pytest.raises(TypeError, match="revocable"):
        Mutex(coord, "/l", revocable="yes")  # type: ignore[arg-type]
    with pytest.raises(aiocoord.InvalidPathError):
        await revoke(coord, "no-slash")
    with pytest.raises(TypeError, match="coord"):
        await revoke("127.0.0.1:2181", "/l")  # type: ignore[arg-type]


async def test_a_revocable_holder_is_cancelled_and_the_next_takes_over(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/revoke/mutex"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 2) as (ca, cb),
            anyio.create_task_group() as tg,
        ):
            assert await revoke(ca, path) == []  # a free lock: nothing to write
            a = Holder(mutex(ca, path, participant_id="a", revocable=True))
            tg.start_soon(a.run)
            await a.entered.wait()
            b = Holder(mutex(cb, path, participant_id="b", revocable=True))
            tg.start_soon(b.run)
            written = await revoke(cb, path)
            assert len(written) == 1 and written[0].startswith(f"{path}/_c_")
            await a.left.wait()
            assert a.cancelled_inside
            assert isinstance(a.error, LockLost) and a.error.reason == "revoked"
            await b.entered.wait()
            # Revoking one node by its path, as Curator's Revoker does.
            (node,) = [p.node for p in await Mutex(ca, path).participants()]
            assert await revoke(ca, f"{path}/{node}") == [f"{path}/{node}"]
            await b.left.wait()
            assert isinstance(b.error, LockLost) and b.error.reason == "revoked"
            assert await Mutex(ca, path).participants() == []


async def test_a_holder_that_is_not_revocable_ignores_it(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/revoke/ignored"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 1) as (coord,),
            anyio.create_task_group() as tg,
        ):
            holder = Holder(mutex(coord, path, participant_id="a"))
            tg.start_soon(holder.run)
            await holder.entered.wait()
            assert len(await revoke(coord, path)) == 1
            await anyio.sleep(0.3)
            assert not holder.left.is_set() and holder.lock.is_held
            await holder.leave()
            assert holder.error is None


async def test_another_write_is_not_a_revocation_and_the_watch_stays(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/revoke/other"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 1) as (coord,),
            anyio.create_task_group() as tg,
        ):
            holder = Holder(mutex(coord, path, participant_id="a", revocable=True))
            tg.start_soon(holder.run)
            await holder.entered.wait()
            node = holder.lock.node
            assert node is not None
            await coord.client.set(node, b"something else")
            await anyio.sleep(0.3)
            assert not holder.left.is_set()
            await coord.client.set(node, b"__REVOKE__")
            await holder.left.wait()
            assert isinstance(holder.error, LockLost) and holder.error.reason == "revoked"


async def test_revoking_a_read_write_lock_revokes_every_holder(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    path = "/revoke/rw"
    with anyio.fail_after(30):
        async with (
            sessions(zk_server.connect_string, zk_chroot, 3) as (c1, c2, c3),
            anyio.create_task_group() as tg,
        ):
            readers = [
                Holder(ReadWriteLock(c, path, participant_id=n, revocable=True).read())
                for c, n in ((c1, "r1"), (c2, "r2"))
            ]
            for r in readers:
                tg.start_soon(r.run)
                await r.entered.wait()
            writer = Holder(ReadWriteLock(c3, path, participant_id="w").write())
            tg.start_soon(writer.run)

            async def queued() -> bool:
                return len(await ReadWriteLock(c1, path).participants()) == 3

            await eventually(queued, timeout=10, every=0.02)
            written = await revoke(c3, path)
            assert len(written) == 2 and all("__READ__" in w for w in written)
            for r in readers:
                await r.left.wait()
                assert isinstance(r.error, LockLost) and r.error.reason == "revoked"
            await writer.entered.wait()
            await writer.leave()


def test_the_command_revokes_the_holder(zk_server: ZooKeeperServer) -> None:
    async def scenario() -> None:
        async with (
            aiocoord.connect(zk_server.connect_string) as coord,
            anyio.create_task_group() as tg,
        ):
            holder = Holder(mutex(coord, "/revoke/cli", participant_id="a", revocable=True))
            tg.start_soon(holder.run)
            await holder.entered.wait()
            args = ["lock", "revoke", "/revoke/cli", "--hosts", zk_server.connect_string]
            done = await anyio.to_thread.run_sync(command, args)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("revoke requested: /revoke/cli/_c_")
            with anyio.fail_after(10):
                await holder.left.wait()
            assert isinstance(holder.error, LockLost) and holder.error.reason == "revoked"
            done = await anyio.to_thread.run_sync(command, [*args, "--json"])
            assert done.returncode == 0 and '"revoked": []' in done.stdout

    anyio.run(scenario)


def command(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aiocoord", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
