"""The leader hand-off, stage by stage, in microseconds, against the machine's floor.

The next-in-line hand-off of `latch` (N latches, a session each, joined in
order on one path; the leader leaves, the second's ``wait()`` returns), with
each stage timestamped by ``time.perf_counter_ns`` in this process:

    release              the leader's body is done: `aclose` is called (t = 0)
    delete written       the delete leaves in a write to the leader's socket
    notification read    the next one's socket delivers the bytes of the notification
    watch callback       the predecessor's watch calls the waiter (`_predecessor_gone`)
    granted              the latch has its term (`_elect` returned, `wait()` signalled)
    wait() returns       in the next leader's own task
    delete answered      the leader's connection reads the delete's reply

Nothing in the library times itself: the stages are marked by wrapping a few
of its functions, in this process only, before anything connects (a wrapper
costs about a microsecond a call, which the stages after it include).  The
floor is the same server's delete-to-notification time for a plain client
that does nothing else: the ZooKeeper Java client (one JVM, two sessions: one
deletes, the other's watcher is called; untimed rounds first for its JIT) and
aiocoord's own `ZkClient` (two sessions, the watch's callback), both apart
from the hand-offs, and `ZkClient` again on the leader's and the next one's
sessions in each round just before its hand-off, after as long idle as the
hand-off ("floor, same sessions"): on a VM the time since the last wake-up
moves the floor by more than the client's whole part (a plain delete to its
notification took 1.5 ms after 25 ms idle, 2.3 ms after 50 ms).

    python -m benchmarks.handoff_stages [--participants 10] [--rounds 40] [--uvloop]
        [--fsync] [--no-java] [--hosts HOST:PORT]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import struct
import subprocess
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import anyio

from ._java import classpath, curator_missing
from .latch_runs import SETTLE, run_async

__all__ = ("STAGES", "java_floor", "main", "python_floor", "report", "stages")

STAGES = (
    "release",
    "delete written",
    "notification read",
    "watch callback",
    "granted",
    "wait() returns",
)
ANSWERED = "delete answered"
PAIRED = "floor"  # ZkClient's delete -> notification on the same two sessions, that round
_XID = struct.Struct("!i")
_NOTIFICATION = _XID.pack(-1)

Marks = dict[str, int]


class _Marker:
    """Where the wrapped functions put this round's timestamps."""

    def __init__(self) -> None:
        self.marks: Marks = {}
        self.armed = False
        self.leader: Any = None  # the leader's coordinator
        self.next: Any = None  # the next one's

    def mark(self, stage: str) -> None:
        if self.armed and stage not in self.marks:
            self.marks[stage] = time.perf_counter_ns()


def _instrument(marker: _Marker) -> Callable[[], None]:
    """Wrap the functions the stages are read at; returns what undoes it."""
    from aiocoord.recipes._queue import Waiter
    from aiocoord.recipes.leader_latch._latch import LeaderLatch
    from aiocoord.zk._connection import Connection
    from aiocoord.zk._framing import FrameProtocol

    def connection(coord: Any) -> Any:
        return coord.client.session.connection if coord is not None else None

    write, dispatch = Connection._write, Connection._dispatch
    received, gone, elect = (
        FrameProtocol.data_received,
        Waiter._predecessor_gone,
        LeaderLatch._elect,
    )

    def _write(self: Connection, data: bytes) -> None:
        write(self, data)
        if marker.armed and self is connection(marker.leader):
            marker.mark("delete written")

    def _dispatch(self: Connection, body: bytes) -> None:
        if marker.armed and self is connection(marker.leader) and body[:4] != _NOTIFICATION:
            marker.mark(ANSWERED)
        dispatch(self, body)

    def data_received(self: FrameProtocol, data: bytes) -> None:
        if marker.armed and data[4:8] == _NOTIFICATION:
            conn = connection(marker.next)
            if conn is not None and conn._protocol is self:
                marker.mark("notification read")
        received(self, data)

    def _predecessor_gone(self: Waiter, *args: Any) -> None:
        if marker.armed and marker.next is not None and self.client is marker.next.client:
            marker.mark("watch callback")
        gone(self, *args)

    def _elect(self: LeaderLatch, node: Any) -> None:
        elect(self, node)
        if marker.armed and marker.next is not None and self._coord is marker.next:
            marker.mark("granted")

    patched = {
        (Connection, "_write"): _write,
        (Connection, "_dispatch"): _dispatch,
        (FrameProtocol, "data_received"): data_received,
        (Waiter, "_predecessor_gone"): _predecessor_gone,
        (LeaderLatch, "_elect"): _elect,
    }
    originals = {key: getattr(*key) for key in patched}
    for (owner, name), wrapper in patched.items():
        setattr(owner, name, wrapper)

    def undo() -> None:
        for (owner, name), original in originals.items():
            setattr(owner, name, original)

    return undo


