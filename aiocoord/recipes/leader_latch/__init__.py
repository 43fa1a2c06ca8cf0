"""Leader latch: one leader among the participants of a path, Curator-compatible.

Each participant creates one EPHEMERAL_SEQUENTIAL node under the latch path; the
first node in election order leads, every other one watches only the node just
ahead of its own, so a change of leader wakes one participant, whatever their
number.  Java processes running Curator's ``LeaderLatch`` (default layout) or
ZooKeeper's ``LeaderElectionSupport`` (``layout="zookeeper"``) on the same path
take part in the same election.

Node layout::

    <path>/                                  container, created as needed
    <path>/_c_<uuid4>-latch-<seq>            curator layout, data: participant id (UTF-8)
    <path>/n_<seq>                           zookeeper layout, data: participant id

The leader selector (``_selector``) is Curator's ``LeaderSelector``, which is
an ``InterProcessMutex`` at the path: its curator layout is the mutex's
``_c_<uuid4>-lock-<seq>`` nodes, another election than the latch's (Java
``LeaderSelector`` processes take part in it; ``layout="latch"`` puts a
selector in the latches' election instead).

Failure handling (the queue's, see ``recipes/_queue``, plus the election's):

- The protected create, or, in the zookeeper layout, this session's
  unclaimed offers swept first; leadership granted only while connected, on
  a node that the current session created (Curator's CURATOR-696
  double-leader bug) and not reported deleted.  Followers hold a data watch
  on their predecessor and on their own node: when the predecessor that was
  the only node ahead goes, the follower leads at once, without listing the
  children again; otherwise it lists them once, both in the watch's callback
  before any task wakes.  Concurrent listings of one session on one path
  are shared.
- SUSPENDED (and READ_ONLY) drop leadership unless ``lose_on_suspend=False``
  (then it is kept until LOST); the node is kept.  RECONNECTED on the same
  session re-checks and leads again if still first; on a new session the stale
  node is deleted and the latch joins again at the tail.  A node deleted by
  someone else, or a container parent reaped, makes it join again.
- Leaving drops leadership first (the body of ``leadership()`` is cancelled)
  and forgets the watch on its own node (so the delete wakes nothing of its
  own), then deletes the node, shielded from cancellation and bounded in time;
  a create still in flight is cleaned up the same way.
"""

from __future__ import annotations

from .._queue import MAX_ID_BYTES as MAX_ID_BYTES
from .._queue import check_participant_id as check_participant_id
from .._queue import default_participant_id as default_participant_id
from ._latch import ElectionEvent as ElectionEvent
from ._latch import ElectionState as ElectionState
from ._latch import LeaderLatch as LeaderLatch
from ._latch import LeadershipTerm as LeadershipTerm
from ._latch import Participant as Participant
from ._latch import leader_latch as leader_latch
from ._selector import LeaderSelector as LeaderSelector
from ._selector import leader_selector as leader_selector
from .describe import LatchParticipant as LatchParticipant
from .describe import LatchView as LatchView
from .describe import describe_latch as describe_latch
from .describe import latch_layout as latch_layout

__all__ = (
    "check_participant_id",
    "ElectionEvent",
    "ElectionState",
    "LeaderLatch",
    "LeadershipTerm",
    "MAX_ID_BYTES",
    "Participant",
    "default_participant_id",
    "leader_latch",
    "LeaderSelector",
    "leader_selector",
    "LatchParticipant",
    "LatchView",
    "describe_latch",
    "latch_layout",
)
