"""``aiocoord dashboard [PATH]``: serve the live dashboard of a path until interrupted.

Connects as ``inspect`` does (``--hosts``, else ``AIOCOORD_HOSTS``, else the
embedded server), listens on ``--host``/``--port`` (the socket is made here,
so a busy port is a one-line error), prints the page's address and serves
`aiocoord.integrations.dashboard.dashboard_app` with uvicorn.  Needs the
``fastapi`` extra (FastAPI and uvicorn); without it the command says so.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
from contextlib import AsyncExitStack
from typing import Any

from ..errors import ConnectionLostError
from ._connect import add_connection_args, checked_path, settings_of, unreachable
from .zk import UserError

__all__ = ("add_parser", "run_dashboard")

GRACE = 1  # seconds open pages get to go at shutdown (their event streams never end by themselves)


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the ``dashboard`` subcommand on `sub`."""
    dash = sub.add_parser(
        "dashboard",
        help="serve a live web page of what is under a path",
        description=(
            "Serve a read-only web page of what is under PATH, recognising each recipe by its "
            "layout as 'inspect' does (leader latches, CAS locks, task leadership, schedulers), "
            "updated live from one ZooKeeper watch (server-sent events), with the connection "
            "state (SUSPENDED, LOST) on the page. Needs the fastapi extra: "
            "pip install 'aiocoord[fastapi]'."
        ),
    )
    dash.add_argument("path", nargs="?", default="/", help="a ZooKeeper path (default /)")
    dash.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    dash.add_argument(
        "--port", type=int, default=8000, help="port to listen on (default 8000; 0: any)"
    )
    dash.add_argument("--depth", type=int, default=4, help="levels of plain nodes to walk")
    add_connection_args(dash, json=False)
    dash.set_defaults(func=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status (after Ctrl-C, `main` reports the interrupt)."""
    try:
        import uvicorn

        from ..integrations.dashboard import dashboard_app
    except ImportError as exc:
        raise UserError(
            f"the dashboard needs the fastapi extra ({exc.name} is not installed): "
            "pip install 'aiocoord[fastapi]'"
        ) from None
    checked_path(args.path, allow_reserved=True)
    if args.depth < 0:
        raise UserError("--depth must be 0 or more")
    settings = settings_of(args)
    try:
        listener = socket.create_server((args.host, args.port))
    except OSError as exc:
        raise UserError(
            f"cannot listen on {args.host}:{args.port}: {os.strerror(exc.errno) if exc.errno else exc}"
        ) from None

    async def serve() -> int:
        async with AsyncExitStack() as stack:
            try:
                coord = await stack.enter_async_context(
                    connect(settings, connect_timeout=args.timeout)
                )
            except ConnectionLostError:
                raise unreachable(settings, args.timeout) from None
            app = dashboard_app(coord, args.path, depth=args.depth)
            verbose = logging.getLogger("aiocoord").isEnabledFor(logging.INFO)
            config = uvicorn.Config(
                app,
                log_level="info" if verbose else "warning",
                timeout_graceful_shutdown=GRACE,
            )
            host, port = listener.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(
                f"dashboard of {args.path} on {settings.hosts}: http://{shown}:{port}/ "
                "(Ctrl-C to stop)",
                flush=True,
            )
            server = uvicorn.Server(config)
            await server.serve(sockets=[listener])
        # uvicorn raises a caught Ctrl-C again once it has stopped, but the event loop's
        # own handler may turn that into a cancellation this task outlives: say so here.
        caught: list[int] = getattr(server, "_captured_signals", [])
        return 130 if signal.SIGINT in caught else 0

    from .. import connect
    from ._run import run_async

    with listener:
        return run_async(serve, args.loop)
