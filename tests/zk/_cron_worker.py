"""A worker process of the cron exactly-once test: two jobs, a log on stdout, commands on stdin.

``python tests/zk/_cron_worker.py HOSTS CHROOT WORKER_ID VERSION`` runs a
`Cron` at ``/app/cron`` with the jobs ``plain`` (``every=1``) and ``retry``
(``* * * * * *``, ``retry_interrupted=True``).  It writes one JSON line to
stdout per event (flushed; a SIGKILL never cuts one): ``ready``; ``start``
(job, at, token, attempt, version, pid) when a firing starts and ``end`` or
``cancelled`` when it ends; ``hang`` when a firing hangs.  Commands, one a
line on stdin: ``hang`` (the next firing of each job hangs until it is
cancelled), ``expire`` (expire this worker's own session on the server, with
`aiocoord.testing.expire_session`; answers ``expired``).  Closing stdin
leaves the cron (a running firing is cancelled) and exits.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio

import aiocoord
from aiocoord import Cron, Firing, Worker
from aiocoord.testing import expire_session

ROOT = "/app/cron"
WORK = 0.05  # what a firing does: a little, so a hand-over may catch one


def say(ev: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"ev": ev, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


async def main(hosts: str, chroot: str, worker_id: str, version: str) -> None:
    hang: set[str] = set()  # jobs whose next firing hangs

    async def run(firing: Firing) -> None:
        at = firing.scheduled_at.timestamp()
        ids = {"job": firing.job, "at": at, "attempt": firing.attempt}
        say("start", **ids, token=firing.token, version=version, pid=os.getpid())
        ended = "cancelled"
        try:
            if firing.job in hang:
                hang.discard(firing.job)
                say("hang", **ids)
                await anyio.sleep_forever()  # until a kill, or a lost session cancels it
            await anyio.sleep(WORK)
            ended = "end"
        finally:
            say(ended, **ids)

    async with aiocoord.connect(hosts, namespace=chroot, session_timeout=3.0) as coord:
        cron = Cron(coord, ROOT, worker=Worker(version, id=worker_id), settle=0.2, history=200)
        cron.job(every=1, name="plain")(run)
        cron.job("* * * * * *", name="retry", retry_interrupted=True)(run)
        async with cron:
            say("ready", session=coord.session_id)
            stdin = anyio.wrap_file(sys.stdin)
            while line := (await stdin.readline()).strip():
                if line == "hang":
                    hang.update(cron.jobs)
                elif line == "expire":
                    say("expired", done=await expire_session(coord))
    say("exit")


if __name__ == "__main__":
    hosts, chroot, worker_id, version = sys.argv[1:5]
    anyio.run(main, hosts, chroot, worker_id, version, backend_options={"use_uvloop": True})
