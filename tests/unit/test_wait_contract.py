"""One wait contract (docs/concepts.md, "Waiting: one contract"), checked over every recipe.

Each wait takes ``timeout: float | None = None``, checks it the same way
before anything is sent (a coordinator never entered: a request would fail
with `CoordinatorClosedError`, not the error checked here), and gives the
result shape of its kind.  Every `participants()` returns the one
`Participant`; every recipe has a class and a factory; every lock is an async
context manager.  What ``timeout=0`` does on a server is in
tests/zk/test_wait_contract.py.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Awaitable, Callable
from typing import Any, get_type_hints

import pytest

import aiocoord
from aiocoord import ConfigError, Coordinator, LeadershipTerm, Lease, Participant
from aiocoord.blocking import (
    BlockingLeaderLatch,
    MutexRight,
    ReadWriteLockRight,
    SemaphoreRight,
)
from aiocoord.recipes.cas_lock import CasLockOptions
from aiocoord.recipes.cron import CronOptions
from aiocoord.recipes.leader_latch import LatchOptions, SelectorOptions
from aiocoord.recipes.mutex import MutexOptions, MutexParticipant, SemaphoreOptions
from aiocoord.recipes.mutex import Participant as LockParticipant

pytestmark = pytest.mark.anyio


def _coord() -> Coordinator:
    return aiocoord.connect("127.0.0.1:1")  # never entered: nothing is sent


# Every wait of the async API: its name, how to call it with a timeout, and what it returns.
Wait = Callable[[Coordinator, Any], Awaitable[object]]
WAITS: dict[str, tuple[Wait, Callable[..., Any], object]] = {
    "Mutex.acquire": (
        lambda c, t: aiocoord.Mutex(c, "/m").acquire(t),
        aiocoord.Mutex.acquire,
        bool,
    ),
    "ReadLock.acquire": (
        lambda c, t: aiocoord.ReadWriteLock(c, "/rw").read().acquire(t),
        aiocoord.ReadLock.acquire,
        bool,
    ),
    "WriteLock.acquire": (
        lambda c, t: aiocoord.ReadWriteLock(c, "/rw").write().acquire(t),
        aiocoord.WriteLock.acquire,
        bool,
    ),
    "CasLock.acquire": (
        lambda c, t: aiocoord.CasLock(c, "/l").acquire(t),
        aiocoord.CasLock.acquire,
        bool,
    ),
    "Semaphore.acquire": (
        lambda c, t: aiocoord.Semaphore(c, "/s", max_leases=1).acquire(t),
        aiocoord.Semaphore.acquire,
        Lease | None,
    ),
    "LeaderLatch.wait": (
        lambda c, t: aiocoord.LeaderLatch(c, "/e").wait(t),
        aiocoord.LeaderLatch.wait,
        LeadershipTerm | bool,
    ),
    "Barrier.wait": (
        lambda c, t: aiocoord.Barrier(c, "/b").wait(t),
        aiocoord.Barrier.wait,
        bool,
    ),
    "DoubleBarrier.enter": (
        lambda c, t: aiocoord.DoubleBarrier(c, "/d", members=2).enter(t),
        aiocoord.DoubleBarrier.enter,
        bool,
    ),
    "DoubleBarrier.leave": (
        lambda c, t: aiocoord.DoubleBarrier(c, "/d", members=2).leave(t),
        aiocoord.DoubleBarrier.leave,
        bool,
    ),
}

BAD_TIMEOUTS: list[tuple[object, type[Exception]]] = [
    (-1, ConfigError),
    (-0.5, ConfigError),
    (math.nan, ConfigError),
    ("1", TypeError),
    (True, TypeError),
    ([1], TypeError),
]


@pytest.mark.parametrize("name", WAITS)
def test_every_wait_takes_timeout_none_by_default(name: str) -> None:
    _, method, _ = WAITS[name]
    parameter = inspect.signature(method).parameters["timeout"]
    assert parameter.default is None
    assert parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("name", WAITS)
def test_every_wait_gives_the_shape_of_its_kind(name: str) -> None:
    _, method, shape = WAITS[name]
    assert get_type_hints(method)["return"] == shape


@pytest.mark.parametrize(("bad", "error"), BAD_TIMEOUTS, ids=repr)
@pytest.mark.parametrize("name", WAITS)
async def test_a_bad_timeout_is_refused_by_name_before_anything_is_sent(
    name: str, bad: object, error: type[Exception]
) -> None:
    call, _, _ = WAITS[name]
    with pytest.raises(error, match=r"^timeout\b") as caught:
        await call(_coord(), bad)
    if isinstance(caught.value, ConfigError):
        assert caught.value.field == "timeout"


def test_the_latch_wait_has_its_two_documented_shapes() -> None:
    """design.md: ``wait()`` returns the term, ``wait(timeout)`` a bool."""
    overloads = typing.get_overloads(aiocoord.LeaderLatch.wait)
    shapes = {inspect.signature(o).parameters["timeout"].annotation: o for o in overloads}
    assert set(shapes) == {"None", "float"}
    assert inspect.signature(shapes["None"]).return_annotation == "LeadershipTerm"
    assert inspect.signature(shapes["float"]).return_annotation == "bool"


# Every lock made with a `timeout=` for its `async with`, checked when it is made.
LOCKS: dict[str, Callable[[Coordinator, Any], object]] = {
    "Mutex": lambda c, t: aiocoord.Mutex(c, "/m", timeout=t),
    "mutex": lambda c, t: aiocoord.mutex(c, "/m", timeout=t),
    "ReadWriteLock": lambda c, t: aiocoord.ReadWriteLock(c, "/rw", timeout=t),
    "read_write_lock": lambda c, t: aiocoord.read_write_lock(c, "/rw", timeout=t),
    "Semaphore": lambda c, t: aiocoord.Semaphore(c, "/s", max_leases=1, timeout=t),
    "semaphore": lambda c, t: aiocoord.semaphore(c, "/s", max_leases=1, timeout=t),
    "CasLock": lambda c, t: aiocoord.CasLock(c, "/l", timeout=t),
    "cas_lock": lambda c, t: aiocoord.cas_lock(c, "/l", timeout=t),
}


@pytest.mark.parametrize(("bad", "error"), BAD_TIMEOUTS, ids=repr)
@pytest.mark.parametrize("name", LOCKS)
def test_a_lock_refuses_a_bad_timeout_when_it_is_made(
    name: str, bad: object, error: type[Exception]
) -> None:
    with pytest.raises(error, match=r"^timeout\b"):
        LOCKS[name](_coord(), bad)


@pytest.mark.parametrize("name", LOCKS)
@pytest.mark.parametrize("good", [None, 0, 0.5, 3, math.inf])
def test_a_lock_takes_any_timeout_of_the_contract(name: str, good: float | None) -> None:
    LOCKS[name](_coord(), good)


@pytest.mark.parametrize(
    "lock",
    [aiocoord.Mutex, aiocoord.ReadLock, aiocoord.WriteLock, aiocoord.Semaphore, aiocoord.CasLock],
)
def test_every_lock_is_an_async_context_manager(lock: Any) -> None:
    assert inspect.iscoroutinefunction(lock.__aenter__)
    assert inspect.iscoroutinefunction(lock.__aexit__)


@pytest.mark.parametrize(
    "method",
    [
        aiocoord.LeaderLatch.participants,
        aiocoord.Mutex.participants,
        aiocoord.ReadWriteLock.participants,
        aiocoord.Semaphore.participants,
        aiocoord.DoubleBarrier.participants,
        MutexRight.participants,
        SemaphoreRight.participants,
        ReadWriteLockRight.participants,
        BlockingLeaderLatch.participants,
    ],
    ids=lambda m: m.__qualname__,
)
def test_every_participants_returns_the_one_participant(method: Callable[..., Any]) -> None:
    assert get_type_hints(method)["return"] == list[Participant]


def test_one_participant_type_under_every_name() -> None:
    assert MutexParticipant is Participant
    assert LockParticipant is Participant
    holder = Participant("pod-1", True, "_c_x-lock-0000000001")
    assert holder.is_leader is holder.holds is True
    assert holder == Participant("pod-1", True)  # the node name is not compared
    with pytest.raises(AttributeError):
        holder.holds = False  # type: ignore[misc]


def test_the_double_barrier_lists_participants_before_entering() -> None:
    assert aiocoord.DoubleBarrier(_coord(), "/d", members=2).participants() == []


# Every recipe: its class and its factory (coordinator first), each making the other's kind.
RECIPES: list[tuple[str, str, dict[str, Any]]] = [
    ("LeaderLatch", "leader_latch", {}),
    ("Mutex", "mutex", {}),
    ("ReadWriteLock", "read_write_lock", {}),
    ("Semaphore", "semaphore", {"max_leases": 2}),
    ("CasLock", "cas_lock", {}),
    ("Barrier", "barrier", {}),
    ("DoubleBarrier", "double_barrier", {"members": 2}),
    ("SharedCount", "shared_count", {}),
    ("AtomicLong", "atomic_long", {}),
    ("NodeCache", "node_cache", {}),
    ("TreeCache", "tree_cache", {}),
    ("PersistentNode", "persistent_node", {}),
    ("PersistentTtlNode", "persistent_ttl_node", {"ttl": 1000}),
    ("GroupMember", "group_member", {"member_id": "m"}),
    ("ServiceDiscovery", "service_discovery", {}),
    ("Cron", "cron", {"worker": aiocoord.Worker(version="1.0")}),
    (
        "TaskLeadership",
        "task_leadership",
        {"worker": aiocoord.Worker(version="1.0"), "tasks": ["t"]},
    ),
]


@pytest.mark.parametrize(("cls", "factory", "options"), RECIPES, ids=[r[0] for r in RECIPES])
def test_every_recipe_has_a_class_and_a_factory(
    cls: str, factory: str, options: dict[str, Any]
) -> None:
    assert cls in aiocoord.__all__ and factory in aiocoord.__all__
    made = getattr(aiocoord, factory)(_coord(), "/recipe", **options)
    assert isinstance(made, getattr(aiocoord, cls))


async def _lead(term: LeadershipTerm) -> None:
    pass


async def test_the_selector_has_a_class_and_a_factory_too() -> None:
    made = aiocoord.leader_selector(_coord(), "/recipe", _lead, requeue=False)
    assert isinstance(made, aiocoord.LeaderSelector)


@pytest.mark.parametrize(
    ("options", "cls"),
    [
        (MutexOptions, aiocoord.Mutex),
        (SemaphoreOptions, aiocoord.Semaphore),
        (CasLockOptions, aiocoord.CasLock),
        (LatchOptions, aiocoord.LeaderLatch),
        (SelectorOptions, aiocoord.LeaderSelector),
        (CronOptions, aiocoord.Cron),
    ],
    ids=lambda x: x.__name__,
)
def test_the_forwarded_options_are_the_class_keyword_arguments(options: type, cls: type) -> None:
    """Factories and the blocking façade forward these: none may be missing or extra."""
    keywords = {
        name
        for name, p in inspect.signature(cls).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert set(get_type_hints(options)) == keywords


def test_renamed_names_keep_working_for_one_release() -> None:
    assert aiocoord.ReadWriteLock.read_lock is aiocoord.ReadWriteLock.read
    assert aiocoord.ReadWriteLock.write_lock is aiocoord.ReadWriteLock.write
    rw = aiocoord.ReadWriteLock(_coord(), "/rw", participant_id="p")
    assert isinstance(rw.read_lock(), aiocoord.ReadLock)
    assert isinstance(rw.write_lock(), aiocoord.WriteLock)
    assert inspect.iscoroutinefunction(aiocoord.Coordinator.close)  # beside aclose()


def test_a_selector_and_a_job_worker_are_built_outside_an_event_loop() -> None:
    """As a module builds them for `lifespan(recipes=[...])`, before any loop runs (docs/fastapi.md)."""
    coord = _coord()
    selector = aiocoord.leader_selector(coord, "/recipe", _lead, requeue=False)
    assert isinstance(selector, aiocoord.LeaderSelector)
    sched = aiocoord.Scheduler(coord, "/jobs")
    worker = sched.worker(capacity=2, participant_id="pod-1")
    assert worker.participant_id == "pod-1"
