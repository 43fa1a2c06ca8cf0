"""How a command reaches ZooKeeper: its flags, its settings, its one-line errors.

A command that talks to a server takes ``--hosts`` (else ``AIOCOORD_HOSTS``,
else the embedded server), ``--timeout`` (seconds to connect), most take
``--json``, and all a hidden ``--dir`` (the embedded server's folder).  What
goes wrong on the way is a `UserError`: one line, exit status 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InvalidPathError
from ..settings import Settings
from ..zk.paths import validate_path
from .zk import UserError, is_embedded_default, resolve_hosts

__all__ = ("add_connection_args", "checked_path", "embedded_dir", "settings_of", "unreachable")


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
