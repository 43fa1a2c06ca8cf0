"""A conditional write whose reply may be lost: its outcome learnt by reading the node back.

The CAS lock's record and a cron job's record are written this way.  A
``setData`` on `version` whose reply is lost (`ConnectionLostError`) is never
assumed to have failed: the node is read back, and our exact bytes at
``version + 1`` mean it landed; the old version means it did not (`cas_write`
sends it up to `WRITE_ATTEMPTS` times; a caller that sent it once itself
before, as the CAS lock's watched write does, adds that one); anything else,
no node included, is a lost CAS.
"""

from __future__ import annotations

import logging

from ..errors import BadVersionError, ConnectionLostError, NoNodeError
from ..zk import Stat, ZkClient

__all__ = ("RESEND", "WRITE_ATTEMPTS", "Resend", "cas_write", "read_back")

WRITE_ATTEMPTS = 3  # `cas_write`'s sends of a write whose replies are lost and that did not land


class Resend:
    """`read_back`'s answer when the write did not land and the version is unchanged."""


RESEND = Resend()


async def read_back(client: ZkClient, path: str, data: bytes, version: int) -> Stat | Resend | None:
    """After a write of `data` on `version` with a lost reply: its stat if it landed, None
    if another write won (or the node is gone), `RESEND` if it did not land.

    Blocks for one read; raises `ConnectionLostError` if that cannot be done either.
    """
    try:
        node = await client.get(path)
    except NoNodeError:
        return None
    if node.stat.version == version + 1 and node.data == data:
        return node.stat
    if node.stat.version != version:
        return None
    return RESEND


async def cas_write(
    client: ZkClient, path: str, data: bytes, version: int, *, log: logging.Logger, recipe: str
) -> Stat | None:
    """``setData`` of `data` on `path` conditional on `version`; None when the CAS lost.

    A lost reply is resolved as the module docstring says (logged at DEBUG on
    `log`, naming `recipe`).  Raises `ConnectionLostError` if the connection
    keeps dropping.
    """
    for _ in range(WRITE_ATTEMPTS):
        try:
            return await client.set(path, data, version=version)
        except (BadVersionError, NoNodeError):
            return None
        except ConnectionLostError as exc:
            log.debug("%s %s: write interrupted (%s); reading it back", recipe, path, exc)
        outcome = await read_back(client, path, data, version)
        if not isinstance(outcome, Resend):
            return outcome
    raise ConnectionLostError(f"could not write {path}: the connection keeps dropping")
