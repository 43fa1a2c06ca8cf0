"""A client process of the network-fault tier, run inside its own network namespace.

``ip netns exec NS python -m tests.netfault.participant --name c1 --hosts ... --log FILE``
(`NetworkLab.spawn` builds that command).  With one coordinator it contends
for the leader latch ``/latch`` (holding each term until it is lost) and
takes the queued mutex ``/mutex`` over and over (holding it 0.2-1 s), and
logs, in the campaign's format (`tests.chaos.records`), every connection
state with the member it is connected to (``addr``), every term (``term``
with ``tok``, ``end`` with ``why``) and every stall of its event loop.  With
``--reads`` it also reads one node over and over, one read in flight, and
logs each second how many were answered (``reads``: ``n`` since ``t0``).
SIGTERM makes it leave cleanly and exit 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import time

import anyio
import anyio.lowlevel

import aiocoord
from aiocoord import CoordError, LeadershipLost, LockLost, leader_latch, mutex

from ..chaos.records import Writer

__all__ = ("LATCH", "MUTEX", "NAMESPACE", "STALL", "main")

NAMESPACE = "/netfault"
LATCH = "/latch"
MUTEX = "/mutex"
STALL = 0.3  # the event loop ran nothing for this long: logged as a stall (s)


async def report_states(coord: aiocoord.Coordinator, log: Writer) -> None:
    """Log every connection state and the member it came through."""
    async for event in coord.connection_events():
        address = coord.connected_address
        addr = f"{address[0]}:{address[1]}" if address is not None else None
        log.emit(
            "conn", state=event.state.value, sid=event.session_id, new=event.new_session, addr=addr
        )


async def watch_stalls(log: Writer) -> None:
    """Log the moments this process did not run (a loaded machine descheduled it)."""
    tick = 0.05
    while True:
        before = time.monotonic()
        await anyio.sleep(tick)
        late = time.monotonic() - before - tick
        if late > STALL:
            log.emit("stall", t0=before + tick, t1=before + tick + late)


async def contend(coord: aiocoord.Coordinator, log: Writer, name: str) -> None:
    """Contend for the latch forever; each term is held until lost."""
    terms = 0
    while True:
        try:
            async with leader_latch(coord, LATCH, participant_id=name) as latch:
                while True:
                    try:
                        async with latch.leadership() as term:
                            await anyio.lowlevel.checkpoint()  # a term already lost never begins
                            terms += 1
                            tid = f"{name}.{terms}"
                            log.emit("term", id=tid, role="latch", res="latch", tok=term.token)
                            why = "exit"
                            try:
                                await anyio.sleep_forever()
                            except BaseException as exc:
                                cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                                why = "cancelled" if cancelled else repr(exc)
                                raise
                            finally:
                                log.emit("end", id=tid, why=why)
                    except LeadershipLost:
                        continue
        except CoordError as exc:
            log.emit("coord_error", role="latch", exc=type(exc).__name__, msg=str(exc)[:200])
            await anyio.sleep(0.1)


async def take_turns(coord: aiocoord.Coordinator, log: Writer, name: str) -> None:
    """Take the mutex over and over, holding it a short random while."""
    rng = random.Random(name)
    turns = 0
    while True:
        try:
            async with mutex(coord, MUTEX, participant_id=name) as held:
                await anyio.lowlevel.checkpoint()  # a hold already lost never begins
                turns += 1
                tid = f"{name}.m{turns}"
                log.emit("term", id=tid, role="mutex", res="mutex", tok=held.token)
                why = "exit"
                try:
                    await anyio.sleep(rng.uniform(0.2, 1.0))
                except BaseException as exc:
                    cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
                    why = "cancelled" if cancelled else repr(exc)
                    raise
                finally:
                    log.emit("end", id=tid, why=why)
        except LockLost:
            pass
        except CoordError as exc:
            log.emit("coord_error", role="mutex", exc=type(exc).__name__, msg=str(exc)[:200])
        await anyio.sleep(rng.uniform(0.05, 0.3))


async def count_reads(coord: aiocoord.Coordinator, log: Writer) -> None:
    """Read the latch's node in a loop, one read in flight; log the answers of each second."""
    count, since = 0, time.monotonic()
    while True:
        try:
            await coord.client.exists(LATCH)
            count += 1
        except CoordError:
            await anyio.sleep(0.1)
        now = time.monotonic()
        if now - since >= 1.0:
            log.emit("reads", n=count, t0=since)
            count, since = 0, now


async def run(args: argparse.Namespace) -> None:
    log = Writer(args.log, p=args.name, inc=0)
    log.emit("start", os_pid=os.getpid(), wall=time.time())
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
                    randomize_hosts=not args.ordered,
                    connect_timeout=60.0,
                ) as coord:
                    async with anyio.create_task_group() as inner:
                        inner.start_soon(report_states, coord, log)
                        inner.start_soon(watch_stalls, log)
                        inner.start_soon(contend, coord, log, args.name)
                        inner.start_soon(take_turns, coord, log, args.name)
                        if args.reads:
                            inner.start_soon(count_reads, coord, log)
    finally:
        log.emit("exit")
        log.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--hosts", required=True, help="ZooKeeper connect string")
    parser.add_argument("--log", required=True, help="JSON-lines event log (appended)")
    parser.add_argument("--session-timeout", type=float, default=6.0)
    parser.add_argument("--ordered", action="store_true", help="try the hosts in the given order")
    parser.add_argument("--reads", action="store_true", help="read in a loop, log the rate")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(created).3f {args.name} %(name)s %(levelname)s %(message)s",
    )
    anyio.run(run, args)


if __name__ == "__main__":
    main()
