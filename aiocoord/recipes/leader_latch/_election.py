"""The leader latch's pure half: events, node layouts and election order.

Nothing here awaits or talks to ZooKeeper.  The decision is the queue's
(`recipes/_queue`, shared with the mutex) with its `first` rule: the first
node in election order leads.

Two layouts, each able to share one parent with the Java recipe it copies
(Curator's ``LeaderLatch``, ZooKeeper's ``LeaderElectionSupport``):

- ``curator``: Apache Curator's LeaderLatch, the queue's ``LATCH`` names:
  ``_c_<uuid>-latch-<seq>``, sorted by the text after the *last* ``latch-``.
  The selector's ``curator`` layout is Curator's LeaderSelector, which is an
  ``InterProcessMutex`` at the path: the queue's ``LOCK`` names,
  ``_c_<uuid>-lock-<seq>`` (`SELECTOR_LAYOUTS`).  The two are separate
  elections, in Curator as here: neither sorts the other's nodes among its own.
  A selector with ``layout="latch"`` takes the latch's nodes instead, to share
  one election with latches.
- ``zookeeper``: ZooKeeper's ``LeaderElectionSupport``.  Names are ``n_<seq>``,
  sorted by the integer after ``n_``.  The Java recipe throws on any other name;
  here such children sort after every offer, so they never lead.
- ``kazoo``: kazoo 2.x's ``Election``, which is a kazoo ``Lock`` at the path:
  the queue's `KAZOO_LOCK` names, ``<uuid4 hex>__lock__<seq>`` holding the
  identifier, in kazoo's order (by sequence number); the lock's holder leads.
  The parent is made persistent, as kazoo's ``ensure_path`` makes it.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from ...errors import ConfigError, InvalidPathError, LeadershipLost
from ...zk.paths import validate_path
from ...zk.types import CreateMode
from .._loss import check_lose_on_suspend
from .._queue import (
    KAZOO_LOCK,
    LATCH,
    LOCK,
    CuratorNames,
    KazooNames,
    check_participant_id,
    default_participant_id,
)
from .._tenure import Tenure

__all__ = (
    "CloseMode",
    "check_latch_arguments",
    "CURATOR",
    "KAZOO",
    "LAYOUTS",
    "SELECTOR",
    "SELECTOR_LAYOUTS",
    "ZOOKEEPER",
    "ElectionEvent",
    "ElectionState",
    "LatchLayout",
    "LeadershipTerm",
)


class ElectionState(enum.Enum):
    """A latch's election states, those of ZooKeeper's election recipe."""

    OFFERED = "OFFERED"  # our node was created
    FOLLOWING = "FOLLOWING"  # watching a predecessor
    ELECTED = "ELECTED"  # leader
    LOST_LEADERSHIP = "LOST_LEADERSHIP"  # leader no more; `reason` says why
    FAILED = "FAILED"  # an unexpected error; the latch keeps trying
    STOPPED = "STOPPED"  # the latch was left; the stream ends


@dataclass(frozen=True, slots=True)
class ElectionEvent:
    """One step of the election.

    `node` is our node's path; `token` the term's fencing token (ELECTED,
    LOST_LEADERSHIP); `predecessor` the node we watch (FOLLOWING); `reason`
    why (LOST_LEADERSHIP, FAILED); `at` the monotonic time it happened.
    `started` is the monotonic time the phase this event completes began
    (None if it has none), as ZooKeeper's election recipe pairs ``*_START``
    with ``*_COMPLETE``: OFFERED, the create of our node; FOLLOWING and
    ELECTED, the look at the election that decided it (a listing, or the
    deletion of the node ahead); LOST_LEADERSHIP, the term's start.
    """

    state: ElectionState
    node: str | None = None
    token: int | None = None
    predecessor: str | None = None
    reason: str = ""
    at: float = field(default_factory=time.monotonic, compare=False)
    started: float | None = field(default=None, compare=False)

    @property
    def took(self) -> float | None:
        """Seconds from the phase's start to this event (None without a start)."""
        return None if self.started is None else self.at - self.started


