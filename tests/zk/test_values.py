"""`shared_count` and `atomic_long` against a real server: Curator's encodings, CAS, corrupt data."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, NodeDataError, NoNodeError, atomic_long, shared_count
from aiocoord.testing import FaultProxy, ZooKeeperServer
from tests.helpers import eventually

pytestmark = pytest.mark.anyio


async def at_version(count: aiocoord.SharedCount, test: Callable[[int], bool]) -> bool:
    return test(count.version)


async def test_shared_count_is_curators_four_bytes(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with shared_count(coordinator, "/c/epoch", initial=7) as count:
            assert (await client.get("/c/epoch")).data == b"\x00\x00\x00\x07"
            assert count.value == 7 and count.version == 0
            assert await count.try_set(9, version=0)
            assert count.value == 9 and count.version == 1  # our own write, seen at once
            assert not await count.try_set(10, version=0)
            assert count.value == 9
            assert await count.add(-20) == -11
            assert (await client.get("/c/epoch")).data == (-11).to_bytes(4, "big", signed=True)
            with pytest.raises(ConfigError, match="delta"):
                await count.add(1 << 32)
        # An existing node keeps its value: `initial` is only for a missing one.
        async with shared_count(coordinator, "/c/epoch", initial=0) as count:
            assert count.value == -11


async def test_shared_count_follows_other_writers(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with (
            aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other,
            shared_count(coordinator, "/c/n") as count,
            shared_count(other, "/c/n") as theirs,
        ):
            changes = count.changes()
            await theirs.add(5)
            assert await anext(changes) == 5
            # Corrupt data: that item only; the stream goes on.
            await other.client.set("/c/n", b"junk!")
            await other.client.set("/c/n", b"\x00\x00\x00\x06")
            assert await anext(changes) == 6
            await other.client.set("/c/n", b"junk!")
            await eventually(lambda: at_version(count, lambda v: v >= 4))
            with pytest.raises(NodeDataError) as caught:
                count.value  # noqa: B018
            assert caught.value.path == "/c/n"
            assert "NodeDataError" in repr(count)
            with pytest.raises(NodeDataError):
                await count.add(1)
            await other.client.delete("/c/n")
            await eventually(lambda: at_version(count, lambda v: v < 0))
            with pytest.raises(NoNodeError):
                count.value  # noqa: B018
            with pytest.raises(NoNodeError):
                await count.add(1)
            # Made again: an add that loses to the new node adds to it, though the cache
            # may not show the new node's last version yet.  (Until a cache has seen the
            # node at all, its `add` says it is gone: waited for here.)
            await other.client.create("/c/n", b"\x00\x00\x00\x07")
            await eventually(lambda: at_version(count, lambda v: v >= 0))
            await eventually(lambda: at_version(theirs, lambda v: v >= 0))
            await theirs.add(1)
            assert await count.add(1) == 9


async def test_concurrent_adds_lose_nothing(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(60):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as other:
            async with shared_count(coordinator, "/c/s") as a, shared_count(other, "/c/s") as b:
                longs = [atomic_long(coordinator, "/c/l"), atomic_long(other, "/c/l")]

                async def bump(count: aiocoord.SharedCount, counter: aiocoord.AtomicLong) -> None:
                    for _ in range(50):
                        await count.add(1)
                        await counter.increment()

                async with anyio.create_task_group() as tg:
                    for count, counter in ((a, longs[0]), (b, longs[1]), (a, longs[1])):
                        tg.start_soon(bump, count, counter)
                node = await coordinator.client.get("/c/s")
                assert int.from_bytes(node.data, "big") == 150
                assert await longs[0].get() == 150
                assert (await coordinator.client.get("/c/l")).data == (150).to_bytes(8, "big")


async def test_atomic_long(coordinator: aiocoord.Coordinator) -> None:
    client = coordinator.client
    with anyio.fail_after(20):
        async with atomic_long(coordinator, "/a/x") as counter:
            assert await counter.get() == 0  # missing is 0
            assert await counter.decrement() == -1
            assert (await client.get("/a/x")).data == b"\xff" * 8
            assert not await counter.try_set(5, 6)
            assert await counter.try_set(-1, 1 << 40)
            assert await counter.get() == 1 << 40
            await counter.set(3)
            assert await counter.add(4) == 7
            await client.create("/a/empty", b"")
            assert await atomic_long(coordinator, "/a/empty").increment() == 1
            await client.create("/a/bad", b"abc")
            with pytest.raises(NodeDataError, match="/a/bad"):
                await atomic_long(coordinator, "/a/bad").increment()
            assert "retries=0" in repr(counter)


async def test_bad_arguments_name_themselves(coordinator: aiocoord.Coordinator) -> None:
    with pytest.raises(TypeError, match="initial"):
        shared_count(coordinator, "/x", initial="1")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="initial"):
        shared_count(coordinator, "/x", initial=1 << 40)
    with pytest.raises(TypeError, match="coord"):
        atomic_long(None, "/x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="delta"):
        await atomic_long(coordinator, "/x").add(1.5)  # type: ignore[arg-type]


async def test_shared_count_retries_on_what_its_watch_read_while_it_waited(
    coordinator: aiocoord.Coordinator, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """A lost `add` retries on the newest count it knows, not on what beat it a backoff ago.

    Retrying on the value the lost attempt read, when the watch has read a newer one
    during the backoff, loses again for certain (one more fsynced write for nothing).
    """
    with anyio.fail_after(20), FaultProxy(*zk_server.address) as proxy:
        async with (
            aiocoord.connect(proxy.connect_string, namespace=zk_chroot) as held,
            shared_count(held, "/c/r") as mine,
            shared_count(coordinator, "/c/r") as theirs,
        ):
            waits: list[int] = []

            class Meanwhile:
                """The backoff's wait, in which another writer wins again."""

                async def failed(self, *, first: float | None = None) -> None:
                    waits.append(mine.version)
                    if len(waits) == 1:
                        await theirs.add(10)
                        await eventually(lambda: at_version(mine, lambda v: v >= 2))

                def ease(self) -> None:
                    pass

            mine._backoff = Meanwhile()  # type: ignore[assignment]
            # Written behind the count's back while its connection is held: its watch
            # cannot read the change before `add` takes the version it writes at, so
            # the first attempt below is stale, however the machine is loaded.
            proxy.pause()
            await coordinator.client.set("/c/r", (1).to_bytes(4, "big"))
            assert mine.version == 0
            added: list[int] = []

            async def add() -> None:
                added.append(await mine.add(100))

            async with anyio.create_task_group() as tg:
                tg.start_soon(add)
                await anyio.sleep(0.1)  # `add` has read its version and sent its write
                proxy.resume()
            assert added == [111]
            assert mine.retries == 1, waits  # once, not twice: the retry used version 2
            assert (await coordinator.client.get("/c/r")).data == (111).to_bytes(4, "big")
