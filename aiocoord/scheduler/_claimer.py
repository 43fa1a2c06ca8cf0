"""Self-claims: a worker takes pending jobs itself when no assigner acts on them.

The assigner is one process.  Killed without closing its session (SIGKILL, a
frozen host), it keeps the election until the server expires that session,
and nothing new would be assigned meanwhile.  So the first `WATCHERS` workers
by node name (the assigner's own process left out while it assigns) also
watch ``jobs/`` (one persistent recursive watch: names only, nothing is
read) and note when each pending job appeared.  Every worker follows the
names in ``workers/`` (a recursive watch there: a notification per worker
joining or leaving, none per job) to know whether it is one of them; the
others hold no watch on ``jobs/`` and cost the server nothing per job.  A job still pending `GRACE` seconds
later, while this worker has had a free slot for `GRACE` seconds without the
assigner giving it anything, is one no assigner acted on (a live assigner
gives a free worker a due job within milliseconds).  The worker reads it and
claims it for itself with the assigner's own transaction::

    check  workers/<me>;  create assignments/<me>/<id>;  delete jobs/<p>.<hh>/<id> (the version read)

so a claim is exclusive exactly as an assignment is: a job is never both
pending and assigned, and a claim racing the assigner's transaction makes one
of them fail.  Before a claim the worker lists the queues: a second submit of
an id that is still running waits pending (the assigner resolves it once the
first run ends), and is left alone; so is a job that already has a result.

While the assigner is alive jobs leave ``jobs/`` before the grace ends and
nothing is read.  While it is frozen, the watching workers claim for
themselves, each up to its capacity: a slot freed starts the next round.  Jobs that wait on purpose cost an idle worker one read
each: a delayed job (its due time is then known; it is claimable `GRACE`
after it) and a job this worker has no handler for.
"""

from __future__ import annotations

import heapq
import logging
import math
import time
from collections.abc import Callable, Collection

import anyio

from .._backoff import grown
from ..errors import (
    CoordError,
    CoordinatorClosedError,
    NodeDataError,
    NoNodeError,
    TransactionFailed,
)
from ..session import Coordinator
from ..zk.types import CheckOp, CreateOp, DeleteOp, EventType, WatchedEvent
from ._lookup import bucketed, under_each
from ._records import JobsLayout, decode_job

__all__ = ("GRACE", "WATCHERS", "Claimer")

log = logging.getLogger(__name__)

GRACE = 0.5  # seconds a job waits for an assigner before workers claim it themselves
WATCHERS = 2  # the workers first by node name watch jobs/ for claims (one may be the assigner)
_IDLE_LISTING = 10  # graces of idleness before a fresh worker lists the pending jobs
_MAX_BACKOFF = 30.0  # seconds between looks at a job left alone (held, or with a result)
_HEAP_SLACK = 256  # stale heap entries allowed beyond the live ones before a rebuild


