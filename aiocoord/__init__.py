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
from .errors import SessionExpiredError as SessionExpiredError
from .errors import TransactionFailed as TransactionFailed
from .errors import ZooKeeperError as ZooKeeperError
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
    "EventType",
    "InvalidPathError",
    "JobFailed",
    "LeadershipLost",
    "LockLost",
    "LockNotAcquired",
    "NoAuthError",
    "NoNodeError",
    "NodeDataError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionExpiredError",
    "SetDataOp",
    "Settings",
    "Stat",
    "TransactionFailed",
    "WatchedEvent",
    "ZkClient",
    "ZooKeeperError",
    "connect",
)
