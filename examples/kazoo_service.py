"""The kazoo service before its move: worker threads appending to a ledger under a kazoo ``Lock``.

A small threaded service as kazoo shops run them: one ``KazooClient`` per
process, a thread per worker, each taking the lock at /examples/kazoo-ledger-lock
and appending a line to the node /examples/kazoo-ledger while it holds it.
`examples/kazoo_port.py` is the same service on ``aiocoord.blocking``; run the
port with this one still running and they share the lock
(``mutex(..., layout="kazoo")``), so a fleet moves one process at a time.

    python examples/kazoo_service.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper (needs kazoo)
"""

from __future__ import annotations

import threading
import time

from kazoo.client import KazooClient

import aiocoord
from aiocoord.cli import local_zookeeper

LOCK = "/examples/kazoo-ledger-lock"
LEDGER = "/examples/kazoo-ledger"


def kazoo_hosts(settings: aiocoord.Settings) -> str:
    """kazoo's host string for the same servers and chroot as `settings`."""
    hosts = settings.hosts.split("/", 1)[0]
    return hosts + (settings.chroot or "")


def append(zk: KazooClient, line: str) -> None:
    """Append `line` to the ledger (the caller holds the lock: no compare-and-set needed)."""
    data, stat = zk.get(LEDGER)
    zk.set(LEDGER, data + line.encode() + b"\n", version=stat.version)


def kazoo_worker(
    zk: KazooClient, name: str, rounds: int, held: list[tuple[str, float, float]]
) -> None:
    """Take the kazoo lock `rounds` times, append a line each time, and record the hold."""
    lock = zk.Lock(LOCK, name)
    for n in range(rounds):
        with lock:
            start = time.monotonic()
            append(zk, f"{name} {n}")
            time.sleep(0.01)  # the work done under the lock
            held.append((name, start, time.monotonic()))


def main(settings: aiocoord.Settings) -> None:
    zk = KazooClient(hosts=kazoo_hosts(settings))
    zk.start(timeout=15)
    try:
        zk.ensure_path(LEDGER)
        held: list[tuple[str, float, float]] = []
        threads = [
            threading.Thread(target=kazoo_worker, args=(zk, f"kazoo-{i}", 5, held))
            for i in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        lines = zk.get(LEDGER)[0].decode().splitlines()
        print(f"kazoo service: {len(lines)} lines appended by {len(threads)} threads")
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    with local_zookeeper() as settings:
        main(settings)
