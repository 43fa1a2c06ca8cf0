"""`ReadWriteLock`: readers share, a writer is exclusive, on Curator's ``InterProcessReadWriteLock``.

Both locks are the mutex's queue with another "may I go" rule (``recipes/_queue``)::

    <path>/_c_<uuid4>-__READ__<seq>     a reader (rule `reader`: no writer ahead of it)
    <path>/_c_<uuid4>-__WRIT__<seq>     a writer (rule `first`: nobody ahead of it)

One queue, sorted on the sequence number after either marker, as Curator's
``SortingLockInternalsDriver`` does, so Java processes running Curator's
``InterProcessReadWriteLock`` on the same path share the lock.  A writer waits
for every node ahead of it and watches the one just ahead; a reader waits
only for the writers ahead of it and watches the nearest of them, so a reader
queued behind a writer waits for that writer (FIFO: writers do not starve).
The failure handling is the mutex's (see the package docstring).

Not reentrant, unlike Curator's: a task that holds either lock of a path and
asks for either again gets `RuntimeError` (no upgrade, no downgrade).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from ..._checks import check_coordinator
from ...session import Coordinator
from ...zk.paths import validate_path
from .._participant import Participant
from .._queue import (
    KAZOO_READ,
    KAZOO_READ_WRITE,
    KAZOO_WRITE,
    READ_WRITE,
    WRITE_MARKER,
    first,
    kazoo_reader,
    kazoo_writer,
    reader,
)
from ._mutex import Mutex, MutexOptions

__all__ = ("ReadLock", "ReadWriteLock", "WriteLock", "read_write_lock")


def _goes(names: Sequence[str], index: int) -> bool:
    """Whether the node at `index` holds its lock: a writer's rule or a reader's."""
    rule = first if WRITE_MARKER in names[index] else reader
    return rule(names, index) is None


def _kazoo_goes(names: Sequence[str], index: int) -> bool:
    """Which rule a node follows in kazoo's layout: a ``__lock__`` node is a writer's."""
    rule = first if kazoo_writer(names[index]) else kazoo_reader
    return rule(names, index) is None


class ReadLock(Mutex):
    """The shared half of a `ReadWriteLock`: a `Mutex` whose node is ``__READ__`` and that goes
    while no writer is ahead of it.  ``async with`` and `acquire()` work as the mutex's."""

    _names = READ_WRITE
    _rule = staticmethod(reader)
    _marker = "__READ__"
    _recipe = "read lock"
    _goes = staticmethod(_goes)
    _kazoo_names = KAZOO_READ_WRITE
    _kazoo_rule = staticmethod(kazoo_reader)
    _kazoo_marker = KAZOO_READ
    _kazoo_goes = staticmethod(_kazoo_goes)


class WriteLock(Mutex):
    """The exclusive half of a `ReadWriteLock`: a `Mutex` whose node is ``__WRIT__`` and that
    goes when nobody (reader or writer) is ahead of it."""

    _names = READ_WRITE
    _rule = staticmethod(first)
    _marker = "__WRIT__"
    _recipe = "write lock"
    _goes = staticmethod(_goes)
    _kazoo_names = KAZOO_READ_WRITE
    _kazoo_rule = staticmethod(first)
    _kazoo_marker = KAZOO_WRITE
    _kazoo_goes = staticmethod(_kazoo_goes)


class ReadWriteLock:
    """A read/write lock at `path`, shared with Curator's ``InterProcessReadWriteLock``.

    ``async with rw.read() as held`` waits until no writer is ahead of our node
    (many readers hold it at once); ``async with rw.write() as held`` waits
    until nobody is ahead.  ``held.token`` is the fencing token (our node's
    czxid).  The block is cancelled when the lock is lost (SUSPENDED past the
    session's provable life, or at once with ``lose_on_suspend=True``; LOST,
    a new session), then `LockLost` is raised
    once it has exited; entering past `timeout` raises `LockNotAcquired`.
    Not reentrant: a task holding or waiting for either lock of the path gets
    `RuntimeError` if it asks for either again.  ``revocable=True``: a block is
    cancelled when ``__REVOKE__`` is written to its node (`aiocoord.revoke`).
    ``layout="kazoo"`` shares the lock with kazoo's ``ReadLock`` / ``WriteLock``
    instead (``<uuid4 hex>__rlock__<seq>`` / ``__lock__<seq>`` in one queue,
    kazoo's order and rules: a kazoo plain ``Lock`` on the path is a writer to
    our readers, but does not wait for them).  The keyword arguments are the
    mutex's (`MutexOptions`: `participant_id`, `lose_on_suspend`, `timeout`,
    `revocable`, `layout`), each lock made with them.  Raises
    `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    def __init__(self, coord: Coordinator, path: str, **options: Unpack[MutexOptions]) -> None:
        check_coordinator(coord)
        validate_path(path)
        self._coord = coord
        self._path = path
        self._options = options
        self._write = self.write()  # checks the arguments once, here; also for participants()

    @property
    def path(self) -> str:
        return self._path

    def read(self) -> ReadLock:
        """The shared lock, for ``async with rw.read() as held``: a new `ReadLock` (each task
        that reads takes its own)."""
        return ReadLock(self._coord, self._path, **self._options)

    def write(self) -> WriteLock:
        """The exclusive lock, for ``async with rw.write() as held``: a new `WriteLock`."""
        return WriteLock(self._coord, self._path, **self._options)

    # The names these had before `read()` and `write()`; kept for one release.
    read_lock = read
    write_lock = write

    async def participants(self) -> list[Participant]:
        """Readers and writers in queue order, each saying whether it `holds` its lock now,
        without joining; one read per node, pipelined."""
        return await self._write.participants()

    def __repr__(self) -> str:
        return f"<ReadWriteLock {self._path}>"


def read_write_lock(
    coord: Coordinator, path: str, **options: Unpack[MutexOptions]
) -> ReadWriteLock:
    """A `ReadWriteLock` at `path`: ``async with read_write_lock(coord, path).read() as held``.

    Builds nothing on ZooKeeper until one of its locks is entered; see
    `ReadWriteLock` for the arguments (the mutex's).
    """
    return ReadWriteLock(coord, path, **options)
