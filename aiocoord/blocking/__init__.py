"""aiocoord from threaded code (Flask, Django, Celery workers, scripts): the blocking façade.

    from aiocoord import blocking

    with blocking.connect("zk1:2181,zk2:2181", session_timeout=10) as coord:
        with coord.mutex("/locks/ledger", participant_id="web-1") as held:
            held.token          # fencing token
            held.check()        # raises LockLost once the lock is lost: call it between steps
        with coord.leader_latch("/app/leader") as latch:
            with latch.leadership(timeout=30) as term:
                ...             # term.lost (a threading.Event), term.check(), term.token
        sched = coord.scheduler("/app/jobs")
        job_id = sched.submit("sum", {"a": 1, "b": 2})
        sched.result(job_id, timeout=10)

How it works: `connect` starts one event loop in a background thread
(anyio's blocking portal, asyncio or uvloop) and opens the session there.
Every call blocks the calling thread while the async API does the work in
that loop, so there is one implementation of each recipe, the async one, and
any number of threads may call at once.  A right held by a thread's ``with``
block (a lock, a lease, a leadership term) is held open by a task of the loop
(``_held``): a thread cannot be cancelled, so when the right is lost its
``lost`` event is set at once and ``check()`` raises the recipe's loss error.

Called from a thread that runs an event loop, every entry point raises
`BlockingInEventLoopError` at once (never a deadlock): use the async API there.
Closing the coordinator gives up the rights still held, closes what it
started, closes the session and joins the loop thread.
"""

from __future__ import annotations

from ..errors import BlockingInEventLoopError as BlockingInEventLoopError
from ._coordinator import BlockingCoordinator as BlockingCoordinator
from ._coordinator import connect as connect
from ._held import Held as Held
from ._leader import BlockingLeaderLatch as BlockingLeaderLatch
from ._locks import MutexRight as MutexRight
from ._locks import ReadWriteLockRight as ReadWriteLockRight
from ._locks import SemaphoreRight as SemaphoreRight
from ._locks import SlotHeld as SlotHeld
from ._locks import SlotRight as SlotRight
from ._right import Right as Right
from ._scheduler import BlockingJobWorker as BlockingJobWorker
from ._scheduler import BlockingScheduler as BlockingScheduler
from ._services import BlockingNodeCache as BlockingNodeCache
from ._services import BlockingPersistentNode as BlockingPersistentNode
from ._services import BlockingServiceDiscovery as BlockingServiceDiscovery
from ._services import BlockingTreeCache as BlockingTreeCache

__all__ = (
    "connect",
    "BlockingCoordinator",
    "Held",
    "Right",
    "MutexRight",
    "SemaphoreRight",
    "ReadWriteLockRight",
    "SlotHeld",
    "SlotRight",
    "BlockingLeaderLatch",
    "BlockingNodeCache",
    "BlockingTreeCache",
    "BlockingPersistentNode",
    "BlockingServiceDiscovery",
    "BlockingScheduler",
    "BlockingJobWorker",
    "BlockingInEventLoopError",
)