def stages(hosts: str, n: int, rounds: int, uvloop: bool = False) -> list[Marks]:
    """`rounds` next-in-line hand-offs among `n` latches: each round's stage timestamps (ns)."""
    import aiocoord
    from aiocoord.recipes.leader_latch import leader_latch

    path = f"/bench-stages/{uuid.uuid4().hex[:8]}"
    marker = _Marker()

    async def main() -> list[Marks]:
        out: list[Marks] = []
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(aiocoord.connect(hosts, session_timeout=10))
                for _ in range(n)
            ]
            marker.leader, marker.next = coords[0], coords[1]
            for _ in range(rounds):
                release = [anyio.Event() for _ in range(n)]
                second = anyio.Event()

                async def participant(
                    i: int,
                    joined: anyio.Event,
                    release: list[anyio.Event] = release,
                    second: anyio.Event = second,
                ) -> None:
                    async with leader_latch(coords[i], path, participant_id=f"p{i}") as latch:
                        joined.set()
                        if i < 2:
                            await latch.wait()
                        if i == 1:
                            marker.mark("wait() returns")
                            second.set()
                        await release[i].wait()
                        if i == 0:
                            marker.marks.clear()
                            marker.armed = True
                            marker.mark("release")

                async with anyio.create_task_group() as tg:
                    for i in range(n):
                        joined = anyio.Event()
                        tg.start_soon(participant, i, joined)
                        await joined.wait()
                    floor = await _paired_floor(coords[0], coords[1], f"{path}-floor")
                    await anyio.sleep(SETTLE)
                    release[0].set()
                    await second.wait()
                    await anyio.sleep(0.01)  # the delete's reply, if it comes after
                    marker.armed = False
                    out.append({**marker.marks, PAIRED: floor})
                    for event in release:
                        event.set()
        return out

    undo = _instrument(marker)
    try:
        result: list[Marks] = run_async(main, uvloop)
    finally:
        undo()
    return result


async def _paired_floor(deleter: Any, watcher: Any, path: str) -> int:
    """The same two sessions, just before the hand-off and after as long idle (`SETTLE`):
    delete -> watch callback (ns)."""
    from aiocoord.zk import CreateMode

    node = (await deleter.client.create(path, mode=CreateMode.EPHEMERAL, make_parents=True)).path
    _, watch = await watcher.client.get_watch(node)
    fired: list[int] = []

    def seen(_event: object) -> None:
        fired.append(time.perf_counter_ns())

    watch.add_callback(seen)
    await anyio.sleep(SETTLE)
    started = time.perf_counter_ns()
    sent = deleter.client.delete_now(node)
    await sent()
    await watch.wait()
    return fired[0] - started


