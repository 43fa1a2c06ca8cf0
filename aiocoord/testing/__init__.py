"""Real ZooKeeper for tests: servers, ensembles, session expiry and network faults.

``ZooKeeperServer`` (from `aiocoord.server`) and ``ZooKeeperEnsemble`` run the
real Java server from the Debian ``zookeeper`` package on free loopback ports; ``expire_session`` and
``kill_session`` expire a live session on the server; ``FaultProxy``,
``SilentListener`` and ``GarbageListener`` stand in for a bad network or a bad
server. ``FakeZooKeeper`` is a scripted server: it serves a real client from an
in-memory tree, and its script may replace any reply with other bytes (mutated,
truncated, oversized, garbage), silence or a hang-up, to test how a client
copes with a server that misbehaves. Installing aiocoord also installs a pytest plugin with the fixtures
``zk_server``, ``zk_ensemble``, ``zk_chroot`` and ``coordinator``.
"""

from __future__ import annotations

from ..server import ZooKeeperNotInstalledError as ZooKeeperNotInstalledError
from ..server import ZooKeeperServer as ZooKeeperServer
from ..server import four_letter_word as four_letter_word
from ..server import kill_session as kill_session
from ..server import zookeeper_installed as zookeeper_installed
from ._ensemble import EnsembleMember as EnsembleMember
from ._ensemble import ZooKeeperEnsemble as ZooKeeperEnsemble
from ._expire import expire_session as expire_session
from ._fake_server import Answer as Answer
from ._fake_server import FakeRequest as FakeRequest
from ._fake_server import FakeZooKeeper as FakeZooKeeper
from ._listeners import GarbageListener as GarbageListener
from ._listeners import SilentListener as SilentListener
from ._proxy import FaultProxy as FaultProxy

__all__ = (
    "Answer",
    "EnsembleMember",
    "FakeRequest",
    "FakeZooKeeper",
    "FaultProxy",
    "GarbageListener",
    "SilentListener",
    "ZooKeeperEnsemble",
    "ZooKeeperNotInstalledError",
    "ZooKeeperServer",
    "expire_session",
    "four_letter_word",
    "kill_session",
    "zookeeper_installed",
)
