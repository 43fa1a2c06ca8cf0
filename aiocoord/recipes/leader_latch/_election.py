"""The leader latch's pure half: events, node layouts, election order and the decision.

Nothing here awaits or talks to ZooKeeper, so the whole table is tested directly
(tests/zk/test_leader_latch.py).  `_latch.py` feeds it the children it listed,
its own node and the session it is on, and acts on the `Move`; it re-exports
the public types defined here.

Two layouts share one parent with the Java recipes they copy:

- ``curator``: Apache Curator's LeaderLatch.  Names are ``_c_<uuid>-latch-<seq>``;
  children sort by the text after the *last* ``latch-`` (a name without it sorts
  by its whole name and still counts as a contender, as in Curator's
  ``StandardLockInternalsDriver.standardFixForSorting``), compared as Java's
  ``String.compareTo`` does (UTF-16 code units).
- ``zookeeper``: ZooKeeper's ``LeaderElectionSupport``.  Names are ``n_<seq>``,
  sorted by the integer after ``n_``.  The Java recipe throws on any other name;
  here such children sort after every offer, so they never lead.
"""

from __future__ import annotations

import enum
import os
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from ...errors import ConfigError, LeadershipLost
from .._tenure import Tenure

__all__ = (
    "CURATOR",
    "LAYOUTS",
    "ZOOKEEPER",
    "Move",
    "ElectionEvent",
    "ElectionState",
    "Follow",
    "MAX_ID_BYTES",
    "LatchLayout",
    "Lead",
    "LeadershipTerm",
    "Missing",
    "Ordering",
    "Participant",
    "Stale",
    "check_participant_id",
    "curator_sort_key",
    "next_move",
    "default_participant_id",
    "may_lead",
    "sort_children",
    "zookeeper_sort_key",
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
    """

    state: ElectionState
    node: str | None = None
    token: int | None = None
    predecessor: str | None = None
    reason: str = ""
    at: float = field(default_factory=time.monotonic, compare=False)


@dataclass(frozen=True, slots=True)
class Participant:
    """A participant as its node says: `id` (the node's data) and whether it leads."""

    id: str
    is_leader: bool
    node: str = field(default="", compare=False)


MAX_ID_BYTES = 1024  # stored in every election node and read by every observer


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


def default_participant_id() -> str:
    """``<host name>-<pid>``: unique enough to tell processes apart in `participants()`."""
    return f"{socket.gethostname()}-{os.getpid()}"


def check_participant_id(participant_id: object) -> str:
    """`participant_id` if valid, else `TypeError` or `ConfigError` naming it."""
    if not isinstance(participant_id, str):
        raise TypeError(f"participant_id must be a str, not {type(participant_id).__name__}")
    if not participant_id:
        raise ConfigError("participant_id", "must not be empty")
    try:
        size = len(participant_id.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError("participant_id", "must be encodable as UTF-8") from exc
    if size > MAX_ID_BYTES:
        raise ConfigError("participant_id", f"is {size} bytes of UTF-8; at most {MAX_ID_BYTES}")
    return participant_id


# --- layouts and order -----------------------------------------------------------------------

_LATCH = "latch-"
_OFFER = re.compile(r"n_(-?[0-9]+)")


def curator_sort_key(name: str) -> str:
    """Curator's sort key: the text after the last ``latch-``, else the whole name."""
    index = name.rfind(_LATCH)
    return name[index + len(_LATCH) :] if index >= 0 else name


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


CURATOR: Final = LatchLayout("curator", _LATCH, protected=True)
ZOOKEEPER: Final = LatchLayout("zookeeper", "n_", protected=False)
LAYOUTS: Final = {"curator": CURATOR, "zookeeper": ZOOKEEPER}


def sort_children(names: Sequence[str], layout: LatchLayout) -> list[str]:
    """Children in election order (index 0 leads), as the layout's Java recipe sorts them."""
    if layout is ZOOKEEPER:
        return sorted(names, key=zookeeper_sort_key)
    keys = [curator_sort_key(n) for n in names]
    if all(k.isascii() for k in keys):
        # Code-point order is Java's UTF-16 order for ASCII (the only case in practice).
        order = sorted(range(len(names)), key=lambda i: (keys[i], names[i]))
    else:
        utf16: Callable[[str], bytes] = lambda s: s.encode("utf-16-be", "surrogatepass")  # noqa: E731
        order = sorted(range(len(names)), key=lambda i: (utf16(keys[i]), utf16(names[i])))
    return [names[i] for i in order]


# --- the decision ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Lead:
    """Our node is first: lead (once `may_lead` agrees)."""


@dataclass(frozen=True, slots=True)
class Follow:
    """Watch `predecessor`, the node just ahead of ours; `ahead` nodes precede ours.

    Nodes created after the listing sort after ours, so the nodes ahead can only
    go: when the predecessor goes, the next one ahead in the same listing is the
    new predecessor, and when none is left we lead, with no listing in between.
    """

    predecessor: str
    ahead: int


@dataclass(frozen=True, slots=True)
class Missing:
    """Our node is not among the children: someone deleted it (or its parent); join again."""


@dataclass(frozen=True, slots=True)
class Stale:
    """Our node belongs to an earlier session: delete it and join again at the tail."""


Move = Lead | Follow | Missing | Stale


class Ordering:
    """Children in election order, with each name's position; built once per listing."""

    __slots__ = ("_position", "names")

    def __init__(self, children: Sequence[str], layout: LatchLayout) -> None:
        self.names = sort_children(children, layout)
        self._position = {name: i for i, name in enumerate(self.names)}

    def position(self, name: str) -> int | None:
        return self._position.get(name)


def next_move(order: Ordering, ours: str, *, owner: int, session_id: int | None) -> Move:
    """What to do given a listing in election order, our node's name and owner, and the session.

    `owner` is the ephemeral owner our node was created with.  A node owned by
    another session is never led on, even when it is still listed first: the
    server deletes it as soon as it expires that session, and another
    participant would lead too (Curator's CURATOR-696).
    """
    if session_id is None or owner != session_id:
        return Stale()
    index = order.position(ours)
    if index is None:
        return Missing()
    if index == 0:
        return Lead()
    return Follow(order.names[index - 1], index)


def may_lead(*, owner: int, session_id: int | None, connected: bool, node_gone: bool) -> bool:
    """The last check before leadership is granted, made with no await after it.

    Our node must have been created by the session we are connected on right
    now (CURATOR-696), and must not have been reported deleted.
    """
    return connected and not node_gone and session_id is not None and owner == session_id
