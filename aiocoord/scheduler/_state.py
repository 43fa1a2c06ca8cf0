"""The assigner's view of the scheduler, as a pure state machine (no I/O, no awaits).

Fed by the assigner's watch events and by the outcomes of its own requests,
it keeps which workers are alive and with what capacity, which jobs each one
holds, which pending jobs are waiting, and answers with the next requests to
make (`plan`): `Fetch` a pending job's node, `Assign` a fetched job to the
worker the strategy chose, `Resolve` a duplicate.  Every method is
idempotent with respect to a replayed watch event.

A job id pending while the same id is assigned (submitted twice) is held
back (`blocked`) until the assignment goes; it then runs only if the first
run left no result (`Resolve`).

Pending and read jobs are kept by priority (`PriorityMap`): fetches and
assignments take the highest priority first, in arrival order within one.
The priority comes from the bucket of the job's node (the watch event says
it), so it is known before the job is read, and a high-priority job is read
ahead of a low-priority backlog however long.

A job read with a `run_at` still ahead (a delay, or a retry's backoff) waits
in `scheduled`, a heap of due times that holds only ids: when it is due it
is read again and assigned like any other.  The heap is rebuilt from the
pending jobs each term (reconciliation reads them all), so a failover
neither loses nor double-runs a delayed job, and nothing polls: the
assigner sleeps until `next_due`.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from ._records import JobRecord, WorkerRecord
from ._strategies import JobRequest, Strategy, WorkerLoad

__all__ = ("Assign", "AssignerState", "Fetch", "Fetched", "Outcome", "PriorityMap", "Resolve")

V = TypeVar("V")


class PriorityMap(Generic[V]):
    """A dict of job ids kept by priority: iteration gives the highest first, then arrival order.

    `priority_of(job_id, value)` says an entry's priority when it is set.
    """

    def __init__(self, priority_of: Callable[[str, V], int]) -> None:
        self._priority_of = priority_of
        self._levels: dict[int, dict[str, V]] = {}
        self._where: dict[str, int] = {}

    def __setitem__(self, job_id: str, value: V) -> None:
        priority = self._priority_of(job_id, value)
        if self._where.get(job_id) == priority:
            self._levels[priority][job_id] = value  # keeps its place, as a dict does
            return
        self.pop(job_id)
        self._levels.setdefault(priority, {})[job_id] = value
        self._where[job_id] = priority

    def __getitem__(self, job_id: str) -> V:
        return self._levels[self._where[job_id]][job_id]

    def __delitem__(self, job_id: str) -> None:
        if job_id not in self._where:
            raise KeyError(job_id)
        self.pop(job_id)

    def pop(self, job_id: str, default: V | None = None) -> V | None:
        priority = self._where.pop(job_id, None)
        if priority is None:
            return default
        level = self._levels[priority]
        value = level.pop(job_id)
        if not level:
            del self._levels[priority]
        return value

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._where

    def __len__(self) -> int:
        return len(self._where)

    def __iter__(self) -> Iterator[str]:
        for priority in sorted(self._levels, reverse=True):
            yield from self._levels[priority]

    def items(self) -> Iterator[tuple[str, V]]:
        for priority in sorted(self._levels, reverse=True):
            yield from self._levels[priority].items()

    def priority(self, job_id: str) -> int:
        return self._where[job_id]

    def count_at_least(self, priority: int) -> int:
        """How many entries have `priority` or a higher one."""
        return sum(len(level) for p, level in self._levels.items() if p >= priority)


@dataclass(frozen=True, slots=True)
class Fetched:
    """A pending job as read: its record, raw bytes (copied into the assignment) and version."""

    record: JobRecord
    data: bytes
    version: int
    path: str = ""  # the pending node it was read from


@dataclass(frozen=True, slots=True)
class Fetch:
    job_id: str


@dataclass(frozen=True, slots=True)
class Assign:
    job_id: str
    worker: str
    job: Fetched


@dataclass(frozen=True, slots=True)
class Resolve:
    job_id: str


Action = Fetch | Assign | Resolve


class Outcome(enum.Enum):
    """What became of one assignment transaction."""

    ASSIGNED = "assigned"
    GONE = "gone"  # the pending job vanished: someone else moved or removed it
    REFETCH = "refetch"  # it changed, or the outcome is unknown: read it again
    WORKER_GONE = "worker gone"  # the worker's node vanished: choose again
    RETRY = "retry"  # try the same job again (its worker's queue node was re-created)
    DUPLICATE = "duplicate"  # the worker already holds this job id


def _ready_map() -> PriorityMap[Fetched]:
    return PriorityMap(lambda _, job: job.record.priority)


class AssignerState:
    """See the module docstring.  `plan()` returns the requests to make next."""

    def __init__(self, strategy: Strategy, *, max_ready: int = 512, max_fetches: int = 64) -> None:
        self.strategy = strategy
        self.max_ready = max_ready
        self.max_fetches = max_fetches
        self.workers: dict[str, WorkerRecord] = {}
        self.invalid_workers: set[str] = set()
        self.loading: set[str] = set()  # worker records being read: assign nothing meanwhile
        self.queues: defaultdict[str, set[str]] = defaultdict(set)  # worker -> job ids it holds
        self.assigned: dict[str, str] = {}  # job id -> worker
        self.reserved: defaultdict[str, int] = defaultdict(int)  # worker -> transactions in flight
        self.inflight: dict[str, str] = {}  # job id -> worker, transaction in flight
        self.finished_early: set[str] = set()  # assignment gone before our transaction returned
        self.priority: dict[str, int] = {}  # job id -> priority (its bucket's), while pending
        self.pending: PriorityMap[None] = PriorityMap(lambda j, _: self.priority.get(j, 0))
        self.fetching: set[str] = set()
        self.stale: set[str] = set()  # deleted while being read: discard what the read returns
        # Read, waiting for a worker with room.
        self.ready: PriorityMap[Fetched] = _ready_map()
        self.blocked: set[str] = set()  # pending duplicates of an assigned job id
        self.parked: dict[str, str] = {}  # job id -> name no live worker has a handler for
        self.resolving: set[str] = set()
        self.scheduled: dict[str, float] = {}  # job id -> due time, read and waiting for it
        # Names with a cap on runs at once (from the workers' records), and the jobs of
        # such names this term gave out that are still held (job id -> name).
        self.limited: dict[str, str] = {}
        self.held_by_name: defaultdict[str, int] = defaultdict(int)
        # Read jobs of a name at its cap, out of `ready` (they would hold up the others).
        self.capped: dict[str, PriorityMap[Fetched]] = {}
        self._due: list[tuple[float, str]] = []  # heap over `scheduled` (stale entries skipped)

    # --- watch events ------------------------------------------------------------------------

    def job_created(self, job_id: str, priority: int = 0) -> None:
        self.priority[job_id] = priority
        if job_id in self.assigned or job_id in self.inflight:
            self.blocked.add(job_id)
            return
        known = (self.blocked, self.resolving, self.ready, self.parked, self.scheduled)
        if any(job_id in where for where in known) or any(
            job_id in waiting for waiting in self.capped.values()
        ):
            return  # a replayed event
        if job_id not in self.fetching or job_id in self.stale:
            self.pending[job_id] = None

    def job_deleted(self, job_id: str) -> None:
        self.priority.pop(job_id, None)
        for name, waiting in list(self.capped.items()):
            if waiting.pop(job_id) is not None and not waiting:
                del self.capped[name]
        self.scheduled.pop(job_id, None)
        self.pending.pop(job_id, None)
        self.ready.pop(job_id, None)
        self.parked.pop(job_id, None)
        self.blocked.discard(job_id)
        if job_id in self.fetching:
            self.stale.add(job_id)

    def worker_loading(self, worker: str) -> None:
        self.loading.add(worker)

    def worker_up(self, worker: str, record: WorkerRecord | None) -> None:
        """A worker's record was read (None: it is unusable, see `invalid_workers`)."""
        self.loading.discard(worker)
        if record is None:
            self.workers.pop(worker, None)
            self.invalid_workers.add(worker)
        else:
            self.invalid_workers.discard(worker)
            self.workers[worker] = record
            for job_id, name in list(self.parked.items()):
                if name in record.jobs:  # a handler for it at last: read it again
                    del self.parked[job_id]
                    self.pending[job_id] = None

    def worker_down(self, worker: str) -> None:
        self.loading.discard(worker)
        self.invalid_workers.discard(worker)
        self.workers.pop(worker, None)

    def assignment_created(self, worker: str, job_id: str) -> None:
        self.assigned[job_id] = worker
        self.queues[worker].add(job_id)
        if job_id in self.pending or job_id in self.ready:
            self.pending.pop(job_id, None)
            self.ready.pop(job_id, None)
            self.blocked.add(job_id)

    def _release(self, job_id: str) -> None:
        name = self.limited.pop(job_id, None)
        if name is None:
            return
        self.held_by_name[name] -= 1
        if self.held_by_name[name] <= 0:
            del self.held_by_name[name]

    def assignment_deleted(self, worker: str, job_id: str) -> None:
        self._release(job_id)
        if self.assigned.get(job_id) == worker:
            del self.assigned[job_id]
        queue = self.queues.get(worker)
        if queue is not None:
            queue.discard(job_id)
            if not queue:
                del self.queues[worker]
        if self.inflight.get(job_id) == worker:
            self.finished_early.add(job_id)
        if job_id in self.blocked and job_id not in self.assigned and job_id not in self.inflight:
            self.blocked.discard(job_id)
            self.resolving.add(job_id)

    # --- outcomes of our own requests --------------------------------------------------------

    def fetched(self, job_id: str, job: Fetched | None, now: float | None = None) -> None:
        """A pending job was read (None: gone or unusable, handled by the caller).

        With `now`, a job not due yet waits in `scheduled` (without it, every job is due).
        """
        self.fetching.discard(job_id)
        if job_id in self.stale:
            self.stale.discard(job_id)
            return
        if job is None:
            self.pending.pop(job_id, None)
        elif job_id in self.assigned or job_id in self.inflight:
            self.blocked.add(job_id)
        elif now is not None and not job.record.due(now):
            assert job.record.run_at is not None
            self.scheduled[job_id] = job.record.run_at
            heapq.heappush(self._due, (job.record.run_at, job_id))
        else:
            self.ready[job_id] = job

    def assign_finished(self, action: Assign, outcome: Outcome) -> None:
        job_id, worker = action.job_id, action.worker
        self.reserved[worker] -= 1
        if self.reserved[worker] <= 0:
            del self.reserved[worker]
        self.inflight.pop(job_id, None)
        early = job_id in self.finished_early
        self.finished_early.discard(job_id)
        if outcome is Outcome.ASSIGNED:
            if not early:
                self.assigned[job_id] = worker
                self.queues[worker].add(job_id)
        else:
            self._release(job_id)
        if outcome is Outcome.REFETCH:
            self.pending[job_id] = None
        elif outcome is Outcome.WORKER_GONE:
            self.worker_down(worker)
            self.ready[job_id] = action.job
        elif outcome is Outcome.RETRY:
            self.ready[job_id] = action.job
        elif outcome is Outcome.DUPLICATE:
            # The worker already holds this id: this pending node is a second submit.
            self.blocked.add(job_id)
            if not early:
                self.assigned[job_id] = worker
                self.queues[worker].add(job_id)
        if job_id in self.blocked and job_id not in self.assigned:
            self.blocked.discard(job_id)
            if early:  # the assignment already finished: run again only if it left no result
                self.resolving.add(job_id)
            else:
                self.pending[job_id] = None

    def resolved(self, job_id: str, *, run: bool) -> None:
        """A duplicate was examined: `run` it if the first run left no result."""
        self.resolving.discard(job_id)
        if run:
            self.pending[job_id] = None

    # --- planning ----------------------------------------------------------------------------

    def load(self, worker: str) -> int:
        return len(self.queues.get(worker, ())) + self.reserved.get(worker, 0)

    def next_due(self) -> float | None:
        """When the earliest scheduled job is due (None: none is scheduled)."""
        due = self._due
        while due and self.scheduled.get(due[0][1]) != due[0][0]:
            heapq.heappop(due)  # cancelled, rescheduled or already due
        return due[0][0] if due else None

    def release_due(self, now: float) -> None:
        """Scheduled jobs whose time has come go back to be read again (then assigned)."""
        while (when := self.next_due()) is not None and when <= now:
            _, job_id = heapq.heappop(self._due)
            del self.scheduled[job_id]
            self.pending[job_id] = None

    def plan(self, now: float | None = None) -> list[Fetch | Assign | Resolve]:
        """The requests to make now, reserving what they need (`now`: release due jobs first)."""
        if now is not None:
            self.release_due(now)
        actions: list[Fetch | Assign | Resolve] = [Resolve(j) for j in self.resolving]
        self.resolving = set()  # handed out; `resolved` closes them
        if (self.ready or self.capped) and not self.loading and self.workers:
            actions.extend(self._assignments())
        budget = self.max_fetches - len(self.fetching)
        take: list[str] = []
        for job_id in self.pending:  # highest priority first
            if len(take) >= budget:
                break
            # Read ahead at most `max_ready` jobs of this priority or higher: a job of a
            # higher one is read even when lower ones fill the rest.
            ahead = self.ready.count_at_least(self.pending.priority(job_id))
            if ahead + len(self.fetching) + len(take) >= self.max_ready:
                break
            if job_id not in self.fetching:  # else a stale read is still out: wait for it
                take.append(job_id)
        for job_id in take:
            del self.pending[job_id]
            self.fetching.add(job_id)
            actions.append(Fetch(job_id))
        return actions

    def _assignments(self) -> list[Assign]:
        room = {
            w: WorkerLoad(w, r.capacity, self.load(w))
            for w, r in sorted(self.workers.items())
            if not r.draining and self.load(w) < r.capacity
        }
        handled = {name for r in self.workers.values() for name in r.jobs}
        caps: dict[str, int] = {}
        for record in self.workers.values():
            for name, limit in record.limits:
                caps[name] = min(limit, caps.get(name, limit))
        for name, waiting in list(self.capped.items()):  # room again (or no cap any more)
            free = caps.get(name, len(waiting)) - self.held_by_name.get(name, 0)
            for job_id in list(itertools.islice(waiting, max(0, free))):
                self.ready[job_id] = waiting[job_id]
                del waiting[job_id]
            if not waiting:
                del self.capped[name]
        out: list[Assign] = []
        for job_id, job in list(self.ready.items()):
            name = job.record.name
            if name not in handled:  # no live worker can run it: park it, keep the memory free
                del self.ready[job_id]
                self.parked[job_id] = name
                continue
            if not room:
                break
            cap = caps.get(name)
            if cap is not None and self.held_by_name.get(name, 0) >= cap:
                # As many runs as its cap: it waits for one to end, out of the way.
                del self.ready[job_id]
                self.capped.setdefault(name, _ready_map())[job_id] = job
                continue
            candidates = [load for w, load in room.items() if name in self.workers[w].jobs]
            if not candidates:
                continue
            info = JobRequest(job_id, name, job.record.payload)
            chosen = self.strategy.choose(info, candidates)
            if chosen is None or chosen not in room or name not in self.workers[chosen].jobs:
                continue
            del self.ready[job_id]
            if cap is not None:
                self.limited[job_id] = name
                self.held_by_name[name] += 1
            self.inflight[job_id] = chosen
            self.reserved[chosen] += 1
            before = room[chosen]
            if before.load + 1 >= before.capacity:
                del room[chosen]
            else:
                room[chosen] = WorkerLoad(chosen, before.capacity, before.load + 1)
            out.append(Assign(job_id, chosen, job))
        return out

    def __repr__(self) -> str:
        return (
            f"<AssignerState workers={len(self.workers)} assigned={len(self.assigned)} "
            f"pending={len(self.pending) + len(self.fetching) + len(self.ready)} "
            f"scheduled={len(self.scheduled)} parked={len(self.parked)} "
            f"blocked={len(self.blocked)}>"
        )
