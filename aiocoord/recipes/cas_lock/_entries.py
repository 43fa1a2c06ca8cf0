"""`cas_lock()` and `once_per()`: the entries applications use, over `CasLock`; see the package docstring."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TypedDict, Unpack

from ..._checks import check_blocking
from ...errors import ConfigError
from ...session import Coordinator
from ._hold import Slot, run_once
from ._lock import CasLock
from ._record import check_interval

__all__ = ("CasLockOptions", "OncePerOptions", "Slot", "cas_lock", "once_per")


class OncePerOptions(TypedDict, total=False):
    """`once_per()`'s keyword arguments: the lock's, but for `timeout` (it never waits)."""

    owner: str | None
    lease: float
    skew: float | None


class CasLockOptions(OncePerOptions, total=False):
    """`CasLock`'s keyword arguments, as `cas_lock()` and the blocking façade forward them."""

    timeout: float | None


def cas_lock(
    coord: Coordinator, path: str, *, blocking: bool = True, **options: Unpack[CasLockOptions]
) -> CasLock:
    """A `CasLock` to use as ``async with cas_lock(coord, path, owner=..., lease=...) as lock``.

    Entering waits for the lock (at most `timeout` seconds, then
    `LockNotAcquired`; ``blocking=False`` is ``timeout=0``), the block runs
    with the lease renewed, and leaving releases it: see `CasLock.hold`.
    Arguments are checked here: `lease` must be positive, `skew` (default
    min(1 s, lease/10)) below lease/2, and ``blocking=False`` takes no
    `timeout`; bad ones raise `ConfigError`/`TypeError` naming the argument.
    """
    seconds = check_blocking(blocking, options.get("timeout"))
    if "timeout" in options or not blocking:
        options["timeout"] = seconds
    return CasLock(coord, path, **options)


def once_per(
    coord: Coordinator,
    path: str,
    interval: float,
    **options: Unpack[OncePerOptions],
) -> AbstractAsyncContextManager[Slot]:
    """Run a job at most once per schedule slot across the fleet: check ``slot.acquired``.

    Slots are ``[k*interval, (k+1)*interval)`` on the wall clock since the
    epoch, so every pod names the same window whenever it wakes; a pod whose
    clock is off by d can start a window at most d early and never runs a
    window already recorded.  Entering never waits: `acquired` is False when
    the window already has a successful run or a live holder is running it.

    Policy: a successful body (no exception) records the run in the same CAS
    write that releases the lock.  A body that raises (or is cancelled)
    records the failure and releases, so a later caller in the same window may
    retry; a holder that crashes leaves the lease, and a caller after its
    expiry may retry.  Only successful runs close the window.  While the body
    runs, the lock behaves as in `cas_lock()` (renewed; cancelled with
    `LockLost` when lost).  If the successful run cannot be recorded, the exit
    raises (`ConnectionLostError` or `LockLost`): the window may run again.
    `owner`, `lease` and `skew` are the lock's (see `CasLock`); a `timeout`
    raises `ConfigError` naming it.
    """
    interval = check_interval(interval)
    if "timeout" in options:
        raise ConfigError("timeout", "once_per never waits for the lock, so it takes no timeout")
    lock = CasLock(coord, path, **options)
    return run_once(lock._try_window, lock._lease, lock.owner, lambda: lock.token, interval)
