"""``aiocoord acl get|set PATH``: read or replace a node's ACL.

Entries are written as ZooKeeper's own command line writes them,
``scheme:id:perms`` with the permissions as letters of ``cdrwa`` (create,
delete, read, write, admin): ``world:anyone:r``, ``sasl:alice:cdrwa``,
``digest:alice:<base64 sha1>:cdrwa``, ``ip:10.0.0.0/8:r``, ``auth::cdrwa``.
The id is what lies between the first and the last colon, so a digest id
keeps its own colon.  The credentials are the ones in ``AIOCOORD_*`` (digest
``AIOCOORD_AUTH``, SASL ``AIOCOORD_SASL_*``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import BadVersionError, ZooKeeperError
from ..zk import ACL
from ._connect import add_connection_args, checked_path, connected, settings_of
from ._run import run_async
from .zk import UserError

__all__ = ("add_parser", "format_entry", "parse_entry")

_INVALID_ACL = -114
# In the order ZooKeeper's documentation writes them ("cdrwa").
_LETTERS = (
    ("c", ACL.CREATE),
    ("d", ACL.DELETE),
    ("r", ACL.READ),
    ("w", ACL.WRITE),
    ("a", ACL.ADMIN),
)


def format_entry(entry: ACL) -> str:
    """``scheme:id:perms`` for an entry (perms as letters of ``cdrwa``)."""
    letters = "".join(letter for letter, bit in _LETTERS if entry.perms & bit)
    return f"{entry.scheme}:{entry.id}:{letters}"


def parse_entry(text: str) -> ACL:
    """An entry from ``scheme:id:perms``; `UserError` saying what is wrong with `text`."""
    scheme, sep, rest = text.partition(":")
    ident, sep2, letters = rest.rpartition(":")
    if not sep or not sep2 or not scheme:
        raise UserError(f"ACL entry {text!r} is not 'scheme:id:perms' (such as world:anyone:r)")
    perms = 0
    bits = dict(_LETTERS)
    for letter in letters:
        if letter not in bits:
            raise UserError(f"ACL entry {text!r}: unknown permission {letter!r} (use cdrwa)")
        perms |= bits[letter]
    if not perms:
        raise UserError(f"ACL entry {text!r} grants nothing (give permissions from cdrwa)")
    return ACL(perms, scheme, ident)


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the ``acl`` subcommand on `sub`."""
    acl = sub.add_parser(
        "acl",
        help="read or replace a node's ACL",
        description=(
            "Read (get) or replace (set) the ACL of PATH. Entries are 'scheme:id:perms' with "
            "perms from cdrwa (create, delete, read, write, admin), as in ZooKeeper's own CLI: "
            "world:anyone:r, sasl:alice:cdrwa, digest:alice:<hash>:cdrwa, ip:10.0.0.0/8:r. "
            "Credentials come from AIOCOORD_AUTH or AIOCOORD_SASL_*."
        ),
    )
    acl.add_argument("action", choices=("get", "set"), help="get: print it; set: replace it")
    acl.add_argument("path", help="a ZooKeeper path")
    acl.add_argument("entries", nargs="*", metavar="ENTRY", help="for set: the new entries")
    acl.add_argument(
        "--version",
        type=int,
        default=-1,
        help="for set: the ACL version (aversion) it must have, else it fails (default: any)",
    )
    add_connection_args(acl)
    acl.set_defaults(func=run_acl)


def run_acl(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status (errors are one-line `UserError`s)."""
    checked_path(args.path, allow_reserved=True)
    if args.action == "get" and args.entries:
        raise UserError("'acl get' takes no entries (did you mean 'acl set'?)")
    if args.action == "set" and not args.entries:
        raise UserError("'acl set' needs at least one ENTRY such as world:anyone:r")
    entries = [parse_entry(text) for text in args.entries]
    if args.version < -1:
        raise UserError("--version must be -1 (any) or more")
    settings = settings_of(args)
    no_node = f"{args.path} does not exist on {settings.hosts}"
    need = "ADMIN" if args.action == "set" else "READ or ADMIN"
    no_auth = (
        f"no access to the ACL of {args.path} on {settings.hosts}: it needs {need} "
        "(set AIOCOORD_AUTH or AIOCOORD_SASL_* to an identity its ACL allows)"
    )

    async def run() -> tuple[list[ACL], int]:
        async with connected(settings, args.timeout, no_node=no_node, no_auth=no_auth) as coord:
            try:
                if args.action == "set":
                    await coord.client.set_acl(args.path, entries, args.version)
                acl, stat = await coord.client.get_acl(args.path)
            except BadVersionError:
                raise UserError(
                    f"the ACL of {args.path} is no longer at version {args.version}: read it again"
                ) from None
            except ZooKeeperError as exc:
                if exc.code != _INVALID_ACL:
                    raise
                raise UserError(
                    f"{exc}: the server refuses these entries (a scheme it has no provider for, "
                    "such as sasl on a server without SASL, or auth on a session without "
                    "credentials)"
                ) from None
            return acl, stat.aversion

    acl, version = run_async(run, args.loop)
    if args.json:
        shown = [
            {"scheme": e.scheme, "id": e.id, "perms": format_entry(e).rsplit(":", 1)[1]}
            for e in acl
        ]
        print(json.dumps({"path": args.path, "aversion": version, "acl": shown}, indent=2))
    else:
        for entry in acl:
            print(format_entry(entry))
        print(f"(ACL version {version})")
    return 0
