"""The one queue of sequential nodes: every Curator queue recipe is this plus its rule.

Contenders line up EPHEMERAL_SEQUENTIAL nodes under one parent, as Apache
Curator's ``LockInternals`` does.  A recipe brings its node names and its
"may I go" rule; the queue does the rest: the protected create, Curator's
order, the decision, one watch per waiter, the owner check on grant.
The leader latch (and selector), the mutex, the read/write lock and the
semaphore run on it.

Node layout (``<seq>`` is ZooKeeper's 10-digit sequence number)::

    <path>/                                  container, created as needed
    <path>/_c_<uuid4>-latch-<seq>            leader latch (LATCH)
    <path>/_c_<uuid4>-lock-<seq>             mutex, leader selector (LOCK)
    <path>/leases/_c_<uuid4>-lease-<seq>     semaphore V2 (LEASE), guarded by
    <path>/locks/_c_<uuid4>-lock-<seq>       a mutex, as Curator's
    <path>/_c_<uuid4>-__READ__<seq>          read lock  } READ_WRITE: one queue,
    <path>/_c_<uuid4>-__WRIT__<seq>          write lock }  sorted on both markers

Curator's LeaderSelector is an InterProcessMutex at its path, so a selector's
nodes are the mutex's, and a latch's are not: a latch and a selector on one
path are two elections, in Curator as here (each sorts the other's nodes
after its own).

Each node's data is the participant id (UTF-8).  Children sort by the text
after the *last* marker (``StandardLockInternalsDriver.fixForSorting``); a
name without one sorts by its whole name and still counts as a contender,
compared as Java's ``String.compareTo`` does (UTF-16 code units).

The decision (`decide`, pure: no awaits), given a listing in that order, our
node's name and creating session, and the recipe's rule::

    our node's session is not ours now   -> Stale    delete it, join again at the tail
    our node is not listed               -> Gone     join again at the tail
    rule(names, our index) is None       -> Granted  the right is ours, once `may_take` agrees
    rule(names, our index) is X          -> Wait(X)  watch X alone; `last` if X going lets us go

A rule looks only at the nodes ahead of ours, a few lines each::

    rule            recipe                        goes when                     watches
    first           latch, mutex, write lock      first in order                the node just ahead
    fewer_than(n)   semaphore V2                  fewer than n nodes ahead      the node n places ahead
    reader          read lock                     no __WRIT__ node ahead        the nearest writer ahead

`may_take` is the last check before a right is taken, with no await after
it: connected for writing, our node created by the session we are on now
(Curator's CURATOR-696 ephemeral-owner check) and not reported deleted.

Failure handling:

- A create cut off by a connection loss is not retried blindly: the client
  finds the node again by its ``_c_<uuid>-`` name; a create whose outcome
  stays unknown leaves its uuid with `OurNode`, and the next create (or the
  withdraw) deletes what it left, so no orphan blocks the queue.
- An acquisition's first listing is sent right behind its create, in the
  same round trip (the server answers a session's requests in order, so it
  has our node); a create found again after a connection loss comes with
  the listing that found it, and a listing whose reply was cut off after
  the create's is sent again.  A latch lists through the listing its
  session's latches on the path share instead.
- No herd: each waiter holds one data watch, on the node its rule names
  (none on its own node), so a release wakes the next in line alone (the
  readers behind one writer all watch it: they all go with it).  When
  that node goes, the children are listed from the watch's callback, as the
  notification is read (`EarlyListing`), and decided on again; that listing
  also tells a waiter that someone deleted its node.
- A node of an earlier session is deleted and the waiter joins again at the
  tail; a Granted on a connection not usable for writing (SUSPENDED,
  READ_ONLY) waits for it to be.  What a hold does on SUSPENDED and LOST
  after the grant is the recipe's (its tenure); the fencing token is our
  node's czxid, larger for every later holder.
- Withdrawing deletes our node and what an interrupted create left, across
  reconnects; what cannot be deleted in time is left to a chore of the
  session, which deletes it once the connection is back.

kazoo 2.x's lock layout (``_kazoo``: ``<path>/<uuid4 hex>__lock__<seq>``,
``__rlock__`` for a reader) is a second `Sorts` beside `CuratorNames`, with
kazoo's order and reader rule; the loop, the decision and the checks are
the same (``layout="kazoo"`` on the mutex, read/write lock and semaphore).

`Waiter` is the one I/O loop on this table: an acquisition (the mutex, the
read/write lock, the semaphore) waits in it for its turn; a participant (the
leader latch, and the selector through it) keeps its node in it for as long
as it takes part, is granted from the watch callback, told of each loss,
requeued, and keeps its node through SUSPENDED -> RECONNECTED on the same
session.
"""

from __future__ import annotations

from ._kazoo import KAZOO_LOCK as KAZOO_LOCK
from ._kazoo import KAZOO_READ as KAZOO_READ
from ._kazoo import KAZOO_READ_WRITE as KAZOO_READ_WRITE
from ._kazoo import KAZOO_WRITE as KAZOO_WRITE
from ._kazoo import KazooNames as KazooNames
from ._kazoo import kazoo_id as kazoo_id
from ._kazoo import kazoo_reader as kazoo_reader
from ._kazoo import kazoo_writer as kazoo_writer
from ._nodes import MAX_ID_BYTES as MAX_ID_BYTES
from ._nodes import CreatedNode as CreatedNode
from ._nodes import OurNode as OurNode
from ._nodes import Ours as Ours
from ._nodes import check_participant_id as check_participant_id
from ._nodes import created_node as created_node
from ._nodes import default_participant_id as default_participant_id
from ._nodes import read_nodes as read_nodes
from ._nodes import read_queue as read_queue
from ._table import LATCH as LATCH
from ._table import LEASE as LEASE
from ._table import LOCK as LOCK
from ._table import READ_WRITE as READ_WRITE
from ._table import WRITE_MARKER as WRITE_MARKER
from ._table import CuratorNames as CuratorNames
from ._table import Gone as Gone
from ._table import Granted as Granted
from ._table import Ordering as Ordering
from ._table import Rule as Rule
from ._table import Wait as Wait
from ._table import decide as decide
from ._table import first as first
from ._table import may_take as may_take
from ._table import reader as reader
from ._waiter import USABLE as USABLE
from ._waiter import Host as Host
from ._waiter import Waiter as Waiter
from ._waiter import connected_by as connected_by
from ._waiter import fired_by as fired_by
from ._waiter import grantable as grantable
