"""The embedded development ZooKeeper as the commands and scripts see it.

`aiocoord.server` runs the server (one per user, found from any directory);
this module turns its failures into `UserError` and chooses which ZooKeeper a
command talks to.  `local_zookeeper()` is what the demo and the examples use:
the servers named by ``AIOCOORD_HOSTS`` if set, else the embedded server if
it runs, else one started for the duration of the block.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from ..server import (
    EmbeddedServer,
    EmbeddedServerError,
    ZooKeeperProcess,
    default_dir,
    find_by_port,
    find_running,
    is_embedded_default,
    read_state,
    start_embedded,
)
from ..server import embedded_status as server_status
from ..server import stop_embedded as stop_server
from ..settings import Settings

__all__ = (
    "EmbeddedServer",
    "UserError",
    "default_dir",
    "find_by_port",
    "find_running",
    "is_embedded_default",
    "local_zookeeper",
    "resolve_hosts",
    "server_status",
    "start_server",
    "stop_server",
)


class UserError(Exception):
    """A problem the user can fix; the command prints its message on one line and exits 1."""


def start_server(
    directory: Path | None = None,
    *,
    port: int | None = None,
    timeout: float = 30.0,
    any_port: bool = True,
) -> tuple[EmbeddedServer, ZooKeeperProcess | None]:
    """`aiocoord.server.start_embedded`, raising `UserError` when it cannot start; blocks."""
    try:
        return start_embedded(directory, port=port, timeout=timeout, any_port=any_port)
    except EmbeddedServerError as exc:
        raise UserError(str(exc)) from None


def resolve_hosts(hosts: str | None = None, directory: Path | None = None) -> Settings:
    """Settings for a command that needs a server: `hosts`, else ``AIOCOORD_*``, else embedded.

    ``AIOCOORD_HOSTS`` (or a ``.env`` file) wins over the embedded server; with
    neither, the embedded server's port is used when it runs, else Settings'
    default (127.0.0.1:2181).
    """
    if hosts is not None:
        return Settings.build(hosts)
    settings = Settings()
    if "hosts" in settings.model_fields_set:
        return settings
    # One of ours on another folder listens on 2181, which the default reaches anyway.
    running = read_state(default_dir() if directory is None else directory)
    if running is not None:
        return Settings.build(settings, hosts=running.connect_string)
    return settings


@contextlib.contextmanager
def local_zookeeper(directory: Path | None = None, *, quiet: bool = False) -> Iterator[Settings]:
    """Settings for a ZooKeeper to use now: ``AIOCOORD_HOSTS``, the embedded one, or a new one.

    When ``AIOCOORD_HOSTS`` is set (environment or ``.env``), those servers
    are used as they are.  Otherwise the user's embedded server (``aiocoord zk
    start``, in `directory` or the per-user folder) is used if it runs; if not,
    one is started there for the duration of the block, on 2181 or a free port,
    and stopped afterwards (a line on stderr says so unless `quiet`).  Entering
    blocks until the server answers; leaving blocks until a server started
    here has stopped.  Raises `UserError` when it cannot be started.
    """
    settings = Settings()
    if "hosts" in settings.model_fields_set:
        yield settings
        return
    server, proc = start_server(directory)
    if proc is None:
        yield Settings.build(settings, hosts=server.connect_string)
        return
    if not quiet:
        print(
            f"aiocoord: started the embedded ZooKeeper at {server.connect_string} "
            f"(data in {server.directory}); it stops when this program ends",
            file=sys.stderr,
            flush=True,
        )
    try:
        yield Settings.build(settings, hosts=server.connect_string)
    finally:
        stop_server(server.directory, proc=proc)
