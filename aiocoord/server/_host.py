"""What this machine offers a ZooKeeper server: the installed jars and free loopback ports.

The server is the Debian ``zookeeper`` package's jars (``/usr/share/java``) run
by ``java`` with the package's ``log4j`` configuration (``/etc/zookeeper/conf``).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path

__all__ = (
    "DEFAULT_CONF_DIR",
    "DEFAULT_JAR_DIR",
    "ZooKeeperNotInstalledError",
    "classpath",
    "free_ports",
    "port_free",
    "zookeeper_installed",
)

DEFAULT_JAR_DIR = Path("/usr/share/java")
DEFAULT_CONF_DIR = Path("/etc/zookeeper/conf")
_REQUIRED_JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-log4j12.jar",
    "log4j-1.2.jar",
    "metrics-core.jar",
    "commons-cli.jar",
)
_VERSIONED_JAR = re.compile(r"-\d+\.\d+")


class ZooKeeperNotInstalledError(RuntimeError):
    """Raised when java or the ZooKeeper jars are missing; run ``scripts/setup``."""


def zookeeper_installed(jar_dir: Path = DEFAULT_JAR_DIR) -> bool:
    """Whether java and the ZooKeeper jars needed to start a server are present."""
    return shutil.which("java") is not None and all(
        (jar_dir / jar).is_file() for jar in _REQUIRED_JARS
    )


def classpath(jar_dir: Path = DEFAULT_JAR_DIR, conf_dir: Path = DEFAULT_CONF_DIR) -> str:
    """The server's class path; raises ``ZooKeeperNotInstalledError`` if jars are missing."""
    missing = [jar for jar in _REQUIRED_JARS if not (jar_dir / jar).is_file()]
    if missing or shutil.which("java") is None:
        what = ", ".join(missing) if missing else "java"
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper is not installed (missing {what} in {jar_dir}); "
            "run scripts/setup (it installs the Debian 'zookeeper' package)"
        )
    netty = sorted(str(p) for p in jar_dir.glob("netty-*.jar") if not _VERSIONED_JAR.search(p.name))
    return os.pathsep.join([*(str(jar_dir / j) for j in _REQUIRED_JARS), *netty, str(conf_dir)])


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports that were free a moment ago."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_free(port: int) -> bool:
    """Whether a server could bind 127.0.0.1:``port`` now (one in TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as a server binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
