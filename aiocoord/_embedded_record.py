"""Where ``aiocoord zk start`` records its server, and whether that server still runs.

Shared by `aiocoord.connect` (which, with no hosts configured, uses the
recorded server) and `aiocoord.server` (which writes the record).  Reads
files only; never connects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ("DIR_VARIABLE", "STATE_FILE", "default_dir", "is_alive", "recorded_connect_string")

DIR_VARIABLE = "AIOCOORD_ZK_DIR"
STATE_FILE = "server.json"


def default_dir() -> Path:
    """The per-user state folder: ``$AIOCOORD_ZK_DIR``, else the XDG state home's ``aiocoord/zk``."""
    override = os.environ.get(DIR_VARIABLE)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "aiocoord" / "zk"


def is_alive(pid: int, config_path: Path) -> bool:
    """Whether `pid` still runs the server of `config_path` (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        if not Path("/proc/self").exists():  # no procfs: trust the pid alone
            try:
                os.kill(pid, 0)
            except OSError:
                return False
            return True
        return False
    return str(config_path.resolve()).encode() in cmdline


def recorded_connect_string(directory: Path | None = None) -> str | None:
    """``127.0.0.1:<port>`` of the server recorded in `directory` (default: the per-user
    folder) if its process is alive, else None (no record, unreadable, or stale; a stale
    record is left for ``aiocoord zk`` to clean)."""
    folder = default_dir() if directory is None else directory
    try:
        raw = json.loads((folder / STATE_FILE).read_text())
        pid, port = int(raw["pid"]), int(raw["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return f"127.0.0.1:{port}" if is_alive(pid, folder / "zoo.cfg") else None
