"""Mutation checks: deliberately broken variants of the library, kept in the test tree only.

Each mutant breaks one safety property by monkeypatching one function of
`aiocoord` in the process that applies it; nothing in ``aiocoord/`` knows of
them.  ``AIOCOORD_MUTANT=<name>`` applies one: the campaign's participant
processes call `apply_from_env` at start, and ``pytest -p tests.mutants.plugin``
does it in a test run.  ``python -m tests.mutants`` runs each mutant against a
short fault campaign and against the recipe's own tests, and fails unless
every one of them is caught (see ``__main__``).

Every patch point is here, one per mutant, named by its current module and
attribute (`Mutant.targets`): when the library's code moves, re-target them
here.  ``tests/zk/test_mutants.py`` checks that each still resolves.

======================  ===================================================  ====================================
mutant                  the property it breaks                               patch point
======================  ===================================================  ====================================
latch_no_cancel         a latch's body is cancelled when leadership is lost  ``LeaderLatch._lose``
                        (SUSPENDED, LOST, node deleted)
mutex_no_wait           a mutex waits for its predecessor                    ``Mutex._rule``
cron_no_cas             a cron claim is a CAS on the version read            ``cron._runner.JobRunner._cas``
ack_before_run          a worker's assignment goes only with its result      ``scheduler._execute.Execution.run``
lease_no_deadline       a CAS-lock holder stops at its own lease deadline    ``cas_lock._hold._keep``
cache_no_resync         a cache re-reads its tree after a lost connection    ``cache._cache.TreeCache._on_state``
semaphore_one_more      never more than max_leases holders                   ``Semaphore.__init__``
reader_ignores_writers  a reader waits for the writers ahead of it           ``ReadLock._rule``
membership_no_recreate  a persistent node comes back after a lost session    ``PersistentNode._create``
counter_no_cas          a counter's add is a CAS on the version it read      ``SharedCount.add``
barrier_enters_early    nobody passes enter() before `members` are in        ``DoubleBarrier._full``
selector_latch_layout   a selector is on Curator LeaderSelector's nodes      ``_SelectorLatch._layouts``
                        (``-lock-``), one election with Java selectors
tasks_no_turns          the tasks sharing one lock object take it in turn    ``TaskTurns.take``
                        (a `Mutex` or `CasLock` entered from two tasks)
======================  ===================================================  ====================================
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ("ENV", "MUTANTS", "Mutant", "apply", "apply_from_env")

ENV = "AIOCOORD_MUTANT"


@dataclass(frozen=True, slots=True)
class Mutant:
    """One deliberate defect: what it breaks, where, and what should catch it.

    `targets` are ``(module, attribute path)`` pairs that the patch replaces;
    `tests` the recipe tests (pytest node ids) expected to fail with it;
    `make` builds the replacement for the first target from the original.
    """

    name: str
    breaks: str
    targets: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]
    make: Callable[[Any], Any]


def _resolve(module: str, attr: str) -> tuple[Any, str, Any]:
    """(owner object, last attribute name, current value) of ``module:attr.path``."""
    owner: Any = importlib.import_module(module)
    parts = attr.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1], getattr(owner, parts[-1])


# --- the defects ---------------------------------------------------------------------------


def _latch_no_cancel(original: Any) -> Any:
    """The latch reports the loss but leaves the body running (except when the latch closes)."""

    def _lose(self: Any, reason: str, *, publish: bool = True) -> None:
        if reason == "closed":
            original(self, reason, publish=publish)
            return
        term, self._term = self._term, None
        if term is None:
            return
        ended = time.monotonic()
        self._report_loss(term, reason, publish=publish, at=ended)  # no term.tenure.end(reason)

    return _lose


def _mutex_no_wait(original: Any) -> Any:
    """Every node is first: a waiter that should watch its predecessor takes the lock."""

    def first(names: Any, index: int) -> str | None:
        return None

    return staticmethod(first)


def _cron_no_cas(original: Any) -> Any:
    """The claim is written whatever the version is now (``version=-1``): no compare-and-set."""
    record_mod = importlib.import_module("aiocoord.recipes.cron._record")

    async def _cas(self: Any, record: Any, version: int) -> Any:
        return await self._client.set(self.path, record_mod.encode(record), version=-1)

    return _cas


def _ack_before_run(original: Any) -> Any:
    """The worker deletes its assignment (its claim on the job) before it runs the job."""
    ex = importlib.import_module("aiocoord.scheduler._execute")
    errors = importlib.import_module("aiocoord.errors")

    async def run(self: Any, job_id: str) -> None:
        client, coord = self.coord.client, self.coord
        path = self.layout.assignment(self.worker, job_id)
        try:
            node = await ex.retry_connection(coord, lambda: client.get(path))
        except errors.NoNodeError:
            return
        with contextlib.suppress(errors.NoNodeError):
            await ex.retry_connection(coord, lambda: client.delete(path))  # acked: nobody owns it
        job = ex.decode_job(path, node.data)
        handler = self.handlers.get(job.name)
        outcome, _error = await ex.run_attempt(handler, job.name, job.payload)
        await self._finish(job_id, outcome.with_job(job))

    return run


def _lease_no_deadline(original: Any) -> Any:
    """The holder renews, but never stops when its lease runs out before a renewal lands."""
    hold = importlib.import_module("aiocoord.recipes.cas_lock._hold")
    errors = importlib.import_module("aiocoord.errors")
    anyio = importlib.import_module("anyio")

    async def _keep(lock: Any, lost: Callable[..., None]) -> None:
        while lock.lost() is None:
            due = lock.confirmed() + lock.lease * hold.RENEW_FRACTION
            if time.monotonic() < due:
                await anyio.sleep(due - time.monotonic())
                continue
            try:
                await lock.renew()
            except errors.LockLost as exc:
                lost(exc.reason, taken=True)
            except errors.CoordError:
                await anyio.sleep(0.1)  # keep trying; the body runs on, past its lease

    return _keep


def _cache_no_resync(original: Any) -> Any:
    """Connected again, the cache says FRESH at once: what changed while it was away is missed.

    The first full read still happens (entering needs it); every later one is skipped,
    while the watch, restored by the session or added again, goes on feeding it.
    """
    tree = importlib.import_module("aiocoord.recipes.cache._tree")

    def _on_state(self: Any, event: Any) -> None:
        original(self, event)
        state = self._state
        if event.state.is_connected and self._resync and state.generation and not state.building:
            self._resync = False  # no sync, no re-read
            if self._stale:
                self._stale = False
                self._events.publish(tree.CacheEvent(tree.CacheEventType.FRESH, self._path))

    return _on_state


def _semaphore_one_more(original: Any) -> Any:
    """The semaphore grants one lease more than its `max_leases`."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._max += 1

    return __init__


