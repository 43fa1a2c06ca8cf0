"""aiocoord: asyncio-native coordination on Apache ZooKeeper.

Connection states as async streams, a leader latch, a version-CAS lock, version-aware
task leadership and a job scheduler, each held through ``async with``.
"""

from __future__ import annotations

from .errors import AuthFailedError as AuthFailedError
from .errors import BadVersionError as BadVersionError
from .errors import ConfigError as ConfigError
from .errors import ConnectionLostError as ConnectionLostError
from .errors import CoordError as CoordError
from .errors import CoordinatorClosedError as CoordinatorClosedError
from .errors import InvalidPathError as InvalidPathError
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
from .errors import SessionExpiredError as SessionExpiredError
from .errors import TransactionFailed as TransactionFailed
from .errors import ZooKeeperError as ZooKeeperError
from .recipes.cas_lock import CasLock as CasLock
from .recipes.cas_lock import LockStatus as LockStatus
from .recipes.cas_lock import Slot as Slot
from .recipes.cas_lock import cas_lock as cas_lock
from .recipes.cas_lock import once_per as once_per
from .recipes.leader_latch import ElectionEvent as ElectionEvent
from .recipes.leader_latch import ElectionState as ElectionState
from .recipes.leader_latch import LeaderLatch as LeaderLatch
from .recipes.leader_latch import LeadershipTerm as LeadershipTerm
from .recipes.leader_latch import Participant as Participant
from .recipes.leader_latch import leader_latch as leader_latch
from .recipes.task_leadership import MavenVersion as MavenVersion
from .recipes.task_leadership import TaskChange as TaskChange
from .recipes.task_leadership import TaskLeadership as TaskLeadership
from .recipes.task_leadership import TaskTerm as TaskTerm
from .recipes.task_leadership import Worker as Worker
from .recipes.task_leadership import maven_version_key as maven_version_key
from .recipes.task_leadership import task_leadership as task_leadership
from .scheduler import JobInfo as JobInfo
from .scheduler import JobStatus as JobStatus
from .scheduler import JobWorker as JobWorker
from .scheduler import LeastLoaded as LeastLoaded
from .scheduler import RandomChoice as RandomChoice
from .scheduler import RoundRobin as RoundRobin
from .scheduler import Scheduler as Scheduler
from .scheduler import Strategy as Strategy
from .scheduler import WorkerLoad as WorkerLoad
from .session import ConnectionEvent as ConnectionEvent
from .session import ConnectionState as ConnectionState
from .session import Coordinator as Coordinator
from .session import connect as connect
from .settings import Settings as Settings
from .zk import CheckOp as CheckOp
from .zk import CreateMode as CreateMode
from .zk import CreateOp as CreateOp
from .zk import DeleteOp as DeleteOp
from .zk import EventType as EventType
from .zk import SetDataOp as SetDataOp
from .zk import Stat as Stat
from .zk import WatchedEvent as WatchedEvent
from .zk import ZkClient as ZkClient

__version__ = "0.1.0"

__all__ = (
    "AuthFailedError",
    "BadVersionError",
    "CasLock",
    "CheckOp",
    "ConfigError",
    "ConnectionEvent",
    "ConnectionLostError",
    "ConnectionState",
    "CoordError",
    "Coordinator",
    "CoordinatorClosedError",
    "CreateMode",
    "CreateOp",
    "DeleteOp",
    "ElectionEvent",
    "ElectionState",
    "EventType",
    "InvalidPathError",
    "JobFailed",
    "JobInfo",
    "JobStatus",
    "JobWorker",
    "LeaderLatch",
    "LeadershipLost",
    "LeadershipTerm",
    "LeastLoaded",
    "LockLost",
    "LockNotAcquired",
    "LockStatus",
    "MavenVersion",
    "NoAuthError",
    "NoNodeError",
    "NodeDataError",
    "NodeExistsError",
    "NotEmptyError",
    "Participant",
    "ProtocolError",
    "RandomChoice",
    "RoundRobin",
    "Scheduler",
    "SessionExpiredError",
    "SetDataOp",
    "Settings",
    "Slot",
    "Stat",
    "Strategy",
    "TaskChange",
    "TaskLeadership",
    "TaskTerm",
    "TransactionFailed",
    "WatchedEvent",
    "Worker",
    "WorkerLoad",
    "ZkClient",
    "ZooKeeperError",
    "cas_lock",
    "connect",
    "leader_latch",
    "maven_version_key",
    "once_per",
    "task_leadership",
)
