"""``aiocoord inspect`` on the semaphore and the read/write lock: who holds, who waits on what."""

from __future__ import annotations

import anyio
import pytest

import aiocoord
from aiocoord import ReadWriteLock, Semaphore
from aiocoord.cli.inspect import render
from aiocoord.inspection import inspect_path
from aiocoord.recipes.mutex import is_read_write_lock, is_semaphore
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


def test_layouts_are_told_apart() -> None:
    assert is_read_write_lock(["_c_0f-__READ__0000000001", "x__WRIT__0000000002"])
    assert not is_read_write_lock([]) and not is_read_write_lock(["_c_0f-lock-0000000001"])
    assert is_semaphore(["leases", "locks"]) and is_semaphore(["leases"])
    assert not is_semaphore(["locks"]) and not is_semaphore(["leases", "other"])


async def test_inspect_shows_holders_and_waiters(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = zk_server.connect_string
    with anyio.fail_after(30):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot) as c1,
            aiocoord.connect(hosts, namespace=zk_chroot) as c2,
            anyio.create_task_group() as tg,
        ):
            lease = await Semaphore(c1, "/app/sem", max_leases=1, participant_id="p1").acquire()
            assert lease is not None
            tg.start_soon(Semaphore(c2, "/app/sem", max_leases=1, participant_id="p2").acquire)
            reader = ReadWriteLock(c1, "/app/rw", participant_id="r1").read_lock()
            assert await reader.acquire(timeout=5)
            tg.start_soon(ReadWriteLock(c2, "/app/rw", participant_id="w1").write_lock().acquire)

            async def all_queued() -> bool:
                info = await inspect_path(c1, "/app")
                kinds = {c["path"]: c for c in info["children"]}
                sem, rw = kinds["/app/sem"], kinds["/app/rw"]
                return len(sem.get("waiting", [])) == 1 and len(rw.get("contenders", [])) == 2

            await eventually(all_queued, timeout=10)
            info = await inspect_path(c1, "/app")
            sem, rw = sorted(info["children"], key=lambda c: c["path"])[::-1]
            assert sem["kind"] == "semaphore" and rw["kind"] == "read_write_lock"
            assert [c["id"] for c in sem["waiting"]] == ["p2"]
            assert [(c["id"], c["mode"], c["holds"]) for c in rw["contenders"]] == [
                ("r1", "read", True),
                ("w1", "write", False),
            ]
            text = "\n".join(render(info))
            assert (
                "[semaphore] 2 lease nodes, 1 waiting" in text
                or "[semaphore] 1 lease nodes, 1 waiting" in text
            )
            assert "[read/write lock] held for read by 1, 1 waiting" in text
            assert "waits write" in text
            tg.cancel_scope.cancel()
