"""The locks from threads: mutex, semaphore, read/write lock, CAS lock, once-per slot.

Each is a `Right` over the async recipe (``aiocoord.mutex`` and its kin): the
async object is built in the loop for each hold, and once when the blocking
one is made, so that bad arguments fail at the call, naming the argument.
The async recipes refuse a task that asks again for a lock it holds; here a
*thread* is refused the same way (`RuntimeError`), since it would wait for
itself forever: each of its holds is a task of its own in the loop.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import cast

from ..errors import LockLost
from ..recipes.cas_lock import CasLock, Slot
from ..recipes.mutex import Lease, Mutex, Participant, ReadWriteLock, Semaphore
from ._held import Held
from ._loop import Loop
from ._right import Right

__all__ = (
    "Claims",
    "MutexRight",
    "ReadWriteLockRight",
    "SemaphoreRight",
    "SlotHeld",
    "SlotRight",
    "cas_right",
    "slot_right",
)


class Claims:
    """Which threads hold or wait for which locks of one coordinator (for `Right`'s `claim`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: dict[tuple[str, str], Counter[int]] = {}

    def claim(self, kind: str, path: str, most: int, what: str) -> Callable[[], None]:
        """Count one more hold of (`kind`, `path`) by this thread; `RuntimeError` past `most`."""
        me = threading.get_ident()
        key = (kind, path)
        with self._lock:
            counts = self._taken.setdefault(key, Counter())
            if counts[me] >= most:
                raise RuntimeError(
                    f"this thread already holds or waits for {what} {path}: it would wait for "
                    "itself forever (release it first; each thread takes its own)"
                )
            counts[me] += 1

        def unclaim() -> None:
            with self._lock:
                counts = self._taken.get(key)
                if counts is not None:
                    counts[me] -= 1
                    if counts[me] <= 0:
                        del counts[me]
                    if not counts:
                        del self._taken[key]

        return unclaim


class MutexRight(Right[Mutex]):
    """A mutex for threads: ``with coord.mutex(path) as held`` (see `aiocoord.Mutex`).

    Entering blocks until the lock is ours (within the mutex's `timeout`,
    else `LockNotAcquired`); ``held.token`` is the fencing token, ``held.lost``
    is set the moment the lock is lost and ``held.check()`` raises `LockLost`
    from then on; leaving releases it (and raises `LockLost` if it was lost).
    A thread holding (or waiting for) it that asks again gets `RuntimeError`.
    """

    def __init__(
        self, loop: Loop, claims: Claims, build: Callable[[], Mutex], *, what: str = "mutex"
    ) -> None:
        self._observer = loop.call(build, what=what)  # checks the arguments here
        path = self._observer.path
        super().__init__(
            loop,
            build,
            path=path,
            error=LockLost,
            token=lambda m: m.token,
            reason=lambda m: m.lost,
            claim=lambda: claims.claim("lock", path, 1, what),
            what=what,
        )

    def participants(self) -> list[Participant]:
        """Holder and waiters in queue order, the holder first (see `Mutex.participants`)."""
        return self._loop.call(self._observer.participants, what="participants()")


class SemaphoreRight(Right[Lease]):
    """A semaphore for threads: ``with coord.semaphore(path, max_leases=N) as held``.

    At most `max_leases` holders across every process (see `aiocoord.Semaphore`);
    entering blocks until a lease is ours (within `timeout`, else
    `LockNotAcquired`).  ``held.lost`` / ``held.check()`` as for the mutex.
    A thread that would need more than `max_leases` leases at once gets `RuntimeError`.
    """

    def __init__(self, loop: Loop, claims: Claims, build: Callable[[], Semaphore]) -> None:
        self._observer = loop.call(build, what="semaphore")
        path, most = self._observer.path, self._observer.max_leases
        super().__init__(
            loop,
            build,
            path=path,
            error=LockLost,
            token=lambda lease: lease.token,
            reason=lambda lease: lease.lost,
            claim=lambda: claims.claim("semaphore", path, most, "max_leases leases of semaphore"),
            what="semaphore",
        )

    @property
    def max_leases(self) -> int:
        return self._observer.max_leases

    def participants(self) -> list[Participant]:
        """The current holders, in lease order (see `Semaphore.participants`)."""
        return self._loop.call(self._observer.participants, what="participants()")


class ReadWriteLockRight:
    """A read/write lock for threads: ``with rw.read() as held``, ``with rw.write() as held``.

    Many readers at once, a writer alone (see `aiocoord.ReadWriteLock`); both
    behave as the mutex does (`LockNotAcquired` past `timeout`, ``held.lost``,
    ``held.check()``, `LockLost`).  A thread holding or waiting for either
    lock of the path gets `RuntimeError` if it asks for either again.
    """

    def __init__(self, loop: Loop, claims: Claims, build: Callable[[], ReadWriteLock]) -> None:
        self._loop = loop
        self._rw = loop.call(build, what="read_write_lock")
        self._read: MutexRight = MutexRight(loop, claims, self._rw.read, what="read lock")
        self._write: MutexRight = MutexRight(loop, claims, self._rw.write, what="write lock")

    @property
    def path(self) -> str:
        return self._rw.path

    def read(self) -> MutexRight:
        """The shared lock: ``with rw.read() as held``."""
        return self._read

    def write(self) -> MutexRight:
        """The exclusive lock: ``with rw.write() as held``."""
        return self._write

    def participants(self) -> list[Participant]:
        """Readers and writers in queue order (see `ReadWriteLock.participants`)."""
        return self._loop.call(self._rw.participants, what="participants()")

    def __repr__(self) -> str:
        return f"<blocking read/write lock {self.path}>"


def cas_right(loop: Loop, build: Callable[[], CasLock]) -> Right[CasLock]:
    """``with coord.cas_lock(path, ...) as held`` (see `aiocoord.cas_lock`)."""
    checked = loop.call(build, what="cas_lock")  # checks the arguments here
    return Right(
        loop,
        build,
        path=checked.path,
        error=LockLost,
        token=lambda lock: lock.token,
        what="CAS lock",
    )


def slot_right(
    loop: Loop, build: Callable[[], AbstractAsyncContextManager[Slot]], path: str
) -> SlotRight:
    """``with coord.once_per(path, interval) as held`` (see `aiocoord.once_per`)."""
    loop.call(build, what="once_per")  # checks the arguments (nothing runs until entered)
    return SlotRight(
        loop,
        build,
        path=path,
        error=LockLost,
        token=lambda slot: slot.token,
        held=SlotHeld,
        what="once_per slot",
    )


class SlotRight(Right[Slot]):
    """``with coord.once_per(path, interval) as slot``: a `Right` whose holds are `SlotHeld`."""

    def acquire(self) -> SlotHeld:
        return cast(SlotHeld, super().acquire())

    def __enter__(self) -> SlotHeld:
        return cast(SlotHeld, super().__enter__())


class SlotHeld(Held[Slot]):
    """What ``with coord.once_per(...) as slot`` gives: the `Slot`, and the hold's loss signal.

    `acquired` says whether this caller runs the job for this window (when
    False nothing is held: `lost` is never set); `window`, `last_run` as on
    `aiocoord.Slot`.  While the body runs, ``slot.lost`` / ``slot.check()``
    report the loss of the lock behind it, as for `cas_lock`.
    """

    __slots__ = ()

    @property
    def acquired(self) -> bool:
        return self.value.acquired

    @property
    def window(self) -> datetime:
        return self.value.window

    @property
    def last_run(self) -> datetime | None:
        return self.value.last_run
