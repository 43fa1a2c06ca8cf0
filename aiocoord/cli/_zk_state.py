"""Where the embedded ZooKeeper is recorded, and how a running one is found.

One server per user: its folder is `default_dir()` (``$AIOCOORD_ZK_DIR``, else
``$XDG_STATE_HOME/aiocoord/zk``, else ``~/.local/state/aiocoord/zk``), whose
``server.json`` records the pid and port.  A server of ours started from
another folder (``--dir``, or an older aiocoord's ``./.aiocoord/zk``) is found
by what it answers on its port: its ``conf`` names its data folder.  A pid
counts as ours only while its command line names the folder's ``zoo.cfg``, so
a recycled pid is never taken for the server.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..settings import Settings

__all__ = (
    "DEFAULT_PORT",
    "DIR_VARIABLE",
    "EmbeddedServer",
    "default_dir",
    "find_by_port",
    "find_running",
    "is_alive",
    "is_embedded_default",
    "read_state",
    "state_path",
)

DIR_VARIABLE = "AIOCOORD_ZK_DIR"
"""Pins the per-user folder (tests point it at a temporary one)."""
DEFAULT_PORT = 2181
_STATE = "server.json"


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """An embedded server as recorded in its folder's ``server.json``."""

    directory: Path
    pid: int
    port: int
    started: float

    @property
    def connect_string(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.directory / "zk.log"


def default_dir() -> Path:
    """The per-user state folder: ``$AIOCOORD_ZK_DIR``, else the XDG state home's ``aiocoord/zk``."""
    override = os.environ.get(DIR_VARIABLE)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return base / "aiocoord" / "zk"


def state_path(directory: Path) -> Path:
    return directory / _STATE


def is_alive(server: EmbeddedServer) -> bool:
    """Whether the recorded pid still runs this folder's server (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{server.pid}/cmdline").read_bytes()
    except OSError:
        if not Path("/proc/self").exists():  # no procfs: trust the pid alone
            try:
                os.kill(server.pid, 0)
            except OSError:
                return False
            return True
        return False
    return str(server.config_path.resolve()).encode() in cmdline


def read_state(directory: Path, *, clean: bool = True) -> EmbeddedServer | None:
    """The server recorded in `directory` if it still runs, else None.

    A stale or unreadable record is removed unless `clean` is False.
    """
    path = state_path(directory)
    try:
        raw = json.loads(path.read_text())
        server = EmbeddedServer(directory, int(raw["pid"]), int(raw["port"]), float(raw["started"]))
        alive = is_alive(server)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        alive = False
    if not alive:
        if clean:
            with contextlib.suppress(OSError):
                path.unlink()
        return None
    return server


def find_by_port(port: int = DEFAULT_PORT) -> EmbeddedServer | None:
    """The embedded server answering on 127.0.0.1:`port`, whatever folder it was started in.

    Its ``conf`` answer names its data folder, whose parent holds its
    ``server.json``; None when nothing answers there or it is not one of ours.
    """
    from ..testing._expire import four_letter_word

    try:
        conf = four_letter_word("127.0.0.1", port, "conf", 1.0)
    except OSError:
        return None
    for line in conf.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "dataDir" and value.strip():
            data = Path(value.strip())  # <folder>/data/version-2: the server adds its version
            if data.name.startswith("version-"):
                data = data.parent
            # Only read: the folder belongs to whoever started that server.
            found = read_state(data.parent, clean=False)
            return found if found is not None and found.port == port else None
    return None


def find_running(directory: Path | None = None) -> EmbeddedServer | None:
    """The embedded server of `directory`; with None, the user's, from wherever it was started.

    None means the per-user folder (`default_dir()`); unless ``AIOCOORD_ZK_DIR``
    pins that folder, a server of ours answering on the default port is found
    too, from whichever folder it runs.
    """
    found = read_state(default_dir() if directory is None else directory)
    if found is None and directory is None and not os.environ.get(DIR_VARIABLE):
        found = find_by_port(DEFAULT_PORT)
    return found


def is_embedded_default(settings: Settings) -> bool:
    """Whether `settings` point at the embedded server's default address (127.0.0.1:2181)."""
    return settings.addresses in ([("127.0.0.1", DEFAULT_PORT)], [("localhost", DEFAULT_PORT)])