def python_floor(hosts: str, rounds: int, uvloop: bool = False) -> dict[str, list[float]]:
    """aiocoord's `ZkClient` alone: delete -> the other session's watch callback (µs)."""
    import aiocoord
    from aiocoord.zk import CreateMode

    path = f"/bench-stages/floor-{uuid.uuid4().hex[:8]}"

    async def main() -> dict[str, list[float]]:
        notified: list[float] = []
        answered: list[float] = []
        async with (
            aiocoord.connect(hosts, session_timeout=10) as a,
            aiocoord.connect(hosts, session_timeout=10) as b,
        ):
            await a.client.create(path, make_parents=True)
            for _ in range(rounds):
                node = (
                    await a.client.create(path + "/n-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
                ).path
                _, watch = await b.client.get_watch(node)
                fired: list[int] = []

                def seen(_event: object, fired: list[int] = fired) -> None:
                    fired.append(time.perf_counter_ns())

                watch.add_callback(seen)
                await anyio.sleep(SETTLE)
                started = time.perf_counter_ns()
                await a.client.delete(node)
                answered.append((time.perf_counter_ns() - started) / 1000)
                await watch.wait()
                notified.append((fired[0] - started) / 1000)
            await a.client.delete(path)
        return {"notification": notified, "reply": answered}

    result: dict[str, list[float]] = run_async(main, uvloop)
    return result


JAVA_FLOOR = """\
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

// Two sessions: `a` deletes a node, `b`'s watcher on it is called.  Per round: the time
// from the delete's call to the watcher (NOTIFY) and to the delete's return (REPLY), ns.
public final class ZkFloorBench {
    static ZooKeeper connect(String hosts) throws Exception {
        final CountDownLatch up = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(hosts, 10000, e -> {
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) up.countDown();
        });
        if (!up.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no session");
        return zk;
    }

    public static void main(String[] args) throws Exception {
        String hosts = args[0];
        String path = args[1];
        int warmup = Integer.parseInt(args[2]);
        int rounds = Integer.parseInt(args[3]);
        long settleMs = Long.parseLong(args[4]);
        ZooKeeper a = connect(hosts);
        ZooKeeper b = connect(hosts);
        try {
            a.create(path, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // made by an earlier run
        }
        StringBuilder notify = new StringBuilder("NOTIFY");
        StringBuilder reply = new StringBuilder("REPLY");
        for (int r = 0; r < warmup + rounds; r++) {
            String node = a.create(path + "/n-", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE,
                CreateMode.EPHEMERAL_SEQUENTIAL);
            final AtomicLong fired = new AtomicLong();
            final CountDownLatch done = new CountDownLatch(1);
            b.exists(node, e -> {
                if (e.getType() == Watcher.Event.EventType.NodeDeleted) {
                    fired.set(System.nanoTime());
                    done.countDown();
                }
            });
            Thread.sleep(settleMs);
            long started = System.nanoTime();
            a.delete(node, -1);
            long answered = System.nanoTime();
            if (!done.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("no watcher");
            if (r >= warmup) {
                notify.append(' ').append(fired.get() - started);
                reply.append(' ').append(answered - started);
            }
        }
        System.out.println(notify);
        System.out.println(reply);
        a.delete(path, -1);
        a.close();
        b.close();
    }
}
"""


def java_floor(hosts: str, rounds: int, warmup: int = 200) -> dict[str, list[float]] | str:
    """The ZooKeeper Java client alone: delete -> the other session's watcher (µs); or why not."""
    why = curator_missing()
    if why is not None:
        return f"not measured: {why}"
    path = f"/bench-stages-java-{uuid.uuid4().hex[:8]}"
    cmd = ["java", "-Xmx128m", "-cp", classpath("ZkFloorBench", JAVA_FLOOR), "ZkFloorBench"]
    cmd += [hosts, path, str(warmup), str(rounds), str(int(SETTLE * 1000))]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "timed out"
    found: dict[str, list[float]] = {}
    for line in done.stdout.splitlines():
        word, *values = line.split()
        if word in ("NOTIFY", "REPLY"):
            key = "notification" if word == "NOTIFY" else "reply"
            found[key] = [int(ns) / 1000 for ns in values]
    if len(found) == 2:
        return found
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else "the Java floor printed nothing"


# --- the table -------------------------------------------------------------------------------


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * q) - 1))]


