"""One worker process of ``aiocoord demo`` (``python -m aiocoord _demo-worker ...``).

It connects with the ``AIOCOORD_*`` settings its parent gives it, runs the
demo's cron jobs (`crons`) as an `aiocoord.Cron` under ``<root>/tasks`` (each
job a task of version-aware task leadership), runs the once-per-interval job
guarded by ``once_per`` at ``<root>/once/report``, and runs the demo's
scheduler jobs.  Everything it does is written to its log as JSON lines (one
``write`` each, flushed), which the demo reads for its verdict:

- ``{"ev": "fire", "job", "at", "token", "attempt", "catch_up", "version",
  "pid", "t"}`` when a cron firing starts (`at`: its scheduled Unix time), and
  ``{"ev": "fired", "job", "at", "token", "attempt", "t"}`` when it returned,
  or ``"fire-cancelled"`` when it was cancelled (a hand-over, leaving);
- ``{"ev": "once", "window", "token", "t"}`` after a successful once-per run has
  written its result node ``<root>/once/runs/<window ms>``, or
  ``{"ev": "once-duplicate", ...}`` if that node already existed;
- ``{"ev": "job", "job", "t"}`` for each scheduler job it ran (``<root>/jobs``);
- ``ready``, ``stopping`` and ``exit`` around its life.

SIGTERM (or SIGINT, or its parent going away) stops it gracefully: the
once-per job finishes the run in progress, then the cron is left, which
cancels a running firing (its claim stays: the next leader records it
interrupted) and deletes the worker's nodes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import signal
import time
from typing import IO, Any

import anyio
import anyio.abc

from ...errors import ConnectionLostError, CoordError, LockLost, NodeExistsError
from ...recipes.cas_lock import once_per
from ...recipes.cron import Cron, Firing
from ...recipes.task_leadership import Worker
from ...scheduler import Scheduler
from ...session import Coordinator, connect
from ...zk.paths import join
from .._run import run_async
from .crons import FIRE_WORK, job_specs

__all__ = (
    "HISTORY",
    "checksum",
    "demo_cron",
    "demo_scheduler",
    "run_worker",
    "window_name",
)

log = logging.getLogger(__name__)

HISTORY = 500  # outcomes kept per cron job: the whole run, for the verdict
ONCE_WORK = 0.3  # how long the once-per "query" takes
ONCE_POLL = 0.25  # how often a worker tries the once-per job
ONCE_LEASE = 1.0  # its lease: a crashed runner blocks the window at most this long (+ skew)


JOB_WORK = 0.1  # how long one scheduler job takes


def checksum(text: str, rounds: int) -> str:
    """The demo job's computation: `rounds` of SHA-256 over `text` (checked by the demo)."""
    digest = text
    for _ in range(rounds):
        digest = hashlib.sha256(digest.encode()).hexdigest()
    return digest


def demo_scheduler(
    coord: Coordinator, root: str, worker: str, out: JsonLog | None = None
) -> Scheduler:
    """The demo's scheduler with its one job, ``checksum``, registered (workers and client)."""
    sched = Scheduler(coord, join(root, "jobs"), strategy="least-loaded", result_ttl=600)

    @sched.job("checksum")
    async def run_checksum(text: str, rounds: int) -> dict[str, str]:
        await anyio.sleep(JOB_WORK)
        if out is not None:
            out.write("job", job=text)
        return {"digest": checksum(text, rounds), "worker": worker}

    return sched


def demo_cron(coord: Coordinator, root: str, me: Worker, tasks: int, out: JsonLog) -> Cron:
    """The demo's cron under ``<root>/tasks``, its jobs registered; each firing is logged."""
    cron = Cron(coord, join(root, "tasks"), worker=me, history=HISTORY, settle=0.3)

    async def fire(firing: Firing) -> None:
        at = firing.scheduled_at.timestamp()
        ids = {"job": firing.job, "at": at, "token": firing.token, "attempt": firing.attempt}
        out.write("fire", **ids, catch_up=firing.catch_up, version=me.version, pid=os.getpid())
        done = False
        try:
            await anyio.sleep(FIRE_WORK)  # the "work"
            done = True
        finally:
            out.write("fired" if done else "fire-cancelled", **ids)

    for spec in job_specs(tasks):
        register = cron.job(
            spec.expression,
            every=spec.every,
            name=spec.name,
            retry_interrupted=spec.retry_interrupted,
        )
        register(fire)
    return cron