class LeadershipTerm:
    """One period of leadership.  `token` is the fencing token: our node's czxid.

    A later leader's token is larger than every earlier leader's, since its node
    was created later.  `lost` is None while the term lasts, then the reason.
    `tenure` is what the latch's ``leadership()`` bodies run under.
    """

    __slots__ = ("node", "participant_id", "started_at", "tenure", "token")

    def __init__(self, token: int, node: str, participant_id: str, path: str) -> None:
        self.token = token
        self.node = node
        self.participant_id = participant_id
        self.started_at = time.monotonic()
        self.tenure = Tenure(path, LeadershipLost)

    @property
    def lost(self) -> str | None:
        return self.tenure.lost

    def __repr__(self) -> str:
        state = "active" if self.lost is None else f"lost: {self.lost}"
        return f"<LeadershipTerm token=0x{self.token:x} {state}>"


# --- layouts and order -----------------------------------------------------------------------

_OFFER = re.compile(r"n_(-?[0-9]+)")


def zookeeper_sort_key(name: str) -> tuple[int, int, str]:
    """ZooKeeper's recipe order: ``n_<int>`` by number; other names after them, by name."""
    match = _OFFER.fullmatch(name)
    if match is not None and -(2**31) <= int(match.group(1)) < 2**31:
        return (0, int(match.group(1)), name)
    return (1, 0, name)


@dataclass(frozen=True, slots=True)
class LatchLayout:
    """How one Java recipe names, orders and fills its election nodes."""

    name: str
    prefix: str  # the node name given to the (protected) sequential create
    protected: bool  # Curator's `_c_<uuid>-` names, found again after a connection loss
    curator: CuratorNames | None = None  # a Curator layout's names and order
    kazoo: KazooNames | None = None  # a kazoo layout's: its nodes named and found as kazoo's

    def sort(self, names: Sequence[str]) -> list[str]:
        """Children in election order (index 0 leads), as the layout's recipe sorts them."""
        if self.curator is not None:
            return self.curator.sort(names)
        if self.kazoo is not None:
            return self.kazoo.sort(names)
        return sorted(names, key=zookeeper_sort_key)

    @property
    def parent_mode(self) -> CreateMode:
        """How the path is made when missing: kazoo's persistent nodes, else containers."""
        return CreateMode.PERSISTENT if self.kazoo is not None else CreateMode.CONTAINER


CURATOR: Final = LatchLayout("curator", LATCH.marker, protected=True, curator=LATCH)
ZOOKEEPER: Final = LatchLayout("zookeeper", "n_", protected=False)
# kazoo's Election: a kazoo Lock at the path, so the kazoo mutex's nodes.
KAZOO: Final = LatchLayout("kazoo", KAZOO_LOCK.marker, protected=True, kazoo=KAZOO_LOCK)
LAYOUTS: Final[Mapping[str, LatchLayout]] = {
    "curator": CURATOR,
    "zookeeper": ZOOKEEPER,
    "kazoo": KAZOO,
}
# Curator's LeaderSelector: an InterProcessMutex at the path, so the mutex's nodes.
SELECTOR: Final = LatchLayout("curator", LOCK.marker, protected=True, curator=LOCK)
# A selector's: its own Curator layout by default; "latch" joins the latches' election.
SELECTOR_LAYOUTS: Final[Mapping[str, LatchLayout]] = {
    "curator": SELECTOR,
    "latch": CURATOR,
    "zookeeper": ZOOKEEPER,
}


CloseMode = Literal["notify", "silent"]


def check_latch_arguments(
    path: str,
    participant_id: str | None,
    layout: str,
    lose_on_suspend: object,
    close_mode: object,
    layouts: Mapping[str, LatchLayout] = LAYOUTS,
) -> tuple[LatchLayout, str]:
    """A latch's arguments checked (errors name them): its layout (of `layouts`) and id."""
    validate_path(path)
    if path == "/":
        raise InvalidPathError(path, "a latch needs a node of its own, not the root")
    if layout not in layouts:
        names = " or ".join(repr(name) for name in layouts)
        raise ConfigError("layout", f"must be {names}, not {layout!r}")
    check_lose_on_suspend(lose_on_suspend)
    if close_mode not in ("notify", "silent"):
        raise ConfigError("close_mode", f"must be 'notify' or 'silent', not {close_mode!r}")
    pid = default_participant_id() if participant_id is None else participant_id
    return layouts[layout], check_participant_id(pid)
