"""The same service on ``aiocoord.blocking``, run beside the kazoo one on the same paths.

`examples/kazoo_service.py` is the service as it runs on kazoo today.  This
is its port: the same worker threads, the same lock and ledger, written with
``aiocoord.blocking`` (no event loop in the service's code).  The lock is
taken with ``layout="kazoo"``, so aiocoord's nodes are kazoo's
(``<uuid hex>__lock__<seq>``) and the two kinds of process queue for one lock
while the fleet moves over one process at a time.

To show it, this program runs three kazoo threads (the old service's code,
imported from `kazoo_service`) and three aiocoord threads side by side, then
checks on one clock that no two held the lock at once, and that every line
reached the ledger.

    python examples/kazoo_port.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper (needs kazoo)
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from pathlib import Path

from kazoo.client import KazooClient

import aiocoord
from aiocoord import blocking
from aiocoord.cli import local_zookeeper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kazoo_service import LEDGER, LOCK, kazoo_hosts, kazoo_worker

ROUNDS = 5


def aiocoord_worker(
    coord: blocking.BlockingCoordinator,
    name: str,
    rounds: int,
    held: list[tuple[str, float, float]],
) -> None:
    """The port of `kazoo_worker`: the same lock (kazoo's layout) and the same ledger."""
    client = coord.coordinator.client
    for n in range(rounds):
        with coord.mutex(LOCK, participant_id=name, layout="kazoo", timeout=30.0) as lock:
            start = time.monotonic()
            node = coord.run(client.get, LEDGER)
            lock.check()  # still ours: a lock lost since would raise LockLost here
            line = f"{name} {n} token=0x{lock.token:x}\n".encode()
            coord.run(client.set, LEDGER, node.data + line, version=node.stat.version)
            time.sleep(0.01)  # the work done under the lock
            held.append((name, start, time.monotonic()))


def overlaps(held: list[tuple[str, float, float]]) -> int:
    """How many holds began before the one before them ended (on one clock)."""
    spans = sorted(held, key=lambda h: h[1])
    return sum(1 for a, b in itertools.pairwise(spans) if b[1] < a[2])


def main(settings: aiocoord.Settings) -> None:
    zk = KazooClient(hosts=kazoo_hosts(settings))
    zk.start(timeout=15)
    try:
        zk.ensure_path(LEDGER)
        with blocking.connect(settings) as coord:
            held: list[tuple[str, float, float]] = []
            threads = [
                threading.Thread(target=kazoo_worker, args=(zk, f"kazoo-{i}", ROUNDS, held))
                for i in range(3)
            ] + [
                threading.Thread(
                    target=aiocoord_worker, args=(coord, f"aiocoord-{i}", ROUNDS, held)
                )
                for i in range(3)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        lines = zk.get(LEDGER)[0].decode().splitlines()
        kinds = sorted({name.split("-")[0] for name, _, _ in held})
        print(f"holders: {kinds}; holds: {len(held)}; ledger lines: {len(lines)}")
        print(f"two holders at once: {overlaps(held)}")
        if overlaps(held) or len(lines) != len(held):
            raise SystemExit("the kazoo and aiocoord workers did not exclude each other")
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    with local_zookeeper() as settings:
        main(settings)
