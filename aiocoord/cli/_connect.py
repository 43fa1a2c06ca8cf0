"""How a command reaches ZooKeeper: its flags, its settings, its session, its one-line errors.

A command that talks to a server takes ``--hosts`` (else ``AIOCOORD_HOSTS``,
else the embedded server), ``--timeout`` (seconds to connect), most take
``--json``, and all a hidden ``--dir`` (the embedded server's folder).  What
goes wrong on the way is a `UserError`: one line, exit status 1.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConnectionLostError, InvalidPathError, NoAuthError, NoNodeError
from ..settings import Settings
from ..zk.paths import validate_path
from .zk import UserError, is_embedded_default, resolve_hosts

if TYPE_CHECKING:
    from ..session import Coordinator

__all__ = (
    "add_connection_args",
    "checked_path",
    "connected",
    "embedded_dir",
    "settings_of",
    "unreachable",
)


def add_connection_args(parser: argparse.ArgumentParser, *, json: bool = True) -> None:
    """Add ``--hosts``, ``--timeout``, ``--json`` (unless `json` is false) and the hidden ``--dir``."""
    parser.add_argument(
        "--hosts", default=None, help="ZooKeeper hosts (default: AIOCOORD_HOSTS or embedded)"
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="connect timeout, seconds")
    if json:
        parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("--dir", default=None, help=argparse.SUPPRESS)


def embedded_dir(args: argparse.Namespace) -> Path | None:
    """The folder of ``--dir``, else None: the embedded server's per-user one."""
    return Path(args.dir) if args.dir is not None else None


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings for ``--hosts`` and ``--dir`` (see `resolve_hosts`)."""
    return resolve_hosts(args.hosts, embedded_dir(args))


def unreachable(settings: Settings, timeout: float) -> UserError:
    """The error to raise when no server at `settings.hosts` answered within `timeout` seconds.

    Starting the embedded server helps only where the embedded server would listen.
    """
    hint = (
        "start one with 'aiocoord zk start', or set AIOCOORD_HOSTS / --hosts"
        if is_embedded_default(settings)
        else "check that it runs and that the host list is right"
    )
    return UserError(f"cannot reach ZooKeeper at {settings.hosts} within {timeout:g}s ({hint})")


def checked_path(text: str, flag: str = "path", *, allow_reserved: bool = False) -> str:
    """`text` as a valid ZooKeeper path, else a `UserError` naming `flag` and what is wrong."""
    try:
        return validate_path(text, allow_reserved=allow_reserved)
    except InvalidPathError as exc:
        raise UserError(f"invalid {flag} {text!r}: {exc.reason}") from None


@asynccontextmanager
async def connected(
    settings: Settings, timeout: float, *, no_node: str | None = None, no_auth: str | None = None
) -> AsyncIterator[Coordinator]:
    """A session (10 s timeout) for one command's work, its errors as one-line `UserError`s.

    Entering blocks until connected (at most `timeout` seconds); leaving closes
    the session.  A `ConnectionLostError`, on entering or in the block, is
    `unreachable`; a `NoNodeError` or a `NoAuthError` is a `UserError` saying
    `no_node` or `no_auth`, where given.
    Cancellation passes through.
    """
    from .. import connect

    try:
        async with connect(settings, session_timeout=10.0, connect_timeout=timeout) as coord:
            yield coord
    except ConnectionLostError:
        raise unreachable(settings, timeout) from None
    except NoNodeError:
        if no_node is None:
            raise
        raise UserError(no_node) from None
    except NoAuthError:
        if no_auth is None:
            raise
        raise UserError(no_auth) from None
