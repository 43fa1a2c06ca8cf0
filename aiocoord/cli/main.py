"""The `aiocoord` command: the demo, an embedded ZooKeeper, inspection and a benchmark.

``aiocoord demo`` runs the project's end-to-end demo: worker processes leading
a dozen cron tasks through a rolling upgrade and a crash, with a verdict
checked against ZooKeeper.  ``aiocoord zk start|stop|status`` manages the
embedded development server that the demo and the examples use when
``AIOCOORD_HOSTS`` is unset.  ``aiocoord inspect PATH`` shows what is under a
path, recognising each recipe's layout (a node it may not read as "no access");
``aiocoord acl get|set PATH`` reads or replaces a node's ACL; ``aiocoord dashboard PATH`` serves
the same as a live web page.  ``aiocoord jobs submit|info|result|cancel|list``
works with a job scheduler as a client; ``aiocoord lock revoke PATH`` asks a
lock's holder to let go.  ``aiocoord bench`` measures
aiocoord's recipes on one's own ZooKeeper.  Async commands run on uvloop unless ``--loop asyncio`` is given.

A user error (no server reachable, a bad path, an unknown command) prints one
line on stderr and exits with a non-zero status: 1 for a failed operation, 2
for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import NoReturn

from .. import __version__
from ..errors import ConfigError, CoordError
from ._connect import (
    add_connection_args,
    checked_path,
    connected,
    embedded_dir,
    settings_of,
)
from ._run import run_async
from .acl import add_parser as add_acl_parser
from .dashboard import add_parser as add_dashboard_parser
from .jobs_command import add_parser as add_jobs_parser
from .lock import add_parser as add_lock_parser
from .zk import UserError, local_zookeeper

__all__ = ("UserError", "local_zookeeper", "main")


class _Parser(argparse.ArgumentParser):
    """argparse, with errors on one line (and exit status 2)."""

    def error(self, message: str) -> NoReturn:
        message = message.replace(", '_demo-worker'", "")  # hidden: the demo's own processes
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups of one; else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# --- zk ------------------------------------------------------------------------------------------


def _cmd_zk(args: argparse.Namespace) -> int:
    from .zk import default_dir, server_status, start_server, stop_server

    # No --dir: the user's one server, found from any working directory.
    directory = embedded_dir(args)
    shown = directory if directory is not None else default_dir()
    if args.action == "ensemble":
        from .ensemble import run_ensemble

        return run_ensemble(args)
    if args.action == "start":
        server, proc = start_server(directory, port=args.port, any_port=False)
        if proc is None:
            print(
                f"ZooKeeper already running at {server.connect_string} (pid {server.pid}, "
                f"data in {server.directory})"
            )
        else:
            print(
                f"ZooKeeper running at {server.connect_string} (pid {server.pid}, "
                f"data in {server.directory}, log {server.log_path})"
            )
        if server.port != 2181:
            print(
                "aiocoord.connect() and the aiocoord command find it while AIOCOORD_HOSTS "
                f"is unset (elsewhere: AIOCOORD_HOSTS={server.connect_string})"
            )
        return 0
    if args.action == "stop":
        stopped = stop_server(directory)
        if stopped is None:
            raise UserError(f"no embedded ZooKeeper running in {shown}: nothing stopped")
        print(f"stopped ZooKeeper at {stopped.connect_string} (pid {stopped.pid})")
        return 0
    found, mode = server_status(directory)
    if found is None:
        print(f"no embedded ZooKeeper running in {shown}")
        return 3
    answer = f"answering ({mode})" if mode else "running but not answering"
    print(
        f"ZooKeeper at {found.connect_string} (pid {found.pid}, data in {found.directory}): "
        f"{answer}"
    )
    return 0 if mode else 1


# --- inspect -------------------------------------------------------------------------------------


def _cmd_inspect(args: argparse.Namespace) -> int:
    from ..inspection import inspect_path
    from .inspect import render

    checked_path(args.path, allow_reserved=True)
    if args.depth < 0:
        raise UserError("--depth must be 0 or more")
    settings = settings_of(args)
    no_node = f"{args.path} does not exist on {settings.hosts}"
    no_auth = (
        f"no access to {args.path} on {settings.hosts} with these credentials "
        "(set AIOCOORD_AUTH or AIOCOORD_SASL_* to an identity its ACL allows)"
    )

    async def run() -> dict[str, object]:
        async with connected(settings, args.timeout, no_node=no_node, no_auth=no_auth) as coord:
            return await inspect_path(coord, args.path, depth=args.depth)

    info = run_async(run, args.loop)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print("\n".join(render(info)))
    return 0


# --- demo, bench, workers ------------------------------------------------------------------------


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demo.run import run_demo

    return run_demo(args)


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import run_bench

    return run_bench(args)


def _cmd_demo_worker(args: argparse.Namespace) -> int:
    from .demo.worker import run_worker

    return run_worker(args)


# --- the parser ----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aiocoord",
        description="aiocoord: asyncio-native coordination on Apache ZooKeeper.",
        epilog="ZooKeeper: AIOCOORD_HOSTS if set, else the embedded server ('aiocoord zk start').",
    )
    parser.add_argument(
        "--loop",
        choices=("uvloop", "asyncio"),
        default="uvloop",
        help="event loop (default uvloop)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log aiocoord's transitions")
    parser.add_argument("--version", action="version", version=f"aiocoord {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run the end-to-end demo: workers, a rolling upgrade, a crash, a verdict",
        description=(
            "Start the embedded ZooKeeper (or use AIOCOORD_HOSTS), run worker processes of "
            "version 1.0 leading a dozen cron tasks and a once-per-interval job, roll out "
            "version 1.1, SIGKILL one 1.1 worker, run a batch of scheduler jobs, and check "
            "the verdict against ZooKeeper and the workers' logs. Exits 0 only if it holds."
        ),
    )
    demo.add_argument("--workers", type=int, default=3, help="workers per version (default 3)")
    demo.add_argument("--tasks", type=int, default=12, help="cron tasks (default 12)")
    demo.add_argument("--jobs", type=int, default=40, help="scheduler jobs (default 40)")
    demo.add_argument(
        "--interval", type=float, default=3.0, help="once-per-interval window, seconds (default 3)"
    )
    demo.add_argument(
        "--session-timeout",
        type=float,
        default=2.0,
        help="workers' session timeout, seconds (default 2)",
    )
    demo.add_argument(
        "--windows",
        type=int,
        default=3,
        help="once-per windows to run with workers alive all through (default 3)",
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the demo's nodes and logs afterwards"
    )
    demo.add_argument("--dir", default=None, help=argparse.SUPPRESS)
    demo.set_defaults(func=_cmd_demo)

    zk = sub.add_parser(
        "zk",
        help="start, stop or query the embedded development ZooKeeper",
        description=(
            "The embedded ZooKeeper for development, one per user: the installed Debian "
            "server, with its data, log, pid and port in a per-user folder "
            "($AIOCOORD_ZK_DIR, else $XDG_STATE_HOME/aiocoord/zk, else "
            "~/.local/state/aiocoord/zk; or --dir), found from any directory. It listens "
            "on 127.0.0.1 port 2181 (or --port)."
        ),
    )
    zk.add_argument(
        "action",
        choices=("start", "stop", "status", "ensemble"),
        help=(
            "start it in the background, stop it (exit 1: none ran), or say whether it "
            "runs (exit 3: it does not); 'ensemble' shows the members and roles of the "
            "ZooKeeper at --hosts (default: AIOCOORD_HOSTS or the embedded one)"
        ),
    )
    zk.add_argument("--port", type=int, default=None, help="client port for 'start'")
    zk.add_argument("--hosts", default=None, help="ZooKeeper hosts for 'ensemble'")
    zk.add_argument("--timeout", type=float, default=5.0, help="connect timeout for 'ensemble'")
    zk.add_argument("--json", action="store_true", help="print JSON for scripts ('ensemble')")
    zk.add_argument("--dir", default=None, help="the server's folder (default: the per-user one)")
    zk.set_defaults(func=_cmd_zk)

    inspect = sub.add_parser(
        "inspect",
        help="show what is under a path: latches, locks, task leadership, schedulers",
        description=(
            "Show what is under PATH, recognising each recipe by its layout: a leader latch "
            "(participants in order, leader, tokens), a CAS lock (owner, lease expiry, last "
            "run), task leadership (workers with versions, task -> leader), a scheduler "
            "(pending, assigned, results); other nodes as a tree."
        ),
    )
    inspect.add_argument("path", nargs="?", default="/", help="a ZooKeeper path (default /)")
    inspect.add_argument("--depth", type=int, default=4, help="levels of plain nodes to walk")
    add_connection_args(inspect)
    inspect.set_defaults(func=_cmd_inspect)

    add_acl_parser(sub)  # `aiocoord acl get|set`, in cli/acl.py
    add_dashboard_parser(sub)  # `aiocoord dashboard`, defined with the command in cli/dashboard.py
    add_jobs_parser(sub)  # `aiocoord jobs ...`, in cli/jobs_command.py
    add_lock_parser(sub)  # `aiocoord lock revoke PATH`, in cli/lock.py

    bench = sub.add_parser(
        "bench",
        help="measure aiocoord's recipes on your ZooKeeper: round trips, lock, hand-off",
        description=(
            "Measure aiocoord on the servers named by --hosts (else AIOCOORD_HOSTS, else the "
            "embedded server, started for the run if needed) and print one table: getData "
            "latency and pipelined throughput, cas_lock acquire+release throughput, "
            "leader_latch hand-off latency. Works under a fresh node below --root, deleted "
            "afterwards. The comparisons with other clients are in benchmarks/ of the "
            "repository."
        ),
    )
    bench.add_argument("--quick", action="store_true", help="a short run (1 s per measurement)")
    bench.add_argument(
        "--seconds", type=float, default=None, help="seconds per measurement (overrides --quick)"
    )
    bench.add_argument(
        "--root", default="/aiocoord-bench", help="where to work (default /aiocoord-bench)"
    )
    bench.add_argument(
        "--contenders", type=int, default=4, help="lock contenders, a session each (default 4)"
    )
    bench.add_argument(
        "--participants", type=int, default=5, help="latch participants, a session each (default 5)"
    )
    add_connection_args(bench, json=False)
    bench.set_defaults(func=_cmd_bench)

    worker = sub.add_parser("_demo-worker")  # the demo's worker processes; not listed
    worker.add_argument("--root", required=True)
    worker.add_argument("--id", required=True)
    worker.add_argument("--version", required=True)
    worker.add_argument("--tasks", type=int, required=True)
    worker.add_argument("--interval", type=float, required=True)
    worker.add_argument("--session-timeout", type=float, required=True)
    worker.add_argument("--log", required=True)
    worker.set_defaults(func=_cmd_demo_worker)
    return parser


def _no_retry_lines(record: logging.LogRecord) -> bool:
    """False for the connect loop's retry lines (marked so by the session's logger)."""
    return not getattr(record, "aiocoord_connect_retry", False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(name)s: %(message)s"
    )
    # The connect loop's retry lines repeat what the one-line error says (its last cause).
    session_log = logging.getLogger("aiocoord.session")
    if args.verbose:
        session_log.removeFilter(_no_retry_lines)
    else:
        session_log.addFilter(_no_retry_lines)
    try:
        return _run_command(args)
    finally:
        session_log.removeFilter(_no_retry_lines)  # a caller in this process logs as before


def _run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; a `UserError` or `CoordError` is one line on stderr."""
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BaseException as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, KeyboardInterrupt):
            return 130
        if isinstance(leaf, UserError | CoordError):
            print(f"aiocoord {args.command}: {leaf}", file=sys.stderr)
            return 2 if isinstance(leaf, ConfigError) else 1  # a bad setting: as a bad command line
        raise
    return code
