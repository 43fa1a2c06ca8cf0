"""`Mutex` and `mutex()`: acquiring, holding and releasing; see the package docstring."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypedDict, Unpack

import anyio

from ..._checks import check_timeout
from ..._records import load_text
from ...errors import (
    ConnectionLostError,
    LockNotAcquired,
)
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import join
from .._participant import Participant
from .._queue import (
    KAZOO_LOCK,
    KAZOO_WRITE,
    LOCK,
    CuratorNames,
    KazooNames,
    Rule,
    Waiter,
    first,
    read_queue,
)
from .._task_turns import TaskTurns
from .._tenure import Body
from ._hold import Contender, Hold
from ._revoke import Revocable

__all__ = ("Mutex", "MutexOptions", "MutexParticipant", "Participant", "mutex")

log = logging.getLogger("aiocoord.recipes.mutex")

# The tasks that hold, or wait for, each lock path of each client: a task that asks
# again for a lock it holds gets an error rather than waiting for itself forever.
_busy: weakref.WeakKeyDictionary[ZkClient, dict[str, set[asyncio.Task[Any]]]] = (
    weakref.WeakKeyDictionary()
)


MutexParticipant = Participant
"""The name `Participant` had for the lock family; kept for one release."""


class MutexOptions(TypedDict, total=False):
    """The keyword arguments of `Mutex` and `ReadWriteLock`, as their factories and the
    blocking façade forward them."""

    participant_id: str | None
    lose_on_suspend: bool | None
    timeout: float | None
    revocable: bool
    layout: str


class Mutex(Contender):
    """A fair lock at `path`, shared with Curator's ``InterProcessMutex``; see the package docstring.

    ``async with`` acquires (waiting as long as it takes, or `timeout`, then
    `LockNotAcquired`), runs the block while held, and releases; the block is
    cancelled when the lock is lost, then `LockLost` is raised.  It may be left
    from another task than the one that entered it.  `acquire()` / `release()`
    do the same without the cancellation: nothing is started in the background,
    so check `is_held`.  Not reentrant: a task that asks again for a lock it
    holds (through this or another `Mutex` of the same coordinator) gets
    `RuntimeError`.  Several tasks may share one `Mutex`: they take it in turn.

    `participant_id` (default ``<host>-<pid>``) is written in our node for
    `participants()`; `lose_on_suspend` not given keeps the lock through
    SUSPENDED while the session provably lives (until two thirds of the
    session timeout after the last answered request, or RECONNECTED), ``True``
    loses it at SUSPENDED (Curator's standard policy), ``False`` keeps it
    until LOST; `timeout` bounds the wait of ``async with`` (None:
    no bound).  ``revocable=True``: while ``async with`` holds the lock, a
    ``__REVOKE__`` written to our node (Curator's ``Revoker.attemptRevoke``,
    `aiocoord.revoke`) cancels the block, then `LockLost` (reason
    ``"revoked"``); without it the request is ignored.  ``layout="kazoo"``
    shares the lock with kazoo's ``Lock(path, identifier)`` instead: our node is
    ``<path>/<uuid4 hex>__lock__<seq>`` holding the participant id, in kazoo's
    order (see ``recipes/_queue/_kazoo``); the rest is the same.  Raises
    `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    # The queue this lock is a place in: Curator's node names, the "may I go" rule,
    # the name our node is created with (None: the layout's marker), and the recipe's
    # name in log lines and errors.  The read and write locks change these alone.
    _names: CuratorNames | KazooNames = LOCK
    _rule: Rule = staticmethod(first)
    _marker: str | None = None
    # The same for ``layout="kazoo"``: kazoo's ``Lock``.
    _kazoo_names: KazooNames = KAZOO_LOCK
    _kazoo_rule: Rule = staticmethod(first)
    _kazoo_marker: str = KAZOO_WRITE

    @staticmethod
    def _goes(names: Sequence[str], index: int) -> bool:
        """Whether the node at `index` of the queue holds the lock (for `participants`)."""
        return index == 0

    _kazoo_goes = _goes

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        participant_id: str | None = None,
        lose_on_suspend: bool | None = None,
        timeout: float | None = None,
        revocable: bool = False,
        layout: str = "curator",
    ) -> None:
        super().__init__(coord, path, participant_id, lose_on_suspend, timeout, layout)
        if self._layout == "kazoo":
            self._names = self._kazoo_names
            self._rule = self._kazoo_rule
            self._marker = self._kazoo_marker
        if not isinstance(revocable, bool):
            raise TypeError(f"revocable must be a bool, not {type(revocable).__name__}")
        self._revocable = revocable
        self._revocation: Revocable | None = None
        self._turns = TaskTurns()  # the tasks sharing this Mutex take it in turn
        self._ticket: Waiter | None = None  # our node, while waiting or holding
        self._hold: Hold | None = None
        self._task: asyncio.Task[Any] | None = None  # the task that acquired it
        self._body: Body | None = None

    # --- state -------------------------------------------------------------------------------

    @property
    def token(self) -> int | None:
        """The fencing token while held: our node's czxid, larger for every later holder."""
        return self._hold.token if self._hold is not None else None

    @property
    def node(self) -> str | None:
        """Our node's path while waiting or holding."""
        node = self._ticket.node if self._ticket is not None else None
        return node.path if node is not None else None

    @property
    def lost(self) -> str | None:
        """Why the current hold was lost (``async with`` only), else None."""
        return self._hold.lost if self._hold is not None else None

    @property
    def is_held(self) -> bool:
        """Whether the lock is ours right now (cheap: no request).

        Acquired and not released; not lost; connected on the session that
        created our node (or, with ``lose_on_suspend=False``, not LOST).
        """
        hold = self._hold
        return hold is not None and hold.held_on(self._coord, self._lose_on_suspend)

    def __repr__(self) -> str:
        ticket, hold = self._ticket, self._hold
        if hold is not None:
            if self.is_held:
                state = f"HELD token=0x{hold.token:x}"
            else:
                now = self._coord.state
                state = f"LOST ({hold.lost or (now.value if now is not None else 'closed')})"
        elif ticket is not None:
            behind = f" behind {ticket.predecessor}" if ticket.predecessor else ""
            state = f"WAITING{behind}"
        else:
            state = "FREE"
        return f"<{type(self).__name__} {self._path} id={self._id} {state}>"

    # --- acquiring and releasing -------------------------------------------------------------

    async def acquire(self, timeout: float | None = None) -> bool:
        """Wait for the lock; True once held, False if `timeout` seconds passed first.

        Joins the queue at the tail and waits for every node ahead to go (FIFO).
        ``timeout=0`` takes it only if nobody holds or waits for it.  Cancelled
        (or timed out) while waiting, it deletes our node before returning.
        Connection losses are ridden out (a new session joins again at the
        tail).  Raises `RuntimeError` if this task already holds or waits for
        the lock, `CoordinatorClosedError` if the coordinator is not open.
        """
        seconds = check_timeout(timeout)
        self._check_open()
        task = self._claim()
        acquired = False
        try:
            acquired = await self._acquire(
                None if seconds is None else anyio.current_time() + seconds
            )
        finally:
            if acquired:
                self._task = task
            else:
                self._unclaim(task)
        return acquired

    async def _acquire(self, deadline: float | None) -> bool:
        if not await self._turns.take(deadline=deadline):
            return False
        ticket = Waiter(
            self._coord,
            self._path,
            self._data,
            self._names,
            self._rule,
            recipe=self._recipe,
            name=self._marker,
        )
        self._ticket = ticket
        granted = False
        try:
            granted = await ticket.wait_turn(deadline)
        finally:
            if not granted:
                self._ticket = None
                await self._withdraw(ticket)
                self._turns.end()
        if not granted:
            return False
        assert ticket.node is not None
        self._hold = hold = Hold(ticket.node, self._path, self._recipe)
        log.info(
            "%s %s acquired by %s (token 0x%x)", self._recipe, self._path, self._id, hold.token
        )
        return True

    async def release(self) -> None:
        """Release the lock: delete our node, shielded, across a reconnect if need be.

        Any task may release it.  Raises `RuntimeError` if it is not held,
        `ConnectionLostError` if the node could not be deleted within the
        request timeout: a chore of the session then deletes it once the
        connection is back.  The `Mutex` is free for the next `acquire()`
        either way.
        """
        ticket, hold, task = self._ticket, self._hold, self._task
        if ticket is None or hold is None:
            raise RuntimeError(f"{self!r} is not held")
        self._ticket = self._hold = self._task = None
        hold.end("released")
        hold.drop()
        try:
            deleted = await self._withdraw(ticket)
        finally:
            if task is not None:
                self._unclaim(task)
            self._turns.end()
        if not deleted:
            raise ConnectionLostError(
                f"{self._recipe} {self._path}: our node is not deleted yet (it will be once connected)"
            )
        log.debug("%s %s released by %s", self._recipe, self._path, self._id)

    async def _withdraw(self, ticket: Waiter) -> bool:
        """Delete our node, shielded and bounded by the request timeout; False if that
        could not be done in time (a chore of the session finishes it)."""
        with anyio.CancelScope(shield=True):
            done = await ticket.leave()
        return done

    # --- async with --------------------------------------------------------------------------

    async def __aenter__(self) -> Mutex:
        """Acquire (within `timeout`, else `LockNotAcquired`) and run the block while held."""
        self._check_open()
        if not await self.acquire(self._timeout):
            raise LockNotAcquired(self._path)
        hold, ticket = self._hold, self._ticket
        assert hold is not None and ticket is not None
        hold.keep(self._client, lose_on_suspend=self._lose_on_suspend)
        if self._revocable:
            self._revocation = Revocable(self._client, hold)
            await self._revocation.arm()
        body = await hold.tenure.enter()
        self._body = body
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Release; raises `LockLost` (after the block) if the lock was lost meanwhile."""
        body, hold = self._body, self._hold
        self._body = None
        try:
            return await body.__aexit__(exc_type, exc, tb) if body is not None else False
        finally:
            if hold is not None:
                hold.drop()
            if self._revocation is not None:
                self._revocation.stop()
                self._revocation = None
            try:
                if self._hold is not None:
                    await self.release()
            except ConnectionLostError as error:
                log.warning("%s", error)

    # --- observing ---------------------------------------------------------------------------

    async def participants(self) -> list[Participant]:
        """Holder and waiters in queue order, the holder first, without joining.

        One read per node, pipelined; nodes that vanish while read are skipped; a
        path that does not exist has none.  `NodeDataError` if a node's data is
        not UTF-8 text.  A Curator process's id is what it wrote: its IP address.
        """
        nodes = await read_queue(self._client, self._path, self._names)
        names = [n for n, _ in nodes]
        goes = self._kazoo_goes if self._layout == "kazoo" else self._goes
        return [
            Participant(
                load_text(join(self._path, n), node.data, "participant id"),
                goes(names, i),
                n,
            )
            for i, (n, node) in enumerate(nodes)
        ]

    # --- helpers -----------------------------------------------------------------------------

    def _claim(self) -> asyncio.Task[Any]:
        task = asyncio.current_task()
        assert task is not None
        tasks = _busy.setdefault(self._client, {}).setdefault(self._path, set())
        if task in tasks:
            raise RuntimeError(
                f"this task already holds or waits for {self._recipe} {self._path}: "
                f"{type(self).__name__} is not reentrant (release it first)"
            )
        tasks.add(task)
        return task

    def _unclaim(self, task: asyncio.Task[Any]) -> None:
        per_path = _busy.get(self._client, {})
        tasks = per_path.get(self._path)
        if tasks is not None:
            tasks.discard(task)
            if not tasks:
                del per_path[self._path]


def mutex(coord: Coordinator, path: str, **options: Unpack[MutexOptions]) -> Mutex:
    """A `Mutex` to use as ``async with mutex(coord, path, participant_id=...) as held``.

    Entering waits for the lock (at most `timeout` seconds, then
    `LockNotAcquired`); ``held.token`` is the fencing token.  The block is
    cancelled when the lock is lost (SUSPENDED past the session's provable
    life, or at once with ``lose_on_suspend=True``; LOST, a new session), and
    `LockLost` is raised once it has exited.  Leaving releases the lock.
    ``layout="kazoo"`` shares it with kazoo's ``Lock`` on the same path.  See
    `Mutex` for the arguments.
    """
    return Mutex(coord, path, **options)
