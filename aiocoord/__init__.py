"""aiocoord: asyncio-native coordination on Apache ZooKeeper.

Connection states as async streams, a leader latch, a queued mutex, a version-CAS lock,
version-aware task leadership, cluster-wide cron and a job scheduler, each held through
``async with``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .errors import AuthFailedError as AuthFailedError
from .errors import BadVersionError as BadVersionError
from .errors import BlockingInEventLoopError as BlockingInEventLoopError
from .errors import CacheOverflowError as CacheOverflowError
from .errors import ConfigError as ConfigError
from .errors import ConnectionLostError as ConnectionLostError
from .errors import CoordError as CoordError
from .errors import CoordinatorClosedError as CoordinatorClosedError
from .errors import InvalidPathError as InvalidPathError
from .errors import JobCancelled as JobCancelled
from .errors import JobConflict as JobConflict
from .errors import JobFailed as JobFailed
from .errors import LeadershipLost as LeadershipLost
from .errors import LockLost as LockLost
from .errors import LockNotAcquired as LockNotAcquired
from .errors import NoAuthError as NoAuthError
from .errors import NodeDataError as NodeDataError
from .errors import NodeExistsError as NodeExistsError
from .errors import NoNodeError as NoNodeError
from .errors import NotEmptyError as NotEmptyError
from .errors import ProtocolError as ProtocolError
from .errors import ReconfigDisabledError as ReconfigDisabledError
from .errors import ReplyTooLargeError as ReplyTooLargeError
from .errors import SessionExpiredError as SessionExpiredError
from .errors import SubscriberLagged as SubscriberLagged
from .errors import TransactionFailed as TransactionFailed
from .errors import ZooKeeperError as ZooKeeperError

if TYPE_CHECKING:
    from .recipes.cache import CacheEvent as CacheEvent
    from .recipes.cache import CacheEventType as CacheEventType
    from .recipes.cache import NodeCache as NodeCache
    from .recipes.cache import TreeCache as TreeCache
    from .recipes.cache import node_cache as node_cache
    from .recipes.cache import tree_cache as tree_cache
    from .recipes.cas_lock import CasLock as CasLock
    from .recipes.cas_lock import LockStatus as LockStatus
    from .recipes.cas_lock import Slot as Slot
    from .recipes.cas_lock import cas_lock as cas_lock
    from .recipes.cas_lock import once_per as once_per
    from .recipes.cron import Cron as Cron
    from .recipes.cron import Firing as Firing
    from .recipes.cron import cron as cron
    from .recipes.leader_latch import ElectionEvent as ElectionEvent
    from .recipes.leader_latch import ElectionState as ElectionState
    from .recipes.leader_latch import LeaderLatch as LeaderLatch
    from .recipes.leader_latch import LeaderSelector as LeaderSelector
    from .recipes.leader_latch import LeadershipTerm as LeadershipTerm
    from .recipes.leader_latch import Participant as Participant
    from .recipes.leader_latch import leader_latch as leader_latch
    from .recipes.leader_latch import leader_selector as leader_selector
    from .recipes.membership import GroupMember as GroupMember
    from .recipes.membership import PersistentNode as PersistentNode
    from .recipes.membership import PersistentTtlNode as PersistentTtlNode
    from .recipes.membership import ServiceDiscovery as ServiceDiscovery
    from .recipes.membership import ServiceInstance as ServiceInstance
    from .recipes.membership import ServiceProvider as ServiceProvider
    from .recipes.membership import group_member as group_member
    from .recipes.membership import persistent_node as persistent_node
    from .recipes.membership import persistent_ttl_node as persistent_ttl_node
    from .recipes.membership import service_discovery as service_discovery
    from .recipes.mutex import Lease as Lease
    from .recipes.mutex import Mutex as Mutex
    from .recipes.mutex import ReadLock as ReadLock
    from .recipes.mutex import ReadWriteLock as ReadWriteLock
    from .recipes.mutex import Semaphore as Semaphore
    from .recipes.mutex import WriteLock as WriteLock
    from .recipes.mutex import mutex as mutex
    from .recipes.mutex import read_write_lock as read_write_lock
    from .recipes.mutex import revoke as revoke
    from .recipes.mutex import semaphore as semaphore
    from .recipes.task_leadership import TaskChange as TaskChange
    from .recipes.task_leadership import TaskLeadership as TaskLeadership
    from .recipes.task_leadership import TaskTerm as TaskTerm
    from .recipes.task_leadership import Worker as Worker
    from .recipes.task_leadership import task_leadership as task_leadership
    from .recipes.values import AtomicLong as AtomicLong
    from .recipes.values import Barrier as Barrier
    from .recipes.values import DoubleBarrier as DoubleBarrier
    from .recipes.values import SharedCount as SharedCount
    from .recipes.values import atomic_long as atomic_long
    from .recipes.values import barrier as barrier
    from .recipes.values import double_barrier as double_barrier
    from .recipes.values import shared_count as shared_count
    from .scheduler import Backoff as Backoff
    from .scheduler import JobInfo as JobInfo
    from .scheduler import JobRequest as JobRequest
    from .scheduler import JobStatus as JobStatus
    from .scheduler import JobWorker as JobWorker
    from .scheduler import LeastLoaded as LeastLoaded
    from .scheduler import RandomChoice as RandomChoice
    from .scheduler import RetryBackoff as RetryBackoff
    from .scheduler import RoundRobin as RoundRobin
    from .scheduler import Scheduler as Scheduler
    from .scheduler import Strategy as Strategy
    from .scheduler import WorkerLoad as WorkerLoad
    from .session import ConnectionEvent as ConnectionEvent
    from .session import ConnectionState as ConnectionState
    from .session import Coordinator as Coordinator
    from .session import connect as connect
    from .settings import Settings as Settings
    from .zk import Node as Node
    from .zk import Stat as Stat
    from .zk import ZkClient as ZkClient

__version__ = "0.1.0"

__all__ = (
    # The session: settings, connecting, Curator's connection states.
    "Settings",
    "connect",
    "Coordinator",
    "ConnectionState",
    "ConnectionEvent",
    # Leader election: the latch, the selector, their events and terms.
    "LeaderLatch",
    "leader_latch",
    "LeaderSelector",
    "leader_selector",
    "LeadershipTerm",
    "Participant",
    "ElectionEvent",
    "ElectionState",
    # Locks: the queued mutex, semaphore and read/write lock, the version-CAS lock and
    # once-per-interval guard.
    "Mutex",
    "mutex",
    "Semaphore",
    "semaphore",
    "Lease",
    "ReadWriteLock",
    "read_write_lock",
    "ReadLock",
    "WriteLock",
    "revoke",
    "CasLock",
    "cas_lock",
    "once_per",
    "LockStatus",
    "Slot",
    # Version-aware task leadership and the cluster cron built on it.
    "Worker",
    "TaskLeadership",
    "task_leadership",
    "TaskTerm",
    "TaskChange",
    "Cron",
    "cron",
    "Firing",
    # Caches: a node or a whole tree kept in memory by one watch, as async streams.
    "NodeCache",
    "node_cache",
    "TreeCache",
    "tree_cache",
    "CacheEvent",
    "CacheEventType",
    # Membership: a node kept while a block runs, groups, service discovery.
    "PersistentNode",
    "persistent_node",
    "PersistentTtlNode",
    "persistent_ttl_node",
    "GroupMember",
    "group_member",
    "ServiceDiscovery",
    "service_discovery",
    "ServiceInstance",
    "ServiceProvider",
    # Shared values and barriers on Curator's layouts.
    # (SharedCount, DistributedAtomicLong, DistributedBarrier, DistributedDoubleBarrier)
    "SharedCount",
    "shared_count",
    "AtomicLong",
    "atomic_long",
    "Barrier",
    "barrier",
    "DoubleBarrier",
    "double_barrier",
    # The job system.
    "Scheduler",
    "JobWorker",
    "JobStatus",
    "JobInfo",
    "JobRequest",
    "Backoff",
    "RetryBackoff",
    "Strategy",
    "RoundRobin",
    "RandomChoice",
    "LeastLoaded",
    "WorkerLoad",
    # The low-level client (an escape hatch) and the node metadata it returns.
    "ZkClient",
    "Node",
    "Stat",
    # Errors: one tree under CoordError.
    "CoordError",
    "ConfigError",
    "InvalidPathError",
    "ConnectionLostError",
    "SessionExpiredError",
    "ProtocolError",
    "ReconfigDisabledError",
    "ReplyTooLargeError",
    "AuthFailedError",
    "CoordinatorClosedError",
    "BlockingInEventLoopError",
    "SubscriberLagged",
    "CacheOverflowError",
    "ZooKeeperError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "BadVersionError",
    "NoAuthError",
    "TransactionFailed",
    "NodeDataError",
    "LeadershipLost",
    "LockNotAcquired",
    "LockLost",
    "JobFailed",
    "JobCancelled",
    "JobConflict",
)

# Where each name outside `errors` lives.  `import aiocoord` loads only the errors;
# the session, the recipes and the scheduler (and with them anyio, asyncio, aiozk and
# pydantic) load on first use of one of their names, through `__getattr__` (PEP 562).
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    "recipes.cas_lock": ("CasLock", "LockStatus", "Slot", "cas_lock", "once_per"),
    "recipes.cron": ("Cron", "Firing", "cron"),
    "recipes.leader_latch": (
        "ElectionEvent",
        "ElectionState",
        "LeaderLatch",
        "LeaderSelector",
        "LeadershipTerm",
        "Participant",
        "leader_latch",
        "leader_selector",
    ),
    "recipes.membership": (
        "GroupMember",
        "PersistentNode",
        "PersistentTtlNode",
        "ServiceDiscovery",
        "ServiceInstance",
        "ServiceProvider",
        "group_member",
        "persistent_node",
        "persistent_ttl_node",
        "service_discovery",
    ),
    "recipes.mutex": (
        "Lease",
        "Mutex",
        "ReadLock",
        "ReadWriteLock",
        "Semaphore",
        "WriteLock",
        "mutex",
        "read_write_lock",
        "revoke",
        "semaphore",
    ),
    "recipes.values": (
        "AtomicLong",
        "Barrier",
        "DoubleBarrier",
        "SharedCount",
        "atomic_long",
        "barrier",
        "double_barrier",
        "shared_count",
    ),
    "recipes.task_leadership": (
        "TaskChange",
        "TaskLeadership",
        "TaskTerm",
        "Worker",
        "task_leadership",
    ),
    "scheduler": (
        "Backoff",
        "RetryBackoff",
        "JobInfo",
        "JobRequest",
        "JobStatus",
        "JobWorker",
        "LeastLoaded",
        "RandomChoice",
        "RoundRobin",
        "Scheduler",
        "Strategy",
        "WorkerLoad",
    ),
    "session": ("ConnectionEvent", "ConnectionState", "Coordinator", "connect"),
    "settings": ("Settings",),
    "zk": (
        "Node",
        "Stat",
        "ZkClient",
    ),
    "recipes.cache": (
        "CacheEvent",
        "CacheEventType",
        "NodeCache",
        "TreeCache",
        "node_cache",
        "tree_cache",
    ),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

# The subpackages a plain `import aiocoord` used to load: still reachable as attributes.
_SUBMODULES = frozenset({"recipes", "scheduler", "session", "settings", "zk"})
# The blocking façade for threaded code (`from aiocoord import blocking`): its event-loop
# thread and anyio's portal load only when it is named.
_SUBMODULES |= {"blocking"}


# Hidden from type checkers, which see every name through the imports above: a
# misspelled `aiocoord.X` stays an error for them.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """Import the module that defines public `name` on first use, and keep the result."""
        module = _LAZY.get(name)
        if module is not None:
            value: object = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        elif name in _SUBMODULES:
            value = importlib.import_module(f"{__name__}.{name}")
        else:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
