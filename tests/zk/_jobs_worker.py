"""A job worker in its own process, for tests that kill one: ``python -m tests.zk._jobs_worker``.

Arguments: the server's connect string, the chroot, the worker id, and
optionally the session timeout in seconds (default 2 s).  It
registers ``poison`` (the process SIGKILLs itself, as a job that crashes
its interpreter would; ``max_deliveries=2``) and ``square``, prints
``ready`` once registered, and runs until killed.  A 2 s session by default,
so the assigner sees a dead worker soon.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio

import aiocoord
from aiocoord import Scheduler

ROOT = "/jobs"
SESSION = 2.0


def register(sched: Scheduler) -> None:
    """The handlers, registered the same way in the workers and the test that submits."""

    @sched.job("poison", max_deliveries=2)
    async def poison(n: int) -> int:
        print("poisoned", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        await anyio.sleep(30)  # never reached
        return n

    @sched.job("square")
    async def square(n: int) -> int:
        await anyio.sleep(0.01)
        return n * n


async def main(hosts: str, chroot: str, worker_id: str, session: float = SESSION) -> None:
    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=session) as coord:
        sched = Scheduler(coord, ROOT)
        register(sched)
        async with sched.worker(capacity=4, worker_id=worker_id):
            print("ready", flush=True)
            await anyio.sleep_forever()


if __name__ == "__main__":
    hosts, chroot, worker_id = sys.argv[1:4]
    session = float(sys.argv[4]) if len(sys.argv) > 4 else SESSION
    anyio.run(main, hosts, chroot, worker_id, session)
