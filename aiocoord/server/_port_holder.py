"""Which program listens on a local TCP port, for ``aiocoord zk start``'s "port taken" message.

Read from Linux's ``/proc`` (the listening socket's inode in ``/proc/net/tcp``
and ``tcp6``, then the process holding that inode among its open files), so
no tool needs to be installed.  Another user's process cannot be looked into
without privileges: then, and on other systems, the answer is None.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ("port_holder",)

_LISTEN = "0A"
_PROC = Path("/proc")


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in (_PROC / "net" / table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) < 10 or fields[3] != _LISTEN:
                    continue
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def port_holder(port: int) -> str | None:
    """``"python3 (pid 4242): python3 -m http.server 2181"`` for the program listening on
    `port`, or None when it cannot be told."""
    inodes = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    if not inodes:
        return None
    for proc in _PROC.iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in os.scandir(proc / "fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(fd.path) in inodes:
                        return _describe(proc)
    return None


def _describe(proc: Path) -> str:
    name = (proc / "comm").read_text().strip()
    with contextlib.suppress(OSError):
        argv = (proc / "cmdline").read_bytes().split(b"\0")
        command = " ".join(a.decode("utf-8", "replace") for a in argv if a)
        if len(command) > 120:
            command = command[:117] + "..."
        if command:
            return f"{name} (pid {proc.name}): {command}"
    return f"{name} (pid {proc.name})"