def _reader_ignores_writers(original: Any) -> Any:
    """A reader goes whatever is ahead of it: a writer ahead no longer keeps it out."""

    def reader(names: Any, index: int) -> str | None:
        return None

    return staticmethod(reader)


def _membership_no_recreate(original: Any) -> Any:
    """The node is created once; gone with a lost session, it is not put back."""

    async def _create(self: Any) -> None:
        if getattr(self, "_mutant_created", False):
            return
        await original(self)
        if self._made:
            self._mutant_created = True

    return _create


def _counter_no_cas(original: Any) -> Any:
    """`SharedCount.add` writes the value it computed whatever the version is now (``-1``)."""
    codec = importlib.import_module("aiocoord.recipes.values._codec")

    async def add(self: Any, delta: int) -> int:
        _version, data = self._node()
        new = codec.decode(data, codec.INT32, self._path) + delta
        raw = codec.encode(new, codec.INT32, "delta")
        stat, node, _ = await self._coord.client.set_and_get(self._path, raw, -1)
        self._learn(stat, raw, node)
        return int(new)

    return add


def _barrier_enters_early(original: Any) -> Any:
    """The barrier counts one participant too many: it lets everyone in at `members` - 1."""

    async def _full(self: Any) -> bool:
        members = self._members
        self._members = max(1, members - 1)
        try:
            return bool(await original(self))
        finally:
            self._members = members

    return _full


def _tasks_no_turns(original: Any) -> Any:
    """Every task gets its turn at once: two tasks sharing one lock object both go in.

    (`take_now`, the path of ``blocking=False``, is left as it is: it never waits.)
    """

    async def take(self: Any, task: Any = None, deadline: float | None = None) -> bool:
        self._task = task  # the turn is "taken" by every asker at once
        return True

    return take


def _selector_latch_layout(original: Any) -> Any:
    """The selector's default layout is the latch's ``-latch-`` nodes again, not Curator
    LeaderSelector's ``-lock-`` ones: a Java selector on the path sorts our nodes behind its
    own and leads beside ours (caught by the campaign's Java selector)."""
    return {**original, "curator": original["latch"]}


