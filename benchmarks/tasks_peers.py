"""The task hand-over benchmark's peers: raw round trips, kazoo with no recipe, our bare protocol.

- `round_trips`: read and write round trips, one at a time (aiocoord
  ``exists`` and ``set``);
- `kazoo_bare_hand_over`: one kazoo client deletes N ephemeral nodes one by
  one, as N independent leaders would; a second one, watching them,
  re-creates each on its deletion event: a hand-over with no recipe at all;
- `bare_hand_over`: the recipe's own protocol with nothing around it (three
  processes delete their share in one multi each, a fourth re-creates the
  nodes one multi per burst of notifications): what this server and machine
  allow at the least.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

import aiocoord
from aiocoord.zk import CreateMode

from .tasks_runs import freeze_heap, join_all

__all__ = ("bare_hand_over", "kazoo_bare_hand_over", "round_trips")


async def round_trips(hosts: str, n: int = 300) -> tuple[float, float]:
    async with aiocoord.connect(hosts, session_timeout=10.0) as coord:
        client = coord.client
        path = f"/rtt-{uuid.uuid4().hex[:8]}"
        await client.create(path, b"", mode=CreateMode.EPHEMERAL)
        reads, writes = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            await client.exists(path)
            t1 = time.perf_counter()
            await client.set(path, b"x")
            reads.append(t1 - t0)
            writes.append(time.perf_counter() - t1)
        return statistics.median(reads), statistics.median(writes)


def kazoo_bare_hand_over(hosts: str, n_tasks: int) -> list[float]:
    """Delete N ephemeral nodes one by one from one kazoo client; another re-creates each."""
    from kazoo.client import KazooClient
    from kazoo.protocol.states import EventType as KEventType

    base = f"/bench-kazoo-{uuid.uuid4().hex[:8]}"
    a = KazooClient(hosts=hosts, timeout=10.0)
    b = KazooClient(hosts=hosts, timeout=10.0)
    a.start()
    b.start()
    try:
        a.ensure_path(base)
        paths = [f"{base}/t{i}" for i in range(n_tasks)]
        for p in paths:
            a.create(p, ephemeral=True)
        deleted_at: dict[str, float] = {}
        created_at: dict[str, float] = {}
        done = threading.Event()
        lock = threading.Lock()

        def on_created(path: str) -> Callable[[Any], None]:
            def cb(_result: Any) -> None:
                with lock:
                    created_at[path] = time.monotonic()
                    if len(created_at) == len(paths):
                        done.set()

            return cb

        def watcher(event: Any) -> None:
            if event.type == KEventType.DELETED:
                b.create_async(event.path, ephemeral=True).rawlink(on_created(event.path))

        for p in paths:
            b.exists(p, watch=watcher)
        for p in paths:
            deleted_at[p] = time.monotonic()
            a.delete_async(p)
        if not done.wait(60):
            raise TimeoutError("kazoo hand-over did not finish")
        return [created_at[p] - deleted_at[p] for p in paths]
    finally:
        for c in (a, b):
            c.stop()
            c.close()


# --- the same protocol without the recipe -----------------------------------------------------


async def _bare_old(hosts: str, chroot: str, paths: list[str], go: Any, out: Any) -> None:
    """Hold `paths` as ephemerals; on `go`, delete them all in one multi (as one old worker does)."""
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord:
        client = coord.client
        await client.multi([aiocoord.zk.CreateOp(p, b"", CreateMode.EPHEMERAL) for p in paths])
        freeze_heap()
        out.put(("bare ready", paths[0], None))
        await anyio.to_thread.run_sync(go.wait)
        sent = time.monotonic()
        await client.multi([aiocoord.zk.DeleteOp(p) for p in paths])
        out.put(("bare deleted", paths[0], sent))


async def _bare_new(hosts: str, chroot: str, base: str, n: int, out: Any) -> None:
    """Create each node as its deletion is read: one multi per burst, from a loop callback."""
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=10.0) as coord:
        client = coord.client
        loop = asyncio.get_running_loop()
        created: dict[str, float] = {}
        queue: list[str] = []
        done = anyio.Event()

        def flush() -> None:
            batch = queue[:]
            queue.clear()
            sent = client.send_multi(
                [aiocoord.zk.CreateOp(p, b"", CreateMode.EPHEMERAL) for p in batch]
            )

            def on_reply(reply: Any) -> None:
                reply.result()
                now = time.monotonic()
                for path in batch:
                    created[path] = now
                if len(created) == n:
                    done.set()

            sent.add_done_callback(on_reply)

        def on_event(event: Any) -> None:
            if event.type is aiocoord.zk.EventType.DELETED:
                if not queue:
                    loop.call_soon(flush)
                queue.append(event.path)

        async with client.watch(base, recursive=True) as pw:
            pw.set_callback(on_event)
            freeze_heap()
            out.put(("bare watching", "new", None))
            with anyio.fail_after(60):
                await done.wait()
        out.put(("bare created", "new", created))


def _bare_main(role: str, *args: Any) -> None:
    """Entry point of a process of the bare hand-over."""
    main = _bare_old if role == "old" else _bare_new
    anyio.run(main, *args, backend_options={"use_uvloop": True})


def bare_hand_over(hosts: str, n_tasks: int) -> list[float]:
    """3 processes (fewer for fewer nodes) delete their share in one multi each; a 4th re-creates.

    The recipe's protocol with nothing else: no bodies, no choice, no
    settle; what a hand-over costs on this server and machine at the least.
    Gap per node: from its delete being sent to its create being answered.
    """
    ctx = multiprocessing.get_context("spawn")
    chroot = f"/bench-bare-{uuid.uuid4().hex[:8]}"
    base = "/leaders"
    paths = [f"{base}/task-{i:04d}" for i in range(n_tasks)]
    shares = [share for share in (paths[i::3] for i in range(3)) if share]
    go = ctx.Event()
    out = ctx.Queue()
    anyio.run(_ensure, hosts, chroot + base)
    olds = len(shares)
    procs = [
        ctx.Process(target=_bare_main, args=("old", hosts, chroot, share, go, out))
        for share in shares
    ]
    procs.append(ctx.Process(target=_bare_main, args=("new", hosts, chroot, base, n_tasks, out)))
    got: dict[tuple[str, str], Any] = {}

    def wait_for(kind: str, count: int) -> None:
        while sum(1 for k in got if k[0] == kind) < count:
            kind_, key, value = out.get(timeout=60)
            got[(kind_, key)] = value

    try:
        for proc in procs[:olds]:
            proc.start()
        wait_for("bare ready", olds)
        procs[olds].start()
        wait_for("bare watching", 1)
        go.set()
        wait_for("bare deleted", olds)
        wait_for("bare created", 1)
    finally:
        go.set()
        join_all(procs)
    created = got[("bare created", "new")]
    gaps = []
    for share in shares:
        sent = got[("bare deleted", share[0])]
        gaps += [created[p] - sent for p in share]
    return gaps


async def _ensure(hosts: str, path: str) -> None:
    async with aiocoord.connect(hosts, session_timeout=10.0) as coord:
        await coord.client.ensure_path(path, mode=CreateMode.PERSISTENT)
