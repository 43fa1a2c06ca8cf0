"""The aiocoord exception hierarchy: one base, one subclass per condition.

Every error raised by aiocoord is a `CoordError`.  Subclasses name what happened
and carry the data a caller needs to decide what to do next (`path`, `reason`).
Errors that signal a programming mistake also derive from the builtin a caller
would expect (`ValueError`), so ordinary ``except ValueError`` still works.
"""

from __future__ import annotations

__all__ = (
    "AuthFailedError",
    "BadVersionError",
    "BlockingInEventLoopError",
    "CacheOverflowError",
    "ConfigError",
    "ConnectionLostError",
    "CoordError",
    "CoordinatorClosedError",
    "InvalidPathError",
    "JobCancelled",
    "JobConflict",
    "JobFailed",
    "LeadershipLost",
    "LockLost",
    "LockNotAcquired",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeDataError",
    "NodeExistsError",
    "NotEmptyError",
    "NotReadOnlyError",
    "ProtocolError",
    "ReconfigDisabledError",
    "ReplyTooLargeError",
    "SessionExpiredError",
    "SubscriberLagged",
    "TransactionFailed",
    "ZooKeeperError",
)


class CoordError(Exception):
    """Base class of every error aiocoord raises."""


class ConfigError(CoordError, ValueError, TypeError):
    """A setting or argument is invalid; `field` names it.  Fix the value and retry.

    Both a `ValueError` and a `TypeError`, so that ``except`` of either
    builtin catches it, whether the value was out of range or of the wrong type.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class CoordinatorClosedError(CoordError):
    """The coordinator was closed (or not entered yet); open a new one with `connect()`."""


class BlockingInEventLoopError(CoordError, RuntimeError):
    """A call of `aiocoord.blocking` was made from a thread that runs an event loop.

    A blocking call there would stop that loop until it returned (and, from
    the façade's own loop thread, never return).  In async code use the async
    API (``async with aiocoord.connect(...)``, ``async with aiocoord.mutex(...)``)
    instead, or move the call to a thread: ``await anyio.to_thread.run_sync(...)``.
    """


class ConnectionLostError(CoordError):
    """The connection to ZooKeeper dropped, or none could be made in time.

    For a request in flight the outcome is unknown: a write may or may not have
    been applied.  Re-read before retrying anything that is not idempotent.
    """


class SessionExpiredError(ConnectionLostError):
    """The ZooKeeper session ended: its ephemeral nodes and watches are gone.

    The coordinator opens a new session by itself; recipes re-join on it.
    """


class ProtocolError(ConnectionLostError):
    """A server sent a reply that does not parse (bad lengths, bad text, a reply to no request).

    The connection is dropped and made again (SUSPENDED, then RECONNECTED);
    as for any `ConnectionLostError`, the outcome of the request is unknown.
    """


class ReplyTooLargeError(CoordError):
    """The server's reply to one request is longer than the client's packet limit.

    `path` names the node asked about (None for a request on no one node),
    `size` the reply's length in bytes and `limit` the limit
    (``AIOCOORD_MAX_PACKET``, like the Java client's ``jute.maxbuffer``).  The
    reply is skipped and the connection kept; only this request fails.  Ask
    for less (a smaller folder, less data) or raise the limit.
    """

    def __init__(self, size: int, limit: int, *, path: str | None = None) -> None:
        self.size = size
        self.limit = limit
        self.path = path
        on = f" for {path}" if path is not None else ""
        super().__init__(
            f"the reply{on} is {size} bytes, over the client's packet limit of {limit} "
            "(AIOCOORD_MAX_PACKET); ask for less or raise the limit"
        )


class ZooKeeperError(CoordError):
    """The server refused a request; `code` is ZooKeeper's error code, `path` the node."""

    code: int = 0

    def __init__(
        self, message: str = "", *, path: str | None = None, code: int | None = None
    ) -> None:
        if code is not None:
            self.code = code
        self.path = path
        text = message or type(self).__name__
        super().__init__(f"{text} (path={path})" if path is not None else text)


class NoNodeError(ZooKeeperError):
    """The node does not exist."""

    code = -101


class NoAuthError(ZooKeeperError):
    """The session's credentials do not allow this operation on the node."""

    code = -102


class BadVersionError(ZooKeeperError):
    """The node's version is not the one the conditional write expected."""

    code = -103


class NoChildrenForEphemeralsError(ZooKeeperError):
    """Ephemeral nodes cannot have children."""

    code = -108


class NodeExistsError(ZooKeeperError):
    """The node already exists."""

    code = -110


class NotEmptyError(ZooKeeperError):
    """The node has children and cannot be deleted."""

    code = -111


class AuthFailedError(ZooKeeperError):
    """The server rejected the credentials; the connection is closed by the server."""

    code = -115


class NotReadOnlyError(ZooKeeperError):
    """A write was sent while connected to a read-only server."""

    code = -119


class ReconfigDisabledError(ZooKeeperError):
    """The ensemble refuses dynamic reconfiguration: ``reconfigEnabled`` is false on its servers.

    Raised by `ZkClient.reconfig`.  Set ``reconfigEnabled=true`` (and
    ``standaloneEnabled=false``) in every member's zoo.cfg, or change the
    membership the static way (edit every zoo.cfg and restart the members).
    """

    code = -123

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        super().__init__(
            message
            or "dynamic reconfiguration is disabled on the ensemble (reconfigEnabled=false)",
            path=path,
        )


class TransactionFailed(ZooKeeperError):
    """A `multi` was rolled back; `results` holds each operation's outcome or error."""

    def __init__(self, results: list[object], failed_index: int, cause: ZooKeeperError) -> None:
        super().__init__(
            f"transaction failed at operation {failed_index}: {cause}", path=cause.path
        )
        self.code = cause.code
        self.results = results
        self.failed_index = failed_index
        self.cause = cause


class InvalidPathError(CoordError, ValueError):
    """A ZooKeeper path is malformed; `path` is the offending value, `reason` says why."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"invalid path {path!r}: {reason}")
        self.path = path
        self.reason = reason


class NodeDataError(CoordError):
    """A recipe's node holds data it did not write (foreign, corrupt or too new).

    The recipe refuses to act on it rather than guess; inspect the node at `path`.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"unexpected data in {path}: {reason}")
        self.path = path
        self.reason = reason


class LeadershipLost(CoordError):
    """Leadership ended while a `leadership()` block ran; its body was cancelled.

    `reason` is one of ``"suspended"``, ``"session lost"``, ``"node deleted"``,
    ``"closed"``, ``"handed over"``.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"leadership of {path} lost: {reason}")
        self.path = path
        self.reason = reason


class LockNotAcquired(CoordError):
    """A non-blocking acquire found the lock held by someone else (`holder`)."""

    def __init__(self, path: str, holder: str | None = None) -> None:
        super().__init__(f"lock {path} is held" + (f" by {holder}" if holder else ""))
        self.path = path
        self.holder = holder


class LockLost(CoordError):
    """The lock stopped being ours while held; the body of its block was cancelled."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"lock {path} lost: {reason}")
        self.path = path
        self.reason = reason


class JobFailed(CoordError):
    """A scheduled job's handler raised; `type` and `message` describe the remote error."""

    def __init__(self, job_id: str, type: str, message: str) -> None:
        super().__init__(f"job {job_id} failed: {type}: {message}")
        self.job_id = job_id
        self.type = type
        self.message = message


class JobCancelled(CoordError):
    """A scheduled job was cancelled (`Scheduler.cancel`) before it finished.

    Raised by `Scheduler.result` for a job whose final status is CANCELLED:
    it never ran, or its handler was cancelled while running.
    """

    def __init__(self, job_id: str, message: str = "cancelled") -> None:
        super().__init__(f"job {job_id} was cancelled: {message}")
        self.job_id = job_id
        self.type = "JobCancelled"
        self.message = message


class JobConflict(CoordError, ValueError):
    """A job id was submitted again with a different job name, payload or priority.

    The job id is the idempotence key: submitting the same id with the same
    name, payload and priority is a no-op, a different one is refused (an HTTP layer
    answers 409).  Submit under a new id, or wait until the old result expires.
    """

    def __init__(self, job_id: str, reason: str) -> None:
        super().__init__(f"job_id: {job_id!r} already exists {reason}")
        self.job_id = job_id
        self.reason = reason


class SubscriberLagged(CoordError):
    """A stream's reader fell `backlog` events behind, so its subscription was ended.

    Raised by the iterator of `Coordinator.connection_events()`,
    `LeaderLatch.changes()` or a cache's `events()` once it has yielded every
    event buffered before (none is lost unseen); the reader had stopped
    reading, and an unread stream cannot grow without limit.  Subscribe again: a new subscription
    starts with the current state.
    """

    def __init__(self, backlog: int) -> None:
        super().__init__(
            f"this subscriber fell {backlog} events behind and was unsubscribed: "
            "read the stream as it comes, or subscribe again for the current state"
        )
        self.backlog = backlog


class CacheOverflowError(CoordError):
    """A cache's subtree holds more than its `limit` of nodes (``max_nodes=``).

    Raised by entering the cache when the first read finds more; later, by
    its `events()` iterators and its exit, once the cache has stopped.  Watch
    a smaller subtree (or fewer levels, ``max_depth=``), or raise the bound.
    """

    def __init__(self, path: str, limit: int) -> None:
        super().__init__(
            f"cache of {path}: more than max_nodes={limit} nodes; "
            "watch a smaller subtree or fewer levels (max_depth=), or raise max_nodes"
        )
        self.path = path
        self.limit = limit
