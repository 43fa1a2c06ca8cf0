"""A lock held by compare-and-set on one persistent node, with leases and fencing tokens.

`CasLock` / `cas_lock()` give mutual exclusion that survives a crashed holder;
`once_per()` builds on it so that a fleet runs a job at most once per schedule
slot.  Nothing here depends on the holder's session staying alive: the right
to act is a lease, written into the record and renewed by compare-and-set.

Node layout: one PERSISTENT node at the lock path holding a small versioned
JSON record (see `_record`: owner, state, holder id, lease expiry, fencing
token, last run and last failure).  It is created on first use (parents as
containers) by the first contender, whose create is its acquiring write; a
concurrent create just loses (`NodeExistsError`) and reads what won.

Every change is ``setData(path, record, version=<version read>)``: acquiring
a free lock, taking over an expired lease, renewing, releasing, and a new
waiter listing itself.  Two contenders that read the same version can never
both win; the loser learns what won from a read pipelined behind its CAS.

Turns (`_turns`): the record lists the contenders that took the lock, least
recently served first.  When it comes free, waiters in `acquire()` try their
CAS in that order, one step apart, and a waiter that sees the change that took
it stops; so in a tight loop the lock goes round the contenders and a lost
CAS is rare.  Nothing but the record decides: the order is a courtesy every
waiter computes the same way, and a CAS out of turn is still just a CAS.
`try_acquire()` and `once_per()` never wait, so they take no turn.
The fencing token is the mzxid of the acquiring write, so every new holder's
token is larger than every earlier holder's (zxids only grow).

Time and clocks: the holder writes ``lease_expires = its wall clock + lease``.
A contender takes the lock over only once its own wall clock is past
``lease_expires + skew``.  The remaining assumption is that no two clocks of
the fleet differ by more than `skew` and that wall clocks do not jump (NTP
slews are fine; a step larger than `skew` is not).  The holder itself never
trusts its wall clock for its own safety: it counts ``lease - skew`` on its
monotonic clock from just before it built its last successful write, and
cancels the body when that runs out without a renewal.  Under the assumption,
that is before any contender can see the lease as expired.  Cancellation is
cooperative and a process can stall (GC, a blocked loop, SIGSTOP) past any
margin, so pass `token` to whatever the body writes and let it refuse
smaller tokens (fencing).

Failure handling, while held inside `cas_lock()` / `hold()`:

- SUSPENDED: nothing happens at once.  The lease, not the session, is what
  keeps others out, so the body keeps running while renewals are retried;
  if no renewal succeeds before the holder's own ``lease - skew`` deadline,
  the body is cancelled (`LockLost`, "lease ran out ...").  This keeps long
  jobs alive across short network blips, which cancelling on SUSPENDED
  would not.
- LOST (or a new session): the body is cancelled at once and `LockLost`
  raised, even if the lease has time left: the record may still be ours, but
  a partition long enough to lose the session is a reason to stop.  The
  release is still attempted on the new session (a CAS on our version), so
  others need not wait for the lease to run out.
- A renewal that loses its CAS (someone else changed the record): the body
  is cancelled, `LockLost` raised, and the record is left untouched.
- A write whose reply was lost (outcome unknown) is resolved by reading the
  record back: our exact bytes at the next version mean it landed.
"""

from __future__ import annotations

from ._entries import CasLockOptions as CasLockOptions
from ._entries import OncePerOptions as OncePerOptions
from ._entries import Slot as Slot
from ._entries import cas_lock as cas_lock
from ._entries import once_per as once_per
from ._lock import CasLock as CasLock
from ._lock import LockStatus as LockStatus
from .describe import LockRun as LockRun
from .describe import LockView as LockView
from .describe import describe_lock as describe_lock
from .describe import is_lock_record as is_lock_record
from .describe import lock_view as lock_view

__all__ = (
    "CasLock",
    "CasLockOptions",
    "OncePerOptions",
    "LockStatus",
    "Slot",
    "cas_lock",
    "once_per",
    "LockRun",
    "LockView",
    "describe_lock",
    "is_lock_record",
    "lock_view",
)
