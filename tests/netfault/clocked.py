"""A client process of the clock-skew scenarios: `cas_lock` or `once_per` on a wall clock of its own.

``ip netns exec NS python -m tests.netfault.clocked --name h --hosts ... --log FILE
--role lock`` (`Scene.client` builds that command; `skew.faketime_env` makes
its wall clock run ahead or behind).  Roles:

- ``lock``: takes the CAS lock ``--path`` (blocking) and holds it ``--hold``
  seconds (``inf``: until it is lost), ``--terms`` times (0: for ever), then
  idles;
- ``once``: every ``--every`` seconds enters ``once_per`` on ``--path`` (window
  ``--interval``); when acquired, the body runs ``--hold`` seconds and
  returns (its window is logged as ``win``, how the run ended as an
  ``outcome``: ok, lost, unknown), ``--terms`` runs at most.

Both use ``--lease`` and ``--skew``.  Logged in the campaign's format
(`tests.chaos.records`), on the shared monotonic clock: ``start`` with
``wall`` (this process's ``time.time()`` at the same instant: the test reads
the process's clock offset from it), every connection state, ``term`` /
``end`` (``why``: exit, cancelled, or the exception) and ``outcome``.
SIGTERM makes it leave cleanly and exit 0.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import signal
import sys
import time
from typing import Any

import anyio
import anyio.lowlevel

import aiocoord
from aiocoord import CoordError, LockLost, cas_lock, once_per

from ..chaos.records import Writer
from .participant import report_states, watch_stalls

__all__ = ("NAMESPACE", "main")

NAMESPACE = "/netfault-clock"


async def hold(log: Writer, tid: str, seconds: float, **fields: Any) -> None:
    """Log a term ``tid`` and run its body (a sleep of ``seconds``); log how it ended."""
    log.emit("term", id=tid, **fields)
    why = "exit"
    try:
        if math.isinf(seconds):
            await anyio.sleep_forever()
        await anyio.sleep(seconds)
    except BaseException as exc:
        cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
        why = "cancelled" if cancelled else repr(exc)
        raise
    finally:
        log.emit("end", id=tid, why=why)


async def lock_role(coord: aiocoord.Coordinator, log: Writer, args: argparse.Namespace) -> None:
    terms = 0
    while not args.terms or terms < args.terms:
        try:
            async with cas_lock(
                coord, args.path, owner=args.name, lease=args.lease, skew=args.skew
            ) as lock:
                await anyio.lowlevel.checkpoint()  # a hold already lost never begins
                terms += 1
                await hold(log, f"{args.name}.{terms}", args.hold, res="lock", tok=lock.token)
        except LockLost as exc:
            log.emit("lost", id=f"{args.name}.{terms}", reason=exc.reason)
        except CoordError as exc:
            log.emit("coord_error", role="lock", exc=type(exc).__name__, msg=str(exc)[:200])
            await anyio.sleep(0.1)
    await anyio.sleep_forever()


async def once_role(coord: aiocoord.Coordinator, log: Writer, args: argparse.Namespace) -> None:
    runs = 0
    while not args.terms or runs < args.terms:
        tid = None
        outcome = "cancelled"
        try:
            async with once_per(
                coord, args.path, args.interval, owner=args.name, lease=args.lease, skew=args.skew
            ) as slot:
                if slot.acquired:
                    await anyio.lowlevel.checkpoint()
                    runs += 1
                    tid = f"{args.name}.o{runs}"
                    win = slot.window.timestamp()
                    await hold(log, tid, args.hold, res="once", tok=slot.token, win=win)
            outcome = "ok"
        except LockLost as exc:
            outcome = "lost"
            log.emit("lost", id=tid, reason=exc.reason)
        except CoordError as exc:
            outcome = f"unknown: {type(exc).__name__}"
            log.emit("coord_error", role="once", exc=type(exc).__name__, msg=str(exc)[:200])
        finally:
            if tid is not None:
                log.emit("outcome", id=tid, res=outcome)
        await anyio.sleep(args.every)
    await anyio.sleep_forever()


async def run(args: argparse.Namespace) -> None:
    log = Writer(args.log, p=args.name, inc=0)
    mono, wall = time.monotonic(), time.time()
    log.emit("start", t=mono, os_pid=os.getpid(), wall=wall, role=args.role)
    role = lock_role if args.role == "lock" else once_role
    try:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def stop_on_sigterm() -> None:
                    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for _ in signals:
                            scope.cancel()
                            return

                tg.start_soon(stop_on_sigterm)
                async with aiocoord.connect(
                    args.hosts,
                    namespace=NAMESPACE,
                    session_timeout=args.session_timeout,
                    connect_timeout=60.0,
                ) as coord:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(report_states, coord, log)
                        inner.start_soon(watch_stalls, log)
                        inner.start_soon(role, coord, log, args)
    finally:
        log.emit("exit")
        log.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--hosts", required=True, help="ZooKeeper connect string")
    parser.add_argument("--log", required=True, help="JSON-lines event log (appended)")
    parser.add_argument("--session-timeout", type=float, default=8.0)
    parser.add_argument("--role", choices=("lock", "once"), required=True)
    parser.add_argument("--path", required=True, help="the lock's node")
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--skew", type=float, default=0.5)
    parser.add_argument("--hold", type=float, default=math.inf, help="seconds (inf: until lost)")
    parser.add_argument("--terms", type=int, default=0, help="terms or runs to take (0: no limit)")
    parser.add_argument("--interval", type=float, default=3600.0, help="once_per's window (s)")
    parser.add_argument("--every", type=float, default=0.2, help="once_per's call period (s)")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(created).3f {args.name} %(name)s %(levelname)s %(message)s",
    )
    anyio.run(run, args)


if __name__ == "__main__":
    main()
