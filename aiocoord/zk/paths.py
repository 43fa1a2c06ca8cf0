"""ZooKeeper path validation and chroot handling.

The rules are ZooKeeper's own (``PathUtils.validatePath``) plus two that keep
recipes safe: the reserved ``/zookeeper`` tree is refused unless asked for, and
the error names the offending path and the rule it broke.
"""

from __future__ import annotations

import functools
import re

from ..errors import InvalidPathError

__all__ = ("join", "parent", "basename", "validate_path", "add_chroot", "strip_chroot")

_MAX_PATH = 4096


# The characters ZooKeeper's PathUtils refuses: NUL, controls, surrogates and private use, specials.
_BAD_CHAR = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]")
_BAD_SEGMENT = re.compile(r"(?:^|/)(?:|\.|\.\.)(?:/|$)")


def validate_path(path: object, *, allow_reserved: bool = False, sequential: bool = False) -> str:
    """Return `path` if it is a valid absolute ZooKeeper path, else raise `InvalidPathError`.

    `sequential` allows a trailing ``/`` (the server appends the counter).
    """
    if not isinstance(path, str):
        raise InvalidPathError(path, f"must be a str, not {type(path).__name__}")
    # Recipes send requests on the same few paths over and over (a hand-over's delete,
    # watch and listing): the paths found valid lately are not checked again.
    return _checked(path, allow_reserved, sequential)


@functools.lru_cache(maxsize=512)
def _checked(path: str, allow_reserved: bool, sequential: bool) -> str:
    if not path:
        raise InvalidPathError(path, "is empty")
    if not path.startswith("/"):
        raise InvalidPathError(path, "must start with '/'")
    if len(path.encode("utf-8", "surrogatepass")) > _MAX_PATH:
        raise InvalidPathError(path, f"is longer than {_MAX_PATH} bytes")
    if path == "/":
        return path
    body = path[1:-1] if (sequential and path.endswith("/")) else path[1:]
    if path.endswith("/") and not sequential:
        raise InvalidPathError(path, "must not end with '/'")
    if _BAD_SEGMENT.search(body):
        for segment in body.split("/"):
            if segment == "":
                raise InvalidPathError(path, "has an empty segment ('//')")
            if segment in (".", ".."):
                raise InvalidPathError(path, f"has a relative segment {segment!r}")
    bad = _BAD_CHAR.search(path)
    if bad:
        raise InvalidPathError(path, f"has an invalid character {bad.group()!r}")
    if not allow_reserved and (path == "/zookeeper" or path.startswith("/zookeeper/")):
        raise InvalidPathError(path, "is in the reserved /zookeeper tree")
    return path


def join(*parts: str) -> str:
    """Join path pieces with single slashes: ``join("/a", "b")`` is ``"/a/b"``."""
    out = "/".join(p.strip("/") for p in parts if p.strip("/"))
    return "/" + out


def parent(path: str) -> str:
    """The parent of an absolute path (``"/"`` for top-level nodes)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    """The last segment of a path."""
    return path.rsplit("/", 1)[1]


def add_chroot(chroot: str | None, path: str) -> str:
    """The server-side path of a client path under `chroot`."""
    if not chroot:
        return path
    return chroot if path == "/" else chroot + path


def strip_chroot(chroot: str | None, path: str) -> str:
    """The client path of a server-side path; paths outside the chroot are returned as they are."""
    if not chroot:
        return path
    if path == chroot:
        return "/"
    if path.startswith(chroot + "/"):
        return path[len(chroot) :]
    return path
