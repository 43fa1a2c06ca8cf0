"""The `aiocoord` command: demo, an embedded ZooKeeper, tree inspection.

``aiocoord demo`` starts a throwaway ZooKeeper server, connects to it and prints
the connection states as they happen while it restarts the server and then
expires the session on it, so the whole Curator state cycle is visible in a
few seconds.  ``aiocoord zk`` runs an embedded server until interrupted.
``aiocoord inspect`` prints a subtree with its data.  The event loop is
uvloop unless ``--loop asyncio`` is given.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from collections.abc import Sequence

import anyio

from . import connect
from .errors import CoordError, NoNodeError
from .session import Coordinator
from .zk.paths import join
from .zk.types import CreateMode

__all__ = ("main",)


def _run(func: object, args: argparse.Namespace) -> None:
    use_uvloop = args.loop == "uvloop"
    anyio.run(func, args, backend="asyncio", backend_options={"use_uvloop": use_uvloop})  # type: ignore[arg-type]


# --- demo --------------------------------------------------------------------------------------


async def _demo(args: argparse.Namespace) -> None:
    from .testing import ZooKeeperServer, expire_session

    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:6.2f}s] {text}", flush=True)

    say("starting an embedded ZooKeeper server ...")
    with ZooKeeperServer() as server:
        say(f"ZooKeeper is up at {server.connect_string}")
        async with connect(
            server.connect_string, session_timeout=args.session_timeout, namespace="/demo"
        ) as coord:
            async with anyio.create_task_group() as tg:
                seen: list[str] = []
                changed = anyio.Event()

                async def watch_states() -> None:
                    nonlocal changed
                    async for event in coord.connection_events():
                        extra = (
                            " (new session)"
                            if event.new_session and event.state.value == "RECONNECTED"
                            else ""
                        )
                        sid = f"0x{event.session_id:x}" if event.session_id else "-"
                        say(f"state {event.state.value:<11} session {sid}{extra}  {event.reason}")
                        seen.append(event.state.value)
                        changed.set()
                        changed = anyio.Event()

                async def until(state: str, count: int = 1) -> None:
                    with anyio.fail_after(30):
                        while seen.count(state) < count:
                            await changed.wait()

                tg.start_soon(watch_states)
                await until("CONNECTED")
                created = await coord.client.create("/hello", b"world", mode=CreateMode.EPHEMERAL)
                say(f"created ephemeral {created.path} (czxid 0x{created.stat.czxid:x})")

                say("restarting the server: the session survives (SUSPENDED -> RECONNECTED)")
                await anyio.to_thread.run_sync(server.restart)
                await until("RECONNECTED")
                still = await coord.client.exists("/hello")
                say(f"ephemeral still there after the restart: {still is not None}")

                say("expiring the session on the server: LOST, then a new session by itself")
                await expire_session(coord)
                await until("RECONNECTED", 2)
                gone = await coord.client.exists("/hello")
                say(f"ephemeral gone with the old session: {gone is None}")
                tg.cancel_scope.cancel()
        say("closed the session; stopping ZooKeeper")
    say("demo done")


# --- zk ----------------------------------------------------------------------------------------


def _zk(args: argparse.Namespace) -> int:
    from .testing import ZooKeeperServer

    server = ZooKeeperServer(port=args.port)
    server.start()
    print(
        f"ZooKeeper running at {server.connect_string} (log: {server.log_path}); Ctrl-C stops it",
        flush=True,
    )
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    try:
        while not stop and server.running:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        server.cleanup()
    return 0


# --- inspect -----------------------------------------------------------------------------------


async def _inspect(args: argparse.Namespace) -> None:
    async with connect(args.hosts, session_timeout=10, connect_timeout=args.timeout) as coord:
        await _print_tree(coord, args.path, 0, args.depth)


async def _print_tree(coord: Coordinator, path: str, level: int, depth: int) -> None:
    try:
        node = await coord.client.get(path)
        children = sorted(await coord.client.children(path))
    except NoNodeError:
        print(f"{'  ' * level}{path} (gone)")
        return
    data = node.data.decode("utf-8", "replace")
    if len(data) > 80:
        data = data[:77] + "..."
    kind = " [ephemeral]" if node.stat.ephemeral_owner else ""
    name = path if level == 0 else path.rsplit("/", 1)[1]
    print(
        f"{'  ' * level}{name}{kind} v{node.stat.version} {data!r}"
        if data
        else f"{'  ' * level}{name}{kind}"
    )
    if level < depth:
        for child in children:
            await _print_tree(coord, join(path, child), level + 1, depth)


# --- entry point -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiocoord", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop (default uvloop)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log aiocoord's transitions")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="start a ZooKeeper, print connection states through a restart and an expiry"
    )
    demo.add_argument("--session-timeout", type=float, default=4.0)
    zk = sub.add_parser("zk", help="run an embedded ZooKeeper server until interrupted")
    zk.add_argument("--port", type=int, default=None, help="client port (default: a free one)")
    inspect = sub.add_parser("inspect", help="print a subtree with node data")
    inspect.add_argument("path", nargs="?", default="/")
    inspect.add_argument("--hosts", default="127.0.0.1:2181")
    inspect.add_argument("--depth", type=int, default=8)
    inspect.add_argument("--timeout", type=float, default=5.0)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s"
    )
    try:
        if args.command == "demo":
            _run(_demo, args)
        elif args.command == "zk":
            return _zk(args)
        elif args.command == "inspect":
            _run(_inspect, args)
    except CoordError as exc:
        print(f"aiocoord: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
