"""Mutex: a fair, fenced lock on Apache Curator's ``InterProcessMutex`` layout.

The folder holds the lock family, all on the one queue (``recipes/_queue``):
the mutex (here), the semaphore (``_semaphore``: Curator's
``InterProcessSemaphoreV2``) and the read/write lock (``_rwlock``: Curator's
``InterProcessReadWriteLock``), each the queue plus its own "may I go" rule.

Contenders queue EPHEMERAL_SEQUENTIAL nodes under the lock path; the first node
in Curator's order holds the lock, every other one watches only the node just
ahead of its own, so a release wakes the next in line alone, whatever the
number of waiters, and the lock goes round in the order it was asked for
(FIFO).  Java processes running Curator's ``InterProcessMutex`` on the same
path share the lock.  The fencing token is the czxid of the holder's node:
every later holder's is larger.

    async with aiocoord.mutex(coord, "/locks/ledger", participant_id="pod-3") as held:
        held.token

Not reentrant: a task that asks again for a lock it holds gets `RuntimeError`
instead of waiting for itself forever (Curator's mutex is reentrant per
thread; a Curator process and an aiocoord one never share an acquisition).

Node layout::

    <path>/                             container, created as needed (as Curator does)
    <path>/_c_<uuid4>-lock-<seq>        data: participant id (UTF-8); Curator writes its IP address

Children sort by the text after the *last* ``lock-``; names without it sort by
their whole name and still count as contenders, as in Curator.  A revocation
request (Curator's ``__REVOKE__`` written to the holder's node, ``_revoke``) ends
the ``async with`` block of a mutex made with ``revocable=True``; others ignore it.

Failure handling (the queue's, see ``recipes/_queue``, plus the hold's):

- The protected create, one data watch per waiter (on its predecessor alone,
  so that a release notifies the next in line and nobody else), and the lock
  taken only on a listing that has our node first, while connected, on a
  node that the current session created (the ephemeral-owner check of
  Curator's CURATOR-696 fix, which its mutex lacks, CURATOR-604).  A node of
  an earlier session, or deleted by someone, joins again at the tail.
- While ``async with`` holds it, SUSPENDED (and READ_ONLY) lose the lock once
  the session's provable life is past (the default; at once with
  ``lose_on_suspend=True``; with ``False`` it is kept until LOST); LOST or a new
  session always lose it.  The block is cancelled at once and `LockLost`
  raised once it has exited.  One chore of the coordinator's session follows
  its connection states for every such block, until the coordinator closes.
  As in Curator, a holder is not told if someone deletes its node by hand.
- Cancelled or timed out while waiting, an acquisition deletes its node.
  Releasing deletes the node shielded from cancellation, retrying across a
  reconnect within the request timeout; past it, a chore of the session
  deletes the node once the connection is back, so that a release cut off by
  a connection loss leaves no orphan while the session lives.

``layout="kazoo"`` puts the mutex, the read/write lock and the semaphore on
kazoo 2.x's layouts instead (``recipes/_queue/_kazoo``, ``_kazoo_pool``), so
kazoo's ``Lock``, ``ReadLock``/``WriteLock`` and ``Semaphore`` share them: the same
queue, kazoo's names, order and rules.

For tools that watch rather than contend, `describe` reads the queue: holder,
waiters in order, participant ids and fencing tokens (`describe_mutex`).
"""

from __future__ import annotations

from ._mutex import Mutex as Mutex
from ._mutex import MutexOptions as MutexOptions
from ._mutex import MutexParticipant as MutexParticipant
from ._mutex import Participant as Participant
from ._mutex import mutex as mutex
from ._revoke import revoke as revoke
from ._rwlock import ReadLock as ReadLock
from ._rwlock import ReadWriteLock as ReadWriteLock
from ._rwlock import WriteLock as WriteLock
from ._rwlock import read_write_lock as read_write_lock
from ._semaphore import Lease as Lease
from ._semaphore import Semaphore as Semaphore
from ._semaphore import SemaphoreOptions as SemaphoreOptions
from ._semaphore import semaphore as semaphore
from .describe import MutexContender as MutexContender
from .describe import MutexView as MutexView
from .describe import ReadWriteView as ReadWriteView
from .describe import SemaphoreView as SemaphoreView
from .describe import describe_mutex as describe_mutex
from .describe import describe_read_write_lock as describe_read_write_lock
from .describe import describe_semaphore as describe_semaphore
from .describe import is_mutex as is_mutex
from .describe import is_read_write_lock as is_read_write_lock
from .describe import is_semaphore as is_semaphore

__all__ = (
    "Mutex",
    "MutexOptions",
    "MutexParticipant",
    "Participant",
    "mutex",
    "Lease",
    "Semaphore",
    "SemaphoreOptions",
    "semaphore",
    "ReadLock",
    "ReadWriteLock",
    "WriteLock",
    "read_write_lock",
    "revoke",
    "MutexContender",
    "MutexView",
    "describe_mutex",
    "is_mutex",
    "ReadWriteView",
    "SemaphoreView",
    "describe_read_write_lock",
    "describe_semaphore",
    "is_read_write_lock",
    "is_semaphore",
)