MUTANTS: dict[str, Mutant] = {
    m.name: m
    for m in (
        Mutant(
            "latch_no_cancel",
            "the latch does not cancel the body on SUSPENDED/LOST",
            (("aiocoord.recipes.leader_latch._latch", "LeaderLatch._lose"),),
            (
                "tests/zk/test_leader_latch.py::test_leadership_body_cancelled_when_the_leaders_session_expires",
                "tests/zk/test_leader_latch.py::test_suspended_drops_leadership_by_default_and_lose_on_suspend_false_keeps_it",
            ),
            _latch_no_cancel,
        ),
        Mutant(
            "mutex_no_wait",
            "the mutex treats every node as first (no predecessor wait)",
            (("aiocoord.recipes.mutex._mutex", "Mutex._rule"),),
            ("tests/zk/test_mutex.py::test_fifo_hand_over_in_queue_order_with_rising_tokens",),
            _mutex_no_wait,
        ),
        Mutant(
            "cron_no_cas",
            "a cron claim is written without its version (no CAS)",
            (("aiocoord.recipes.cron._runner", "JobRunner._cas"),),
            ("tests/zk/test_cron_claim.py",),
            _cron_no_cas,
        ),
        Mutant(
            "ack_before_run",
            "a worker deletes its assignment before running the job",
            (("aiocoord.scheduler._execute", "Execution.run"),),
            (
                "tests/zk/test_scheduler.py::test_worker_session_expired_its_jobs_complete_elsewhere",
            ),
            _ack_before_run,
        ),
        Mutant(
            "lease_no_deadline",
            "a CAS-lock holder's lease never expires on its side (no deadline)",
            (("aiocoord.recipes.cas_lock._hold", "_keep"),),
            ("tests/zk/test_cas_lock.py::test_silenced_holder_stops_before_anyone_takes_over",),
            _lease_no_deadline,
        ),
        Mutant(
            "cache_no_resync",
            "a cache does not re-read its tree after a lost connection",
            (("aiocoord.recipes.cache._cache", "TreeCache._on_state"),),
            ("tests/zk/test_cache_resync.py::test_after_a_reconnect_exactly_the_differences",),
            _cache_no_resync,
        ),
        Mutant(
            "semaphore_one_more",
            "the semaphore lets one holder more than max_leases in",
            (("aiocoord.recipes.mutex._semaphore", "Semaphore.__init__"),),
            ("tests/zk/test_semaphore.py::test_a_contender_past_n_waits_until_a_holder_releases",),
            _semaphore_one_more,
        ),
        Mutant(
            "reader_ignores_writers",
            "a read lock goes with a writer ahead of it",
            (("aiocoord.recipes.mutex._rwlock", "ReadLock._rule"),),
            (
                "tests/zk/test_rwlock.py::test_readers_share_a_writer_waits_and_a_reader_behind_it_waits_for_it",
            ),
            _reader_ignores_writers,
        ),
        Mutant(
            "membership_no_recreate",
            "a persistent node (group member, registration) is not re-created after a lost session",
            (("aiocoord.recipes.membership._persistent", "PersistentNode._create"),),
            (
                "tests/zk/test_persistent_node.py::test_ephemeral_node_comes_back_after_session_expiry",
            ),
            _membership_no_recreate,
        ),
        Mutant(
            "counter_no_cas",
            "a shared count's add() writes without the version it read (no CAS)",
            (("aiocoord.recipes.values._shared_count", "SharedCount.add"),),
            ("tests/zk/test_values.py::test_concurrent_adds_lose_nothing",),
            _counter_no_cas,
        ),
        Mutant(
            "barrier_enters_early",
            "a double barrier lets participants in when members - 1 are in",
            (("aiocoord.recipes.values._double_barrier", "DoubleBarrier._full"),),
            ("tests/zk/test_barriers.py::test_double_barrier_in_together_out_together",),
            _barrier_enters_early,
        ),
        Mutant(
            "selector_latch_layout",
            "the selector is on the latch's -latch- nodes, not Curator LeaderSelector's -lock-",
            (("aiocoord.recipes.leader_latch._selector", "_SelectorLatch._layouts"),),
            (
                "tests/zk/test_interop_selector.py::test_java_and_aiocoord_selectors_share_one_election",
            ),
            _selector_latch_layout,
        ),
        Mutant(
            "tasks_no_turns",
            "two tasks sharing one Mutex or CasLock object hold it at once",
            (("aiocoord.recipes._task_turns", "TaskTurns.take"),),
            (
                "tests/zk/test_cas_lock_shared.py",
                "tests/zk/test_mutex.py::test_not_reentrant_an_error_not_a_deadlock_and_tasks_share_one_mutex",
            ),
            _tasks_no_turns,
        ),
    )
}


def apply(name: str) -> Callable[[], None]:
    """Apply mutant `name` in this process; returns the undo.  `KeyError` names the unknown."""
    try:
        mutant = MUTANTS[name]
    except KeyError:
        raise KeyError(f"{ENV}={name!r}: no such mutant (one of {', '.join(MUTANTS)})") from None
    module, attr = mutant.targets[0]
    owner, last, original = _resolve(module, attr)
    if isinstance(owner, type):
        original = owner.__dict__[last]
    setattr(owner, last, mutant.make(original))

    def undo() -> None:
        setattr(owner, last, original)

    return undo


def apply_from_env() -> str | None:
    """Apply the mutant named by ``AIOCOORD_MUTANT``, if set; returns its name."""
    name = os.environ.get(ENV, "").strip()
    if not name:
        return None
    apply(name)
    return name
