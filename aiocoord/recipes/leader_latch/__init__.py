"""Leader latch: one leader among the participants of a path, on Curator's ``LeaderLatch`` layout.

Each participant creates one EPHEMERAL_SEQUENTIAL node under the latch path; the
first node in election order leads, every other one watches only the node just
ahead of its own, so a change of leader wakes one participant, whatever their
number.  Java processes running Curator's ``LeaderLatch`` (default layout) or
ZooKeeper's ``LeaderElectionSupport`` (``layout="zookeeper"``) on the same path
take part in the same election, and so do kazoo 2.x's ``Election`` processes
(``layout="kazoo"``: kazoo's election is a kazoo ``Lock`` at the path).

Node layout::

    <path>/                                  container, created as needed
    <path>/_c_<uuid4>-latch-<seq>            curator layout, data: participant id (UTF-8)
    <path>/n_<seq>                           zookeeper layout, data: participant id
    <path>/<uuid4 hex>__lock__<seq>          kazoo layout (persistent path), data: id

The leader selector (``_selector``) is Curator's ``LeaderSelector``, which is
an ``InterProcessMutex`` at the path: its curator layout is the mutex's
``_c_<uuid4>-lock-<seq>`` nodes, another election than the latch's (Java
``LeaderSelector`` processes take part in it; ``layout="latch"`` puts a
selector in the latches' election instead).

Failure handling: the queue's, as a participant of its `Waiter` (see
``recipes/_queue``: the protected create, the CURATOR-696 owner check, the
grant from the watch callback, shared listings of one session on one path),
plus the election's:

- In the zookeeper layout, this session's unclaimed offers are swept first.
- Which connection state ends a term is the recipes' one loss rule
  (``recipes/_loss``): SUSPENDED and READ_ONLY past the session's provable
  life by default (at once with ``lose_on_suspend=True``, never with
  ``False``), LOST, a new session; the node is kept through
  SUSPENDED, and RECONNECTED on the same session leads again if still first.
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
from ._latch import LatchOptions as LatchOptions
from ._latch import LeaderLatch as LeaderLatch
from ._latch import LeadershipTerm as LeadershipTerm
from ._latch import Participant as Participant
from ._latch import leader_latch as leader_latch
from ._selector import LeaderSelector as LeaderSelector
from ._selector import SelectorOptions as SelectorOptions
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
    "LatchOptions",
    "LeadershipTerm",
    "MAX_ID_BYTES",
    "Participant",
    "default_participant_id",
    "leader_latch",
    "LeaderSelector",
    "SelectorOptions",
    "leader_selector",
    "LatchParticipant",
    "LatchView",
    "describe_latch",
    "latch_layout",
)
