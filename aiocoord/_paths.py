"""ZooKeeper path validation: the one check of a path, below the settings and the client.

The rules are ZooKeeper's own (``PathUtils.validatePath``) plus two that keep
recipes safe: the reserved ``/zookeeper`` tree is refused unless asked for, and
the error names the offending path and the rule it broke.  `Settings` checks a
chroot and a namespace with it, `aiocoord.zk.paths` every request's path.
"""

from __future__ import annotations

import functools
import re

from .errors import InvalidPathError

__all__ = ("validate_path",)

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
