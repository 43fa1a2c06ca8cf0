"""Argument checks shared by the requests: a bad argument fails before anything is sent."""

from __future__ import annotations

from collections.abc import Sequence

from .types import ACL, CreateMode

__all__ = ("MAX_DATA", "check_acl", "check_data", "check_mode", "check_version")

MAX_DATA = 0xFFFFF  # jute.maxbuffer's default: the server refuses larger packets


def check_data(data: object, name: str = "data") -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{name} must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_DATA:
        raise ValueError(f"{name} is {len(raw)} bytes; ZooKeeper accepts at most {MAX_DATA}")
    return raw


def check_version(version: object) -> int:
    if not isinstance(version, int) or isinstance(version, bool) or not -1 <= version <= 0x7FFFFFFF:
        raise ValueError(f"version must be an int >= -1, not {version!r}")
    return version


def check_mode(mode: object, ttl: object) -> CreateMode:
    if not isinstance(mode, CreateMode):
        raise TypeError(f"mode must be a CreateMode, not {mode!r}")
    if mode.ttl:
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            raise ValueError(
                f"ttl must be a positive number of milliseconds for {mode.name}, not {ttl!r}"
            )
    elif ttl is not None:
        raise ValueError(f"ttl is only valid with a *_WITH_TTL mode, not {mode.name}")
    return mode


def check_acl(acl: object) -> tuple[ACL, ...] | None:
    if acl is None:
        return None
    if isinstance(acl, ACL):
        acl = (acl,)
    if not isinstance(acl, Sequence) or not acl or not all(isinstance(a, ACL) for a in acl):
        raise TypeError("acl must be a non-empty sequence of aiocoord.zk.ACL")
    return tuple(acl)
