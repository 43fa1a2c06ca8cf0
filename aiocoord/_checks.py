"""The argument checks the recipes, the scheduler and the integrations share.

Each error names the argument: `TypeError` for a value of the wrong type,
`ConfigError` (a `ValueError`) for one out of range.
"""

from __future__ import annotations

import math
import sys
from typing import Literal

from ._paths import validate_path
from ._records import show
from .errors import ConfigError, InvalidPathError
from .session import Coordinator

__all__ = (
    "LAYOUTS",
    "Layout",
    "check_bytes",
    "check_coordinator",
    "check_layout",
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


def check_bytes(value: object, name: str = "data") -> bytes:
    """`value` as `bytes` (bytes, bytearray or memoryview), else `TypeError` naming `name`."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}")
    return bytes(value)


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
