"""ZooKeeper error codes to `CoordError` subclasses, in one place."""

from __future__ import annotations

from .. import errors

__all__ = ("check", "error_for")

_ERRORS: dict[int, type[errors.ZooKeeperError]] = {
    cls.code: cls
    for cls in (
        errors.NoNodeError,
        errors.NoAuthError,
        errors.BadVersionError,
        errors.NoChildrenForEphemeralsError,
        errors.NodeExistsError,
        errors.NotEmptyError,
        errors.AuthFailedError,
        errors.NotReadOnlyError,
        errors.ReconfigDisabledError,
    )
}

_NAMES = {
    0: "rolled back",
    -1: "system error",
    -2: "runtime inconsistency",
    -3: "data inconsistency",
    -5: "marshalling error",
    -6: "unimplemented (does the server enable this feature?)",
    -7: "operation timeout",
    -8: "bad arguments",
    -13: "new config has no quorum",
    -14: "reconfig in progress",
    -100: "API error",
    -113: "invalid callback",
    -114: "invalid ACL",
    -118: "session moved",
    -120: "ephemeral on local session",
    -121: "no watcher",
    -122: "request timeout",
    -123: "reconfig disabled",
    -124: "session closed because client failed to authenticate",
    -125: "quota exceeded",
    -127: "throttled",
}

_SESSION_EXPIRED = -112
_SASL_REQUIRED = -124
_CONNECTION_LOSS = -4


def error_for(code: int, path: str | None) -> errors.ZooKeeperError:
    """The `CoordError` for a ZooKeeper error code, carrying the client path."""
    cls = _ERRORS.get(code)
    if cls is not None:
        return cls(path=path)
    return errors.ZooKeeperError(
        f"ZooKeeper error {code}: {_NAMES.get(code, 'unknown')}", path=path, code=code
    )


def check(err: int, path: str | None) -> None:
    """Raise what a reply's error code stands for (nothing for 0)."""
    if err == 0:
        return
    if err == _SESSION_EXPIRED:
        raise errors.SessionExpiredError("session expired with the request in flight")
    if err == _CONNECTION_LOSS:
        raise errors.ConnectionLostError("connection lost with the request in flight")
    if err == _SASL_REQUIRED:
        raise errors.AuthFailedError(
            "the server requires a SASL login and closed the session", path=path, code=err
        )
    raise error_for(err, path)
