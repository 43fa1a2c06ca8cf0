"""The argument checks the recipes, the scheduler and the integrations share.

Each error names the argument.  `check_int` and `check_node_name` raise
`ConfigError` (a `ValueError` and a `TypeError`) whatever is wrong; the
others raise `TypeError` for a value of the wrong type and `ConfigError` for
one out of range.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Literal

from ._paths import validate_path
from ._records import show
from .errors import ConfigError, CoordinatorClosedError, InvalidPathError
from .session import Coordinator
from .zk.client import PROTECTED_PREFIX

__all__ = (
    "LAYOUTS",
    "Layout",
    "check_blocking",
    "check_bytes",
    "check_coordinator",
    "check_int",
    "check_layout",
    "check_node_name",
    "check_open",
    "check_root",
    "check_seconds",
    "check_timeout",
)

_LARGEST = sys.float_info.max


def check_coordinator(coord: object, name: str = "coord") -> Coordinator:
    """`coord` if it is a `Coordinator`, else `TypeError` naming `name`."""
    if not isinstance(coord, Coordinator):
        raise TypeError(f"{name} must be an aiocoord.Coordinator, not {type(coord).__name__}")
    return coord


def check_open(coord: Coordinator, what: str) -> None:
    """`CoordinatorClosedError` naming `what` unless `coord` is entered and not closed."""
    if coord.state is None or coord.client.session.closed:
        raise CoordinatorClosedError(
            f"the coordinator of {what} is not open: use `async with aiocoord.connect(...)` first"
        )


def check_root(root: object, name: str = "root") -> str:
    """`root` if it is a valid absolute path, else `InvalidPathError` whose reason names `name`."""
    try:
        return validate_path(root)
    except InvalidPathError as exc:
        raise InvalidPathError(root, f"{name} {exc.reason}") from None


def check_seconds(
    name: str, value: object, *, positive: bool = False, most: float = _LARGEST
) -> float:
    """`value` as a float number of seconds, else an error naming `name`.

    A number (a bool is not), ``>= 0`` (``> 0`` if `positive`) and at most
    `most`: finite unless `most` is ``math.inf``; NaN never passes.  A wrong
    type raises `TypeError`, a value out of range `ConfigError`.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    # Compared before any float(): a huge int is refused (or is infinity), never an OverflowError.
    if not ((value > 0) if positive else (value >= 0)) or not value <= most:
        finite = "" if most == math.inf else "finite "
        least = "> 0" if positive else ">= 0"
        limit = f" up to {most:g}" if most < _LARGEST else ""
        raise ConfigError(
            name, f"must be a {finite}number of seconds {least}{limit}, not {show(value)}"
        )
    return float(value) if value <= _LARGEST else math.inf


def check_timeout(value: object, name: str = "timeout") -> float | None:
    """A wait's bound: None (no bound) or seconds ``>= 0``, infinity included."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds or None, not {type(value).__name__}")
    return check_seconds(name, value, most=math.inf)


def check_blocking(blocking: object, timeout: object) -> float | None:
    """The wait's bound: `timeout` (checked), or 0 for ``blocking=False``, which takes none."""
    if not isinstance(blocking, bool):
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    seconds = check_timeout(timeout)
    if blocking:
        return seconds
    if seconds is not None and seconds != 0:
        raise ConfigError(
            "timeout", f"blocking=False never waits, so it takes no timeout (got {seconds:g})"
        )
    return 0.0


def check_bytes(value: object, name: str = "data") -> bytes:
    """`value` as `bytes` (bytes, bytearray or memoryview), else `TypeError` naming `name`."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}")
    return bytes(value)


def check_int(
    name: str, value: object, *, least: int | None = None, most: int | None = None
) -> int:
    """`value` if it is an int (a bool is not) from `least` to `most`, else `ConfigError` naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be an int, not {type(value).__name__}")
    if (least is not None and value < least) or (most is not None and value > most):
        if most is None:
            bound = f"at least {least}"
        elif least is None:
            bound = f"at most {most}"
        else:
            bound = f"from {least} to {most}"
        raise ConfigError(name, f"must be {bound}, not {value}")
    return value


def check_node_name(
    name: str,
    value: object,
    *,
    protected: bool = True,
    pattern: re.Pattern[str] | None = None,
    rule: str = "",
) -> str:
    """`value` if it can name one ZooKeeper node, else `ConfigError` naming `name`.

    A str, not empty, without ``/``, that makes a valid path under the root
    (no ``.`` or ``..``, no control characters; ``zookeeper`` is fine below the
    root).  With `protected` False, Curator's protected prefix ``_c_`` is refused
    too (a group member's node would be mistaken for a protected create).  A
    `pattern` narrows it further (a job's names): a name that does not match
    it whole is refused, the message saying `rule`.
    """
    if not isinstance(value, str):
        raise ConfigError(name, f"must be a str, not {type(value).__name__}")
    if pattern is not None and not pattern.fullmatch(value):
        raise ConfigError(name, f"{value!r} is not valid: {rule}")
    if not value or "/" in value:
        raise ConfigError(name, f"{value!r} must be a non-empty node name without '/'")
    try:
        validate_path("/" + value, allow_reserved=True)
    except InvalidPathError as exc:
        raise ConfigError(name, f"{value!r} cannot name a ZooKeeper node: {exc.reason}") from None
    if not protected and value.startswith(PROTECTED_PREFIX):
        raise ConfigError(name, f"{value!r} must not start with {PROTECTED_PREFIX!r}")
    return value


Layout = Literal["curator", "kazoo"]
LAYOUTS: tuple[Layout, ...] = ("curator", "kazoo")


def check_layout(value: object, name: str = "layout") -> Layout:
    """A recipe's node layout: ``"curator"`` (Curator's, the default) or ``"kazoo"`` (kazoo
    2.x's), else `ConfigError` naming `name`."""
    if value == "curator" and isinstance(value, str):
        return "curator"
    if value == "kazoo" and isinstance(value, str):
        return "kazoo"
    raise ConfigError(name, f"must be 'curator' or 'kazoo', not {value!r}")
