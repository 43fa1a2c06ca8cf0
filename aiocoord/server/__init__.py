"""Run a real ZooKeeper server on this machine: the embedded server and its building blocks.

The server is the installed Debian ``zookeeper`` package run by ``java`` on
loopback.  ``ZooKeeperProcess`` configures, starts, probes and stops one JVM;
``ZooKeeperServer`` is a standalone one in a temporary folder on a free port
(``with ZooKeeperServer() as zk:``).  The embedded server (``aiocoord zk
start|stop|status``) is one per user, recorded in a state folder and found
again from any process.  The probes talk to a server over raw sockets: a real
handshake, four-letter words, and expiring a session.  Every call blocks the
calling thread; ``aiocoord.testing`` builds its test servers on these.
"""

from __future__ import annotations

from ._embedded import DEFAULT_PORT as DEFAULT_PORT
from ._embedded import DIR_VARIABLE as DIR_VARIABLE
from ._embedded import EmbeddedServer as EmbeddedServer
from ._embedded import EmbeddedServerError as EmbeddedServerError
from ._embedded import default_dir as default_dir
from ._embedded import embedded_status as embedded_status
from ._embedded import find_by_port as find_by_port
from ._embedded import find_running as find_running
from ._embedded import is_embedded_default as is_embedded_default
from ._embedded import read_state as read_state
from ._embedded import start_embedded as start_embedded
from ._embedded import stop_embedded as stop_embedded
from ._host import DEFAULT_CONF_DIR as DEFAULT_CONF_DIR
from ._host import DEFAULT_JAR_DIR as DEFAULT_JAR_DIR
from ._host import ZooKeeperNotInstalledError as ZooKeeperNotInstalledError
from ._host import free_ports as free_ports
from ._host import zookeeper_installed as zookeeper_installed
from ._probe import four_letter_word as four_letter_word
from ._probe import kill_session as kill_session
from ._probe import probe_handshake as probe_handshake
from ._probe import server_mode as server_mode
from ._process import ZooKeeperProcess as ZooKeeperProcess
from ._process import ZooKeeperServer as ZooKeeperServer
from ._process import make_temp_dir as make_temp_dir
from ._process import remove_temp_dir as remove_temp_dir
from ._process import started_processes as started_processes

__all__ = (
    # the installation and the machine
    "DEFAULT_CONF_DIR",
    "DEFAULT_JAR_DIR",
    "ZooKeeperNotInstalledError",
    "free_ports",
    "zookeeper_installed",
    # server processes
    "ZooKeeperProcess",
    "ZooKeeperServer",
    "make_temp_dir",
    "remove_temp_dir",
    "started_processes",
    # probes over raw sockets
    "four_letter_word",
    "kill_session",
    "probe_handshake",
    "server_mode",
    # the embedded server
    "DEFAULT_PORT",
    "DIR_VARIABLE",
    "EmbeddedServer",
    "EmbeddedServerError",
    "default_dir",
    "embedded_status",
    "find_by_port",
    "find_running",
    "is_embedded_default",
    "read_state",
    "start_embedded",
    "stop_embedded",
)
