"""The public names of design.md exist, are exported in `__all__`, and errors form one tree."""

from __future__ import annotations

import inspect

import pytest

import aiocoord

# Names design.md promises, grouped by the part that delivers them.
SESSION = ["Settings", "connect", "Coordinator", "ConnectionState", "ConnectionEvent"]
LATCH = [
    "LeaderLatch",
    "leader_latch",
    "Participant",
    "ElectionEvent",
    "ElectionState",
    "LeadershipTerm",
]
LOCK = ["CasLock", "cas_lock", "once_per", "Mutex", "mutex"]
TASKS = ["Worker", "task_leadership", "TaskLeadership"]
CRON = ["Cron", "Firing"]
SCHEDULER = ["Scheduler", "JobStatus", "JobInfo", "Backoff"]
VALUES = ["shared_count", "SharedCount", "atomic_long", "AtomicLong", "Barrier", "double_barrier"]
MEMBERSHIP = [
    "persistent_node",
    "PersistentNode",
    "persistent_ttl_node",
    "PersistentTtlNode",
    "group_member",
    "GroupMember",
    "service_discovery",
    "ServiceDiscovery",
    "ServiceInstance",
]
ERRORS = [
    "CoordError",
    "ConnectionLostError",
    "SessionExpiredError",
    "LeadershipLost",
    "LockNotAcquired",
    "LockLost",
    "JobFailed",
    "JobCancelled",
    "InvalidPathError",
    "NodeDataError",
    "ProtocolError",
    "ConfigError",
]


@pytest.mark.parametrize(
    "name", SESSION + LATCH + LOCK + TASKS + CRON + SCHEDULER + VALUES + MEMBERSHIP + ERRORS
)
def test_design_names_are_exported(name: str) -> None:
    assert name in aiocoord.__all__
    assert getattr(aiocoord, name) is not None


def test_all_is_a_sorted_tuple_of_real_names() -> None:
    assert isinstance(aiocoord.__all__, tuple)
    assert len(set(aiocoord.__all__)) == len(aiocoord.__all__)
    for name in aiocoord.__all__:
        assert hasattr(aiocoord, name), name


def test_implementation_details_live_only_in_their_submodules() -> None:
    """The op types and Maven's key have one home each; no release ever had them at the top."""
    import aiocoord.recipes.task_leadership as tasks
    import aiocoord.zk as zk

    for name in ("CheckOp", "CreateMode", "CreateOp", "DeleteOp", "SetDataOp", "EventType"):
        assert name not in aiocoord.__all__
        assert not hasattr(aiocoord, name), name
        assert name in zk.__all__
    for name in ("MavenVersion", "maven_version_key"):
        assert not hasattr(aiocoord, name), name
        assert name in tasks.__all__


def test_every_error_is_a_coord_error() -> None:
    for name in aiocoord.__all__:
        obj = getattr(aiocoord, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            assert issubclass(obj, aiocoord.CoordError), name
    assert issubclass(aiocoord.InvalidPathError, ValueError)
    assert issubclass(aiocoord.ConfigError, ValueError)
    assert issubclass(aiocoord.SessionExpiredError, aiocoord.ConnectionLostError)
    assert issubclass(aiocoord.ProtocolError, aiocoord.ConnectionLostError)


def test_connection_states_are_curators_five() -> None:
    assert {s.value for s in aiocoord.ConnectionState} == {
        "CONNECTED",
        "SUSPENDED",
        "RECONNECTED",
        "LOST",
        "READ_ONLY",
    }


# A factory beside every recipe class (docs/concepts.md, "Waiting: one contract").
FACTORIES = ["read_write_lock", "ReadWriteLock", "barrier", "Barrier", "cron", "Cron"]


@pytest.mark.parametrize("name", FACTORIES)
def test_every_recipe_factory_is_exported(name: str) -> None:
    assert name in aiocoord.__all__
    assert getattr(aiocoord, name) is not None
