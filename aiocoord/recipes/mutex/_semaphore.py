"""`Semaphore`: at most `max_leases` holders, on Curator's ``InterProcessSemaphoreV2``.

Node layout (Curator's; Java ``InterProcessSemaphoreV2`` processes with the same
`max_leases` share the leases)::

    <path>/locks/_c_<uuid4>-lock-<seq>     a mutex (the queue's LOCK) guarding the leases
    <path>/leases/_c_<uuid4>-lease-<seq>   one node per lease; data: participant id (UTF-8)

Acquiring is Curator's ``internalAcquire1Lease`` step for step: take the inner
mutex (the queue's `Waiter`, rule `first`), create our lease node, then list
the leases with a child watch until there are at most `max_leases` of them
(ours included), waking on every change of the listing; release the inner
mutex once the lease is ours, or on a timeout, an error or a cancellation
(then our lease node is deleted too).  Only the inner mutex's holder waits on
the leases, so the lease count is the holders plus at most that one waiter,
and leases go in the order the inner mutex is granted (FIFO).

Failure handling:

- The inner mutex is the queue's (protected create, owner check, one watch
  per waiter); the lease node is a protected create too, taken only on a
  listing that has at most `max_leases` nodes, while connected, on a node of
  the current session.  Through SUSPENDED a waiter keeps its place; on a new
  session both its nodes are gone and it joins the inner mutex again at the
  tail (Curator's ``RETRY_DUE_TO_MISSING_NODE``).
- While held with ``async with``, SUSPENDED past the session's provable life
  (the default; at once with ``lose_on_suspend=True``, never with ``False``),
  LOST and a new session lose the lease as they lose the mutex: the block is
  cancelled at once (the one tenure, ``recipes/_tenure``), then `LockLost`.
- Releasing deletes the lease node shielded, across a reconnect within the
  request timeout, then from a chore of the session.

``layout="kazoo"``: kazoo 2.x's ``Semaphore(path, identifier, max_leases)``,
step for step, so kazoo processes share the leases::

    <path>                              the lease pool, persistent; data: max_leases (ASCII)
    <path>/<uuid4 hex>                  one ephemeral node per lease; data: participant id
    <path>-__lock__/<uuid4 hex>__lock__<seq>   a kazoo Lock guarding the pool

The pool is created with `max_leases` as its data; a pool that holds another
number raises `ConfigError` (kazoo raises ``ValueError``), data that is not
a number is ignored, as in kazoo.  The guard's holder lists the pool with a
child watch and creates its lease node only while fewer than `max_leases`
are there (kazoo's ``_get_lease``), then leaves the guard.  The lease node is
found again by its name after a lost reply; the rest of the failure handling
is the same as above.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from types import TracebackType
from typing import Any, Required, TypedDict, Unpack

import anyio
import anyio.lowlevel

from ..._checks import check_int, check_timeout
from ..._records import load_text
from ...errors import (
    ConnectionLostError,
    LockNotAcquired,
    NoNodeError,
)
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import join
from .._participant import Participant
from .._queue import (
    KAZOO_LOCK,
    LEASE,
    LOCK,
    OurNode,
    Waiter,
    connected_by,
    fired_by,
    first,
    grantable,
    read_nodes,
    read_queue,
)
from .._tenure import Body
from ._hold import Contender, Hold
from ._kazoo_pool import ensure_pool, kazoo_lease

__all__ = ("Lease", "Semaphore", "SemaphoreOptions", "semaphore")

log = logging.getLogger("aiocoord.recipes.semaphore")

_RECIPE = "semaphore"

# The leases each task holds or waits for, per path and client: a task whose own leases
# would fill the semaphore gets an error rather than waiting for itself forever.
_taken: weakref.WeakKeyDictionary[ZkClient, dict[str, Counter[asyncio.Task[Any]]]] = (
    weakref.WeakKeyDictionary()
)


def _count(client: ZkClient, path: str) -> Counter[asyncio.Task[Any]]:
    return _taken.setdefault(client, {}).setdefault(path, Counter())


def _uncount(client: ZkClient, path: str, task: asyncio.Task[Any]) -> None:
    per_path = _taken.get(client, {})
    counts = per_path.get(path)
    if counts is not None:
        counts[task] -= 1
        if counts[task] <= 0:
            del counts[task]
        if not counts:
            del per_path[path]


class Lease:
    """One lease of a `Semaphore`, from its grant until `release()`.

    `token` is the fencing token (our lease node's czxid, larger for every
    later lease); `node` its path.  `lost` is None while the lease lasts (for
    the block of ``async with semaphore(...)``), then why it ended.
    """

    __slots__ = ("_coord", "_hold", "_lose_on_suspend", "_node", "_released", "_task", "semaphore")

    def __init__(
        self, semaphore: Semaphore, node: OurNode, hold: Hold, task: asyncio.Task[Any]
    ) -> None:
        self.semaphore = semaphore
        self._task = task  # the task that acquired it (see `_taken`)
        self._coord = semaphore._coord
        self._node = node
        self._hold = hold
        self._lose_on_suspend = semaphore._lose_on_suspend
        self._released = False

    @property
    def token(self) -> int:
        return self._hold.token

    @property
    def node(self) -> str:
        return self._hold.node.path

    @property
    def lost(self) -> str | None:
        return self._hold.lost

    @property
    def is_held(self) -> bool:
        """Whether the lease is ours right now (cheap: no request); see `Mutex.is_held`."""
        return not self._released and self._hold.held_on(self._coord, self._lose_on_suspend)

    async def release(self) -> None:
        """Give the lease back: delete its node, shielded, across a reconnect if need be.

        Releasing twice is a no-op.  Raises `ConnectionLostError` if the node
        could not be deleted within the request timeout: a chore of the session
        deletes it once the connection is back.
        """
        if self._released:
            return
        self._released = True
        self._hold.end("released")
        self._hold.drop()
        _uncount(self._coord.client, self.semaphore.path, self._task)
        with anyio.CancelScope(shield=True):
            deleted = await self._node.leave()
        if not deleted:
            raise ConnectionLostError(
                f"semaphore {self.semaphore.path}: our lease is not deleted yet "
                "(it will be once connected)"
            )
        log.debug("semaphore %s: lease 0x%x released", self.semaphore.path, self.token)

    def __repr__(self) -> str:
        state = "released" if self._released else "HELD" if self.is_held else "LOST"
        return f"<Lease {self.semaphore.path} token=0x{self.token:x} {state}>"


class Semaphore(Contender):
    """At most `max_leases` holders at `path`, shared with Curator's ``InterProcessSemaphoreV2``.

    `acquire()` returns a `Lease` (or None past its timeout); ``async with``
    acquires one (within `timeout`, else `LockNotAcquired`), runs the block
    while it is held, cancels the block when it is lost (then `LockLost`), and
    releases it.  Every process sharing the path must use the same
    `max_leases`, as with Curator.  Not reentrant: each acquisition is a lease
    of its own, and a task that would need more than `max_leases` at once gets
    `RuntimeError` instead of waiting for itself.  `participant_id` (default ``<host>-<pid>``) is written in our
    nodes; `lose_on_suspend` not given keeps a held lease through SUSPENDED
    while the session provably lives, ``True`` loses it at SUSPENDED, ``False``
    keeps it until LOST.  ``layout="kazoo"`` shares the leases with kazoo's
    ``Semaphore`` instead (see the module docstring; `ConfigError` from
    `acquire()` if the pool says another `max_leases`).  Raises
    `InvalidPathError`, `ConfigError` or `TypeError` for bad arguments.
    """

    _recipe = _RECIPE

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        max_leases: int,
        participant_id: str | None = None,
        lose_on_suspend: bool | None = None,
        timeout: float | None = None,
        layout: str = "curator",
    ) -> None:
        super().__init__(coord, path, participant_id, lose_on_suspend, timeout, layout)
        self._max = check_int("max_leases", max_leases, least=1)
        if self._layout == "kazoo":
            self._locks = f"{path}-__lock__"  # kazoo's Semaphore.lock_path
            self._leases = path
        else:
            self._locks = join(path, "locks")
            self._leases = join(path, "leases")
        # The leases of `async with` blocks, per task (a block is left by the task that entered).
        self._held: dict[asyncio.Task[Any], list[tuple[Lease, Body]]] = {}

    @property
    def max_leases(self) -> int:
        return self._max

    def __repr__(self) -> str:
        held = sum(len(leases) for leases in self._held.values())
        return f"<Semaphore {self._path} id={self._id} max_leases={self._max} blocks={held}>"

    # --- acquiring ---------------------------------------------------------------------------

    async def acquire(self, timeout: float | None = None) -> Lease | None:
        """Wait for a lease; the `Lease`, or None if `timeout` seconds passed first.

        Blocks while `max_leases` leases are held (and behind earlier waiters:
        FIFO).  ``timeout=0`` takes one only if the inner mutex is free and a
        lease too.  Cancelled or timed out, it deletes its nodes before
        returning.  Connection losses are ridden out (a new session joins
        again at the tail).  `CoordinatorClosedError` if the coordinator is not open;
        `RuntimeError` if this task already holds or waits for `max_leases` leases
        of this path (it would wait for itself forever).
        """
        seconds = check_timeout(timeout)
        self._check_open()
        deadline = None if seconds is None else anyio.current_time() + seconds
        task = asyncio.current_task()
        assert task is not None
        counts = _count(self._client, self._path)
        if counts[task] >= self._max:
            raise RuntimeError(
                f"this task already holds or waits for {counts[task]} leases of semaphore "
                f"{self._path} (max_leases={self._max}): it would wait for itself"
            )
        counts[task] += 1
        lease: Lease | None = None
        try:
            lease = await self._acquire(task, deadline)
        finally:
            if lease is None:
                _uncount(self._client, self._path, task)
        return lease

    async def _acquire(self, task: asyncio.Task[Any], deadline: float | None) -> Lease | None:
        kazoo = self._layout == "kazoo"
        while True:
            if kazoo:  # each round: a pool deleted meanwhile is made again, with its number
                await ensure_pool(self._coord, self._leases, self._max)
            inner = Waiter(
                self._coord,
                self._locks,
                self._data,
                KAZOO_LOCK if kazoo else LOCK,
                first,
                recipe=_RECIPE,
            )
            lease = OurNode(self._client, self._leases, _RECIPE, kazoo=kazoo)
            granted: bool | None = False
            granted_at = 0.0
            try:
                if await inner.wait_turn(deadline):
                    if kazoo:
                        granted = await kazoo_lease(
                            self._coord, inner, lease, self._max, self._data, deadline
                        )
                    else:
                        granted = await self._lease(inner, lease, deadline)
                    granted_at = time.monotonic()  # before leaving the inner mutex, which awaits
            finally:
                with anyio.CancelScope(shield=True):
                    await inner.leave()  # Curator releases the inner mutex in any case
                    if not granted:
                        await lease.leave()
            if granted is None:
                continue  # a new session took our nodes: join the inner mutex again
            if not granted:
                return None
            assert lease.node is not None
            # A connection state since the grant (not since now) loses the lease: a session
            # lost while the inner mutex was left took the lease node with it.
            hold = Hold(lease.node, self._path, _RECIPE, granted_at=granted_at)
            log.info("semaphore %s: lease 0x%x to %s", self._path, hold.token, self._id)
            return Lease(self, lease, hold, task)

    async def _lease(self, inner: Waiter, lease: OurNode, deadline: float | None) -> bool | None:
        """Holding the inner mutex: create our lease node, wait until the leases number at
        most `max_leases`.  True: ours; False: out of time; None: our nodes were lost."""
        while True:
            try:
                node = lease.node
                if node is None:
                    node = await lease.create("lease-", self._data)
                if not self._ours(inner) or node.owner != self._coord.client.session.session_id:
                    return None
                names, watch = await self._client.children_watch(self._leases)
                try:
                    if node.name not in names:
                        log.error("semaphore %s: our lease node %s is gone", self._path, node.name)
                        lease.node = None
                        return None
                    if len(names) <= self._max:
                        if grantable(self._coord, node):
                            # Forgotten, not removed: a removeWatches would go out ahead of
                            # the inner mutex's delete, which every waiter queues behind; the
                            # server's side fires (ignored) at the leases' next change.
                            self._client.forget_watch(watch)
                            return True
                        if not await connected_by(self._coord, deadline):
                            return False
                        continue
                    if not await fired_by(watch, deadline):
                        return False
                finally:
                    self._client.remove_watch(watch)
            except NoNodeError:
                return None
            except (ConnectionLostError, TimeoutError):
                if not await connected_by(self._coord, deadline):
                    return False

    def _ours(self, inner: Waiter) -> bool:
        node = inner.node
        return node is not None and node.owner == self._coord.client.session.session_id

    # --- async with --------------------------------------------------------------------------

    async def __aenter__(self) -> Lease:
        """Acquire a lease (within `timeout`, else `LockNotAcquired`); run the block while held."""
        lease = await self.acquire(self._timeout)
        if lease is None:
            raise LockNotAcquired(self._path)
        hold = lease._hold
        hold.keep(self._client, lose_on_suspend=self._lose_on_suspend)
        body = await hold.tenure.enter()
        task = asyncio.current_task()
        assert task is not None
        self._held.setdefault(task, []).append((lease, body))
        return lease

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        """Release the lease; raises `LockLost` (after the block) if it was lost meanwhile."""
        task = asyncio.current_task()
        assert task is not None
        held = self._held[task]
        lease, body = held.pop()
        if not held:
            del self._held[task]
        try:
            return await body.__aexit__(exc_type, exc, tb)
        finally:
            lease._hold.drop()
            try:
                await lease.release()
            except ConnectionLostError as error:
                log.warning("%s", error)

    # --- observing ---------------------------------------------------------------------------

    async def participants(self) -> list[Participant]:
        """The current holders, in lease order, without joining: each `holds`.

        The lease nodes, at most `max_leases` of them (one more lease node may be
        the inner mutex holder's, waiting for a lease).  One read per node,
        pipelined; `NodeDataError` if a node's data is not UTF-8 text.  A Curator
        process's id is what it wrote (by default its IP address).
        """
        if self._layout == "kazoo":
            try:
                names = await self._client.children(self._leases)
            except NoNodeError:
                return []
            found = await read_nodes(self._client, self._leases, names)
            nodes = sorted(found, key=lambda item: item[1].stat.czxid)  # kazoo: unordered
        else:
            nodes = await read_queue(self._client, self._leases, LEASE)
        return [
            Participant(load_text(join(self._leases, n), node.data, "participant id"), True, n)
            for n, node in nodes[: self._max]
        ]


class SemaphoreOptions(TypedDict, total=False):
    """`Semaphore`'s keyword arguments, as `semaphore()` and the blocking façade forward them."""

    max_leases: Required[int]
    participant_id: str | None
    lose_on_suspend: bool | None
    timeout: float | None
    layout: str


def semaphore(coord: Coordinator, path: str, **options: Unpack[SemaphoreOptions]) -> Semaphore:
    """A `Semaphore` to use as ``async with semaphore(coord, path, max_leases=N) as lease``.

    Entering waits for a lease (at most `timeout` seconds, then
    `LockNotAcquired`); ``lease.token`` is the fencing token.  The block is
    cancelled when the lease is lost (as the mutex's is), then `LockLost` is
    raised once it has exited; leaving releases the lease.  See `Semaphore`
    for the arguments.
    """
    return Semaphore(coord, path, **options)
