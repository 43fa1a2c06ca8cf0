"""``aiocoord lock revoke PATH``: ask the holder of a lock to let go (Curator's ``Revoker``).

Writes ``__REVOKE__`` to the holder's node of the mutex or read/write lock at
PATH (every holding reader, or the writer), or to the one lock node PATH
names; a holder made revocable (``revocable=True``, Curator's
``makeRevocable``) ends its hold, others ignore it.  Prints the nodes written.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ._connect import add_connection_args, checked_path, connected, settings_of
from ._run import run_async

__all__ = ("add_parser",)


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the ``lock`` subcommand and its actions on `sub`."""
    lock = sub.add_parser(
        "lock",
        help="act on a mutex or read/write lock: revoke its holder",
        description=(
            "'revoke PATH' writes __REVOKE__ to the holder's node of the lock at PATH (or to "
            "the lock node PATH), as Curator's Revoker.attemptRevoke does: a revocable holder "
            "(aiocoord's revocable=True, Curator's makeRevocable) lets go, others ignore it."
        ),
    )
    actions = lock.add_subparsers(dest="action", required=True, metavar="ACTION")
    revoke = actions.add_parser("revoke", help="ask the holder of the lock at PATH to let go")
    revoke.add_argument("path", help="the lock's path, or one lock node's path")
    add_connection_args(revoke)
    revoke.set_defaults(func=_cmd_revoke)


def _cmd_revoke(args: argparse.Namespace) -> int:
    from ..recipes.mutex import revoke

    checked_path(args.path)
    settings = settings_of(args)
    no_auth = (
        f"{args.path} on {settings.hosts} is not writable with these credentials "
        "(set AIOCOORD_AUTH to those that created it)"
    )

    async def run() -> list[str]:
        async with connected(settings, args.timeout, no_auth=no_auth) as coord:
            return await revoke(coord, args.path)

    written = run_async(run, args.loop)
    if args.json:
        print(json.dumps({"path": args.path, "revoked": written}))
    elif written:
        print("\n".join(f"revoke requested: {node}" for node in written))
    else:
        print(f"{args.path}: no holder to revoke")
    return 0
