"""A read-only look at a CAS lock's record: owner, lease left, fencing token, last run.

For tools that watch a cluster rather than contend (``aiocoord inspect``,
dashboards): `describe_lock` reads the lock node and returns a `LockView`;
`lock_view` does the same from bytes already read; `is_lock_record` tells
whether a node's data is a lock record at all.  Nothing here writes.

Whether the lock is held is judged as a contender would: by the reader's wall
clock against the lease the holder wrote, plus the `skew` allowance.

    view = await describe_lock(coord, "/app/locks/report")
    view.held, view.owner, view.lease_left, view.last_run
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from ...errors import NoNodeError
from ...session import Coordinator
from ...zk import ZkClient
from .._describe import client_of
from ._record import RunInfo, decode, status_of, to_datetime

__all__ = ("LockRun", "LockView", "describe_lock", "is_lock_record", "lock_view")


@dataclass(frozen=True, slots=True)
class LockRun:
    """One recorded run of a ``once_per`` job: the `window` it ran for, when it ended (`at`),
    who ran it with which `token`, and the `error` of a failed run (None for a success)."""

    window: datetime
    at: datetime
    owner: str
    token: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LockView:
    """The lock at `path`.

    `held` means a live lease as judged by the reader's clock; `owner` is the
    holder's name (the last holder's once free); `token` the current or last
    fencing token.  `lease_expires` and `lease_left` (seconds, never below 0)
    are set while the record says held, even when the lease has run out.
    """

    path: str
    held: bool
    owner: str | None
    token: int | None
    lease_expires: datetime | None
    lease_left: float | None
    last_run: LockRun | None
    last_failure: LockRun | None


def is_lock_record(data: bytes) -> bool:
    """Whether `data` looks like a CAS lock record (of any format version)."""
    return data.startswith(b"{") and b'"aiocoord.cas-lock/' in data


def _run(info: RunInfo | None) -> LockRun | None:
    if info is None:
        return None
    window, at = to_datetime(info.window), to_datetime(info.at)
    assert window is not None and at is not None
    return LockRun(window, at, info.owner, info.token, info.error)


def lock_view(
    path: str, data: bytes, mzxid: int, *, now: float | None = None, skew: float = 0.0
) -> LockView:
    """The `LockView` of the lock record `data`, whose node was last written at `mzxid`.

    `now` is the reader's wall clock (default: now).  Empty data reads as a free
    lock with no history; anything else that is not a record of a format this
    version reads raises `NodeDataError`.
    """
    now = time.time() if now is None else now
    record = decode(path, data)
    status = status_of(record, mzxid, now=now, skew=skew)
    expires = record.lease_expires if record is not None and record.held else None
    return LockView(
        path=path,
        held=status.held,
        owner=status.owner,
        token=status.token,
        lease_expires=to_datetime(expires),
        lease_left=None if expires is None else max(0.0, expires - now),
        last_run=_run(record.last_run if record is not None else None),
        last_failure=_run(record.last_failure if record is not None else None),
    )


async def describe_lock(
    target: Coordinator | ZkClient, path: str, *, skew: float = 0.0
) -> LockView:
    """Read the lock at `path`; a missing node reads as a free lock with no history.

    Raises `NodeDataError` if the node holds something other than a lock record.
    """
    client = client_of(target)
    try:
        node = await client.get(path)
    except NoNodeError:
        return lock_view(path, b"", 0, skew=skew)
    return lock_view(path, node.data, node.stat.mzxid, skew=skew)