class Claimer:
    """One worker session's self-claims; `run` until cancelled.  See the module docstring."""

    def __init__(
        self,
        coord: Coordinator,
        layout: JobsLayout,
        worker: str,
        names: Collection[str],
        *,
        free: Callable[[], int],
        active: Callable[[], bool],
        grace: float = GRACE,
    ) -> None:
        self._coord = coord
        self._client = coord.client
        self._layout = layout
        self._worker = worker
        self._names = names
        self._free = free  # slots free now
        self._active = active  # False while assigning (this process is the assigner) or leaving
        self.grace = grace
        self._when: dict[str, float] = {}  # job id -> monotonic time it may be claimed
        self._paths: dict[str, str] = {}  # job id -> its pending node (the bucket says where)
        self._looks: dict[str, int] = {}  # job id -> times it was left alone
        self._ignored: set[str] = set()  # not ours to claim until its node changes
        self._heap: list[tuple[float, str]] = []
        self._free_since: float | None = time.monotonic()
        self._claimed: set[str] = set()  # our claims: their arrival is no sign of an assigner
        self._stale = False  # the pending jobs are to be listed before the next claim
        self._stale_at = math.inf  # when to list them, if no claim needs it sooner
        self._wake = anyio.Event()
        self._armed = math.inf
        self.claims = 0
        # While a listing is in flight: the jobs whose deletion the watch told meanwhile, so
        # that a reply older than the event does not bring them back for good.
        self._gone_while_listing: set[str] | None = None
        self._members: set[str] | None = None  # the names in workers/ (None: not yet listed)
        self._standing = anyio.Event()  # set when whether we watch jobs/ may have changed
        self._unwatch: anyio.CancelScope | None = None  # ends the watch on jobs/ while it lasts

    # --- what the worker session tells us ---------------------------------------------------

    def assignment_arrived(self, job_id: str) -> None:
        """An assignment came: the assigner acts (unless we claimed it), so wait again."""
        if job_id in self._claimed:
            self._claimed.discard(job_id)
            return
        self._free_since = time.monotonic() if self._free() > 0 else None

    def slot_freed(self) -> None:
        if self._free() > 0:
            if self._free_since is None:
                self._free_since = time.monotonic()
                self._wake.set()
            elif self._when:
                self._wake.set()  # claiming: the next round need not wait out a grace

    def _room(self) -> int:
        """Free slots, less our claims whose assignment has not arrived yet.

        Without them a worker slow to see its own claims (a busy host) would
        claim again for the same free slots, past its capacity.
        """
        return self._free() - len(self._claimed)

    # --- the watch ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Follow ``workers/``; while one of the `WATCHERS`, watch ``jobs/`` and claim.

        Runs until cancelled, or ends (quietly) once the coordinator is closed:
        nothing can be claimed through it, and the worker's own follower of the
        connection states ends the session's tasks.  A watch that cannot be
        set (no connection) is tried again after a grace.
        """
        try:
            await self._follow()
        except* CoordinatorClosedError:
            log.debug("worker %s: the coordinator closed, no more claims", self._worker)

    async def _follow(self) -> None:
        async with self._client.watch(self._layout.workers, recursive=True) as members:
            members.set_callback(self._on_member)
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._timer)
                self._list_members()
                while True:
                    while not self.watching_wanted():
                        await self._standing.wait()
                    try:
                        await self._watch_jobs()
                    except CoordinatorClosedError:
                        raise
                    except CoordError as exc:
                        log.debug("worker %s: no watch on the pending jobs: %s", self._worker, exc)
                        await anyio.sleep(self.grace)

    def watching_wanted(self) -> bool:
        """Whether this worker watches ``jobs/`` for claims now (see the module docstring)."""
        members = self._members
        if members is None or not self._active():
            return False  # not listed yet: the listing's answer decides
        return sum(name < self._worker for name in members) < WATCHERS

    @property
    def watching(self) -> bool:
        """True while this worker holds its watch on ``jobs/``."""
        return self._unwatch is not None

    def standing_changed(self) -> None:
        """This worker began or stopped assigning, or leaves: look again at `watching_wanted`."""
        self._standing.set()
        self._standing = anyio.Event()
        if self._unwatch is not None and not self.watching_wanted():
            self._unwatch.cancel()

    async def _watch_jobs(self) -> None:
        """Watch ``jobs/`` until no longer wanted; then forget what it told."""
        try:
            async with self._client.watch(self._layout.jobs, recursive=True) as watch:
                self._start_over()
                with anyio.CancelScope() as self._unwatch:
                    if not self.watching_wanted():
                        return
                    async for event in watch.events:
                        self._on_event(event)
        finally:
            self._unwatch = None
            self._forget()
            self._stale = False

    def _list_members(self) -> None:
        """List ``workers/`` in the connection's order with the watch's events (no task)."""

        def listed(answer: object) -> None:
            # Unreadable: watch, rather than leave the claims to nobody.
            self._members = set(answer) if isinstance(answer, list) else set()
            self.standing_changed()

        try:
            self._client.read_now(self._layout.workers, listed, children=True)
        except CoordError as exc:  # no connection: the next relist (reconnected) lists them
            log.debug("worker %s: could not list the workers: %s", self._worker, exc)

    def _on_member(self, event: WatchedEvent) -> None:
        parent, _, name = event.path.rpartition("/")
        if parent != self._layout.workers or self._members is None:
            return
        if event.type is EventType.CREATED:
            self._members.add(name)
        elif event.type is EventType.DELETED:
            self._members.discard(name)
        else:
            return
        self.standing_changed()

    def relist(self) -> None:
        """Events may have been missed (reconnected): list the workers and pending jobs again.

        The pending jobs are listed (one request per bucket, only while this
        worker watches ``jobs/``) once a job seen by the watch has been pending
        for `grace` with this worker free (no assigner acts), or, for jobs
        older than the watch, once this worker has been free `_IDLE_LISTING`
        graces with nothing assigned.  While an assigner is alive and the
        worker busy neither comes, and joining a fleet costs no listing.
        """
        self._list_members()
        self._claimed.clear()  # the queue is listed again too: what arrived is known afresh
        if self._unwatch is not None:
            self._start_over()

    def _forget(self) -> None:
        self._when.clear()
        self._paths.clear()
        self._looks.clear()
        self._ignored.clear()
        self._heap.clear()

    def _start_over(self) -> None:
        """List the pending jobs before the next claim: what the watch told may be stale."""
        now = time.monotonic()
        # What the watch told may be stale now: a job deleted while it missed events would
        # stay claimable here for good (no claim comes while an assigner is alive), and
        # with it every entry queued behind it in the heap.  Forget it all: the listing,
        # made no later than the earliest claim known would have been, finds what is left.
        known = min(self._when.values(), default=math.inf)
        self._forget()
        self._stale = True
        self._stale_at = min(now + self.grace * _IDLE_LISTING, max(known, now))
        self._wake.set()

    def sizes(self) -> dict[str, int]:
        """How many jobs are tracked (``when``) and entries kept in the timer's ``heap``."""
        return {"when": len(self._when), "heap": len(self._heap)}

    async def _list(self) -> None:
        self._stale = False
        gone: set[str] = set()
        self._gone_while_listing = gone
        try:
            paths = await bucketed(self._client, self._layout.jobs)  # bucket by bucket
        except NoNodeError:
            return
        finally:
            self._gone_while_listing = None
        if self._unwatch is None:
            return  # no longer watching: nothing would tell us of these jobs' going
        for job_id, path in paths.items():
            if job_id not in self._when and job_id not in self._ignored and job_id not in gone:
                self._paths[job_id] = path
                self._schedule(job_id, time.monotonic() + self.grace)

    def _on_event(self, event: WatchedEvent) -> None:
        parent, _, job_id = event.path.rpartition("/")
        if parent.rpartition("/")[0] != self._layout.jobs:
            return  # a bucket, or not under jobs/
        if event.type is EventType.CREATED or event.type is EventType.DATA_CHANGED:
            self._paths[job_id] = event.path
            self._ignored.discard(job_id)  # a new record: look at it afresh
            self._looks.pop(job_id, None)
            self._schedule(job_id, time.monotonic() + self.grace)
        elif event.type is EventType.DELETED:
            if self._gone_while_listing is not None:
                self._gone_while_listing.add(job_id)
            self._when.pop(job_id, None)
            self._paths.pop(job_id, None)
            self._looks.pop(job_id, None)
            self._ignored.discard(job_id)

    def _schedule(self, job_id: str, when: float) -> None:
        self._when[job_id] = when
        heap = self._heap
        heapq.heappush(heap, (when, job_id))
        if len(heap) > 2 * len(self._when) + _HEAP_SLACK:
            # Entries of jobs gone or rescheduled are dropped only from the top (`_next`):
            # behind a job that stays due and unclaimed (an assigner is alive; a delayed
            # job) they would pile up with every job seen.  Rebuild from the live ones.
            heap[:] = [(at, job) for job, at in self._when.items()]
            heapq.heapify(heap)
        if when < self._armed:
            self._wake.set()

    def _next(self) -> float | None:
        heap = self._heap
        while heap and self._when.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # gone, or rescheduled
        return heap[0][0] if heap else None

    # --- claiming ----------------------------------------------------------------------------

    async def _timer(self) -> None:
        """Sleep until a job has waited out the grace, then claim: no polling."""
        while True:
            self._wake = anyio.Event()
            now = time.monotonic()
            when = self._next()
            if self._stale:
                when = self._stale_at if when is None else min(when, self._stale_at)
            if (
                when is not None
                and self._active()
                and self._free_since is not None
                and self._room() > 0
            ):
                when = max(when, self._free_since + self.grace)
            elif when is not None:
                # Busy (a freed slot wakes us) or not ours to do now: look again later.
                when = max(when, now + self.grace)
            if when is None or when > now:
                self._armed = when if when is not None else math.inf
                with anyio.move_on_after(math.inf if when is None else when - now):
                    await self._wake.wait()
                continue
            self._armed = math.inf
            if self._stale:
                try:
                    await self._list()
                except CoordinatorClosedError:
                    raise
                except CoordError as exc:
                    log.warning("worker %s: could not list the pending jobs: %s", self._worker, exc)
                    self._stale = True
                    await anyio.sleep(self.grace)
                continue
            await self._round(now)

    async def _round(self, now: float) -> None:
        due: list[str] = []
        room = self._room()
        while len(due) < room and (when := self._next()) is not None and when <= now:
            _, job_id = heapq.heappop(self._heap)
            del self._when[job_id]
            due.append(job_id)
        if not due:
            return
        try:
            held = await self._held()
        except CoordinatorClosedError:
            raise
        except CoordError as exc:
            log.warning("worker %s: could not list the queues: %s", self._worker, exc)
            for job_id in due:
                self._schedule(job_id, now + self.grace)
            return
        async with anyio.create_task_group() as tg:
            for job_id in due:
                tg.start_soon(self._claim, job_id, held)

    async def _held(self) -> set[str]:
        """Every job id in some worker's queue now."""
        client, parent = self._client, self._layout.assignments
        # An error alone, not in an exception group: the caller catches a lost connection.
        queues = await under_each(client, parent, await client.children(parent))
        return set().union(*queues.values())

    async def _claim(self, job_id: str, held: set[str]) -> None:
        client, layout = self._client, self._layout
        path = self._paths.get(job_id) or layout.job(job_id)
        try:
            node = await client.get(path)
            try:
                record = decode_job(path, node.data)
            except NodeDataError:
                self._ignored.add(job_id)  # the assigner fails it when it reads it
                return
            if record.name not in self._names:
                self._ignored.add(job_id)
                return
            if not record.due(time.time()):
                assert record.run_at is not None
                wait = record.run_at - time.time()
                self._schedule(job_id, time.monotonic() + wait + self.grace)
                return
            if job_id in held or await client.exists(layout.result(job_id)) is not None:
                self._leave_alone(job_id)  # a second submit: the assigner resolves it
                return
            self._claimed.add(job_id)
            await client.multi(
                [
                    CheckOp(layout.worker(self._worker), -1),
                    CreateOp(layout.assignment(self._worker, job_id), node.data),
                    DeleteOp(path, node.stat.version),
                ]
            )
        except CoordinatorClosedError:
            raise
        except NoNodeError:
            return  # taken meanwhile
        except TransactionFailed as exc:  # taken, or changed (an event tells): not ours
            self._claimed.discard(job_id)
            log.debug("worker %s: claiming %s: %s", self._worker, job_id, exc)
            return
        except CoordError as exc:  # the outcome is unknown: look again later
            self._claimed.discard(job_id)
            log.debug("worker %s: claiming %s: %s", self._worker, job_id, exc)
            self._schedule(job_id, time.monotonic() + self.grace)
            return
        self.claims += 1
        log.info("worker %s claimed job %s: no assigner took it in time", self._worker, job_id)

    def _leave_alone(self, job_id: str) -> None:
        looks = self._looks[job_id] = self._looks.get(job_id, 0) + 1
        self._schedule(job_id, time.monotonic() + grown(self.grace, looks, _MAX_BACKOFF))
