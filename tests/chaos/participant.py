"""One participant of a fault campaign: a real OS process running every recipe at once.

Run by the orchestrator as ``python -m tests.chaos.participant --name p1 ...``
(see `main` for the arguments).  With one coordinator (one session), through
the fault proxies that carry only this process's traffic, it runs the roles
of `roles` side by side, tells the fenced store about each new session (so
the orchestrator can expire it), logs every connection state and every stall
of its event loop.  SIGTERM makes it leave every recipe cleanly and exit 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

import anyio

import aiocoord
from aiocoord import ConnectionState

from ..mutants import apply_from_env
from .records import Writer
from .roles import NAMESPACE, ROLE_FUNCS, ROLES, STALL, Context
from .store import StoreClient

__all__ = ("main",)


async def report_sessions(coord: aiocoord.Coordinator, ctx: Context) -> None:
    """Log every connection state; tell the store about each usable session (for `expire`)."""
    async for event in coord.connection_events():
        ctx.log.emit("conn", state=event.state.value, sid=event.session_id, new=event.new_session)
        usable = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
        if event.state in usable:
            sid, password = coord.session_id, coord.session_password
            address = coord.connected_address
            if sid is not None and password is not None:
                port = address[1] if address is not None else None
                with anyio.move_on_after(2.0):
                    await ctx.store.report_session(ctx.inc, sid, password, port)


async def watch_stalls(ctx: Context) -> None:
    """Log the moments this process did not run (``stall``): a descheduled process is a paused one.

    On a loaded machine a participant can miss its turn for longer than the
    margins of the recipes (SUSPENDED comes 1/3 of a session timeout before
    the server expires the session); the checker treats a stall as a freeze:
    it excuses an overlap only during the stall and a third of the session
    timeout after it.
    """
    tick = 0.05
    while True:
        before = time.monotonic()
        await anyio.sleep(tick)
        late = time.monotonic() - before - tick
        if late > STALL:
            ctx.log.emit("stall", t0=before + tick, t1=before + tick + late)


async def stop_on_sigterm(scopes: list[anyio.CancelScope]) -> None:
    """On SIGTERM cancel the innermost scope: the roles, so they leave while the session lives."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scopes[-1].cancel()
            return


async def run(args: argparse.Namespace) -> None:
    log = Writer(args.log, p=args.name, inc=args.inc)
    log.emit("start", os_pid=os.getpid(), wall=time.time(), loop=args.loop, mutant=args.mutant)
    host, port = args.store.rsplit(":", 1)
    store = StoreClient(host, int(port), args.name)
    ctx = Context(args, log, store)
    try:
        with anyio.CancelScope() as main_scope:
            scopes = [main_scope]  # what SIGTERM cancels: the roles once they run
            async with anyio.create_task_group() as tg:
                tg.start_soon(stop_on_sigterm, scopes)
                async with aiocoord.connect(
                    args.hosts,
                    namespace=args.namespace,
                    session_timeout=args.session_timeout,
                    connect_timeout=120.0,
                ) as coord:
                    async with anyio.create_task_group() as roles:
                        scopes.append(roles.cancel_scope)
                        roles.start_soon(report_sessions, coord, ctx)
                        roles.start_soon(watch_stalls, ctx)
                        for role in args.roles.split(","):
                            roles.start_soon(ROLE_FUNCS[role], coord, ctx)
                tg.cancel_scope.cancel()
    finally:
        await store.aclose()
        log.emit("exit")
        log.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--inc", type=int, default=0, help="incarnation of this name")
    parser.add_argument("--hosts", required=True, help="ZooKeeper connect string")
    parser.add_argument("--namespace", default=NAMESPACE)
    parser.add_argument("--store", required=True, help="host:port of the fenced store")
    parser.add_argument("--log", required=True, help="JSON-lines event log (appended)")
    parser.add_argument("--session-timeout", type=float, default=3.0)
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--version", default="1.0", help="task-leadership worker version")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--roles", default=",".join(ROLES))
    args = parser.parse_args(argv)
    args.mutant = apply_from_env()  # a deliberate defect, for the mutation checks (tests/mutants)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format=f"%(created).3f {args.name}.{args.inc} %(name)s %(levelname)s %(message)s",
    )
    anyio.run(run, args, backend="asyncio", backend_options={"use_uvloop": args.loop == "uvloop"})


if __name__ == "__main__":
    main()
