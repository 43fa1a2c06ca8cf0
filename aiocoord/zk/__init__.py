"""The ZooKeeper session layer: connection, handshake, heartbeats, watches, requests, paths.

Only `_wire` imports aiozk (for its wire types).  `ZkClient` is the public
client: the ZooKeeper requests and watches.  `ZkSession` is the one owner of
the session's state, exported for the `Coordinator`, which runs and closes it
and shows its state; it is not a user API, and its timers are private.
`SessionPort` is what the rest of aiocoord may use of it (``client.session``).
"""

from __future__ import annotations

from ._acl import AclProvider as AclProvider
from ._config import EnsembleConfig as EnsembleConfig
from ._config import EnsembleServer as EnsembleServer
from ._session import ZkSession as ZkSession
from ._watches import PersistentWatch as PersistentWatch
from ._watches import Watch as Watch
from ._watches import WatchKind as WatchKind
from .client import ZkClient as ZkClient
from .client import protected_name as protected_name
from .port import SessionPort as SessionPort
from .states import ConnectionEvent as ConnectionEvent
from .states import ConnectionState as ConnectionState
from .types import ACL as ACL
from .types import CREATOR_ALL_ACL as CREATOR_ALL_ACL
from .types import OPEN_ACL_UNSAFE as OPEN_ACL_UNSAFE
from .types import READ_ACL_UNSAFE as READ_ACL_UNSAFE
from .types import CheckOp as CheckOp
from .types import CheckResult as CheckResult
from .types import Created as Created
from .types import CreateMode as CreateMode
from .types import CreateOp as CreateOp
from .types import CreateResult as CreateResult
from .types import DeleteOp as DeleteOp
from .types import DeleteResult as DeleteResult
from .types import ErrorResult as ErrorResult
from .types import EventType as EventType
from .types import Node as Node
from .types import Op as Op
from .types import OpResult as OpResult
from .types import SetDataOp as SetDataOp
from .types import SetDataResult as SetDataResult
from .types import Stat as Stat
from .types import WatchedEvent as WatchedEvent

__all__ = (
    "ACL",
    "AclProvider",
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "CheckOp",
    "CheckResult",
    "ConnectionEvent",
    "ConnectionState",
    "CreateMode",
    "CreateOp",
    "CreateResult",
    "Created",
    "DeleteOp",
    "DeleteResult",
    "EnsembleConfig",
    "EnsembleServer",
    "ErrorResult",
    "EventType",
    "Node",
    "Op",
    "OpResult",
    "PersistentWatch",
    "SetDataOp",
    "SessionPort",
    "SetDataResult",
    "Stat",
    "Watch",
    "WatchKind",
    "WatchedEvent",
    "ZkClient",
    "ZkSession",
    "protected_name",
)
