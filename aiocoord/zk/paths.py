"""ZooKeeper paths: validation (`validate_path`, from `aiocoord._paths`), joining, chroots.

The validation rules are ZooKeeper's own (``PathUtils.validatePath``) plus two
that keep recipes safe: the reserved ``/zookeeper`` tree is refused unless
asked for, and the error names the offending path and the rule it broke.  They
live below the settings, which check a chroot and a namespace with them.
"""

from __future__ import annotations

from .._paths import validate_path

__all__ = ("join", "parent", "basename", "validate_path", "add_chroot", "strip_chroot")


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