def _cell(values: list[float]) -> str:
    if not values:
        return f"{'-':>8} {'-':>8}"
    return f"{statistics.median(values):8.0f} {_quantile(values, 0.9):8.0f}"


def report(rounds: list[Marks], floors: dict[str, dict[str, list[float]] | str]) -> list[str]:
    """The stage table: per stage, µs since the release and since the stage before it."""
    complete = [m for m in rounds if all(s in m for s in STAGES)]
    lines = [
        f"{len(complete)} of {len(rounds)} hand-offs with every stage; median and p90, µs",
        f"{'stage':<22} {'since release':>17} {'this stage':>17}",
        f"{'':<22} {'median':>8} {'p90':>8} {'median':>8} {'p90':>8}",
    ]
    for i, stage in enumerate(STAGES):
        since = [(m[stage] - m["release"]) / 1000 for m in complete]
        alone = [(m[stage] - m[STAGES[i - 1]]) / 1000 for m in complete] if i else []
        lines.append(f"{stage:<22} {_cell(since)} {_cell(alone)}")
    answered = [(m[ANSWERED] - m["release"]) / 1000 for m in complete if ANSWERED in m]
    lines.append(f"{ANSWERED:<22} {_cell(answered)}   (the leader's side)")
    if complete:
        ours = [
            (m["delete written"] - m["release"] + m["wait() returns"] - m["notification read"])
            / 1000
            for m in complete
        ]
        wire = [(m["notification read"] - m["delete written"]) / 1000 for m in complete]
        lines.append(f"{'client (ours)':<22} {_cell(ours)}   (release -> written, read -> wait())")
        lines.append(f"{'server and sockets':<22} {_cell(wire)}   (written -> notification read)")
    paired = [m[PAIRED] / 1000 for m in complete if PAIRED in m]
    lines.append(f"{'floor, same sessions':<22} {_cell(paired)}   (ZkClient delete -> callback)")
    lines.append("")
    lines.append(f"{'floor: delete ->':<22} {'notification':>17} {'delete reply':>17}")
    for name, floor in floors.items():
        if isinstance(floor, str):
            lines.append(f"{name:<22} {floor}")
        else:
            lines.append(f"{name:<22} {_cell(floor['notification'])} {_cell(floor['reply'])}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--participants", type=int, default=10, help="N latches")
    parser.add_argument("--rounds", type=int, default=40, help="hand-offs timed")
    parser.add_argument("--uvloop", action="store_true", help="on uvloop, not asyncio's loop")
    parser.add_argument("--fsync", action="store_true", help="keep the server's forceSync")
    parser.add_argument("--no-java", action="store_true", help="leave the Java floor out")
    parser.add_argument("--hosts", default=None, help="use this server instead of starting one")
    args = parser.parse_args(argv)
    if args.hosts is None:
        from aiocoord.testing import ZooKeeperServer

        config = {} if args.fsync else {"forceSync": "no"}
        with ZooKeeperServer(extra_config=config) as server:
            args.hosts = server.connect_string
            return _run(args)
    _run(args)


def _run(args: argparse.Namespace) -> None:
    loop = "uvloop" if args.uvloop else "asyncio"
    sync = "forceSync=yes" if args.fsync else "forceSync=no"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"hand-off stages: N={args.participants} latches (a session each), next in line, "
        f"{args.rounds} rounds, {loop}; one standalone ZooKeeper ({sync}); load {load}"
    )
    floors: dict[str, dict[str, list[float]] | str] = {}
    if not args.no_java:
        floors["Java client"] = java_floor(args.hosts, args.rounds)
    floors["aiocoord ZkClient"] = python_floor(args.hosts, args.rounds, args.uvloop)
    rounds = stages(args.hosts, args.participants, args.rounds, args.uvloop)
    print("\n".join(report(rounds, floors)))
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