def window_name(window: float) -> str:
    """The result node's name for the once-per window starting at `window` (Unix time)."""
    return str(round(window * 1000))


class JsonLog:
    """Append-only JSON lines, one write and flush each, so a SIGKILL never cuts a line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, ev: str, **fields: Any) -> None:
        record = {"ev": ev, "t": time.time(), **fields}
        self._stream.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._stream.flush()


async def _once_loop(
    coord: Coordinator, root: str, interval: float, owner: str, out: JsonLog, stop: anyio.Event
) -> None:
    """Try the once-per-interval job every ONCE_POLL seconds until `stop` is set."""
    lock = join(root, "once", "report")
    runs = join(root, "once", "runs")
    while not stop.is_set():
        try:
            async with once_per(
                coord, lock, interval, owner=owner, lease=ONCE_LEASE, skew=0.1
            ) as slot:
                if slot.acquired:
                    window = slot.window.timestamp()
                    await anyio.sleep(ONCE_WORK)  # the "query"
                    data = json.dumps({"worker": owner, "token": slot.token}).encode()
                    try:
                        await coord.client.create(
                            join(runs, window_name(window)), data, make_parents=True
                        )
                    except NodeExistsError:
                        out.write("once-duplicate", window=window, token=slot.token)
                    else:
                        out.write("once", window=window, token=slot.token)
        except (LockLost, ConnectionLostError) as exc:
            out.write("once-failed", error=str(exc))
        except CoordError as exc:
            out.write("once-failed", error=str(exc))
        with anyio.move_on_after(ONCE_POLL):
            await stop.wait()


async def _watch_signals(stop: anyio.Event, out: JsonLog) -> None:
    parent = os.getppid()
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:

            async def orphaned() -> None:
                while os.getppid() == parent:  # noqa: ASYNC110 - no event for a parent's death
                    await anyio.sleep(0.5)
                out.write("orphaned")
                stop.set()

            tg.start_soon(orphaned)
            async for signum in signals:
                out.write("stopping", signal=signal.Signals(signum).name)
                stop.set()
                tg.cancel_scope.cancel()
                return


async def _main(args: argparse.Namespace, out: JsonLog) -> None:
    stop = anyio.Event()
    async with anyio.create_task_group() as outer:
        outer.start_soon(_watch_signals, stop, out)
        async with connect(session_timeout=args.session_timeout, connect_timeout=15.0) as coord:
            out.write("session", session=coord.session_id)
            me = Worker(version=args.version, id=args.id)
            sched = demo_scheduler(coord, args.root, args.id, out)
            async with (
                demo_cron(coord, args.root, me, args.tasks, out),
                sched.worker(capacity=4, worker_id=args.id, drain_timeout=5.0),
            ):
                async with anyio.create_task_group() as tg:
                    once = anyio.Event()

                    async def once_job() -> None:
                        try:
                            await _once_loop(coord, args.root, args.interval, me.id, out, stop)
                        finally:
                            once.set()

                    tg.start_soon(once_job)
                    out.write("ready", version=me.version, pid=os.getpid())
                    await stop.wait()
                    with anyio.move_on_after(ONCE_LEASE + ONCE_WORK + 2):
                        await once.wait()  # let a run in progress finish and be recorded
                    tg.cancel_scope.cancel()
        outer.cancel_scope.cancel()


def run_worker(args: argparse.Namespace) -> int:
    """The ``_demo-worker`` command: run until SIGTERM; returns the exit status."""
    with open(args.log, "a", encoding="utf-8") as stream:
        out = JsonLog(stream)
        try:
            run_async(lambda: _main(args, out), getattr(args, "loop", "uvloop"))
        except BaseException as exc:
            out.write("crash", error=f"{type(exc).__name__}: {exc}")
            raise
        out.write("exit")
    return 0
