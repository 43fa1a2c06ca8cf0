"""`Scheduler`: submit JSON jobs by name, run them on workers, await their results.

Clients submit jobs by name; one elected assigner (a leader selector among
the workers) gives each job to a live worker with one atomic transaction; the
worker runs the registered async handler and records the result; the client
awaits the result through a watch.  At-least-once: a job whose worker dies
goes back to the pending jobs and runs again elsewhere; the job id makes
submits idempotent.  A job no assigner took within half a second (the
assigner died with its session still open) is claimed by a free worker
itself, with the same transaction (`_claimer`): no stall until that session
expires.

    sched = Scheduler(coord, "/app/jobs")

    @sched.job("sum")
    async def add(a: int, b: int) -> int:
        return a + b

    async with sched.worker(capacity=8):
        job_id = await sched.submit("sum", {"a": 1, "b": 2})
        assert await sched.result(job_id) == 3

Node layout under `root` (details in `aiocoord.scheduler._layout`)::

    jobs/<p>.<hh>/<id>        pending and scheduled jobs of priority <p> (due later: a delay
                              or a retry's backoff), in 256 buckets by a hash of the id (<hh>)
    workers/<worker>          live workers (ephemeral), capacity and job names
    assignments/<worker>/<id> jobs given to a worker (marked when the handler starts)
    results/<hh>/<id>         outcomes (done, failed, cancelled), kept `result_ttl` seconds
    assigner/                 the assigner election (Curator LeaderLatch layout)

Statuses: PENDING, SCHEDULED, ASSIGNED, RUNNING, then DONE, FAILED or
CANCELLED; creating ``results/<id>`` is the one decision point of a job's
end, so a cancel racing a completion ends in one final status.  Retries go
back to ``jobs/`` with a later `run_at`; the assigner keeps due times in a
heap rebuilt on each term (`_state`), so delayed jobs survive a failover.

Requests per job are constant in the number of workers and jobs: a submit
(1), the assigner's read and transaction (2), the worker's read, running
mark, and result with the assignment's delete in one transaction (3), the
client's watch and read (2): 8, of which 4 are writes; fewer under load,
towards 5, as transactions are shared (the assigner moves the jobs ready
together; a worker's runs share their marks and results).  Nobody
lists a directory per job; the assigner and each worker learn of changes from
persistent recursive watches (the assigner's on ``jobs/``, ``workers/`` and
``assignments/``, not on the results; a worker's on its queue and on
``workers/``; the two workers first by name also on ``jobs/``, for claims).
Claims cost requests only when the assigner is dead or lags.

Results are TTL nodes where the server allows them (``extendedTypesEnabled``);
otherwise persistent nodes that the assigner sweeps after `result_ttl` (by
their modification time against the assigner's clock).

Limits: a payload or result is at most 1 MB of JSON (ZooKeeper's node
limit).  No listing grows with the backlog as a whole: pending jobs and
results are listed bucket by bucket (1/256 of them each), so a backlog of
millions of jobs is reconciled, listed and run without a reply over the
client's packet limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

import pydantic

from .._checks import check_coordinator, check_int, check_root, check_seconds
from ..errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    InvalidPathError,
    JobCancelled,
    JobFailed,
    NodeDataError,
    NoNodeError,
)
from ..session import Coordinator
from ..zk.types import EventType
from ._cancel import cancel_job
from ._follow import retry_job, watch_job
from ._jobs import Handler, JobType
from ._lookup import info_of, list_jobs, locate
from ._ops import Retention
from ._payload import PayloadShape
from ._policy import DEFAULT_BACKOFF, MAX_SECONDS, JobOptions, RetryBackoff
from ._records import (
    JobsLayout,
    check_job_id,
    decode_result,
)
from ._status import JobInfo, JobStatus
from ._strategies import Strategy, strategy_from
from ._submit import prepare_job, write_job
from ._worker import DRAIN_TIMEOUT, JobWorker

__all__ = ("JobStatus", "Scheduler")

_REMEMBERED = 4096  # ids of jobs submitted here that `result` trusts to exist

H = TypeVar("H", bound=Handler)


class Scheduler:
    """A job scheduler rooted at `root`; see the module docstring.

    `strategy` picks the worker for each job when this process is the
    assigner: ``"round-robin"`` (default), ``"random"``, ``"least-loaded"``, or
    any object with ``choose(job, workers)`` (`Strategy`).  `result_ttl` is how
    long results are kept, in seconds.  Raises `InvalidPathError` for a bad
    `root`, `ConfigError`/`TypeError` for other bad arguments.
    """

    def __init__(
        self,
        coord: Coordinator,
        root: str,
        *,
        strategy: str | Strategy = "round-robin",
        result_ttl: float = 3600.0,
    ) -> None:
        check_coordinator(coord)
        root = check_root(root)
        if root == "/":
            raise InvalidPathError(root, "root: the scheduler needs a node of its own, not '/'")
        ttl = check_seconds("result_ttl", result_ttl, positive=True, most=MAX_SECONDS)
        if ttl < 0.001:
            raise ConfigError("result_ttl", f"must be at least 1 ms, not {result_ttl!r}")
        self._coord = coord
        self._client = coord.client
        self._layout = JobsLayout(root)
        self._strategy = strategy_from(strategy)
        self._retention = Retention(ttl)
        self._handlers: dict[str, JobType] = {}
        # Ids submitted here lately (oldest first): `result` need not look whether they exist.
        self._submitted: dict[str, None] = {}

    @property
    def root(self) -> str:
        return self._layout.root

    @property
    def coordinator(self) -> Coordinator:
        """The coordinator this scheduler works through (its state says whether ZooKeeper is near)."""
        return self._coord

    @property
    def strategy(self) -> Strategy:
        return self._strategy

    @property
    def job_names(self) -> tuple[str, ...]:
        """The names of the registered jobs."""
        return tuple(self._handlers)

    def payload_schema(self, name: str) -> dict[str, Any]:
        """The JSON Schema of job `name`'s payload, from its handler's hints (`KeyError` if unknown).

        What `submit` validates against: an HTTP layer can publish it (OpenAPI).
        """
        schema: dict[str, Any] = self._handlers[name].payload_adapter.json_schema()
        return schema

    def result_schema(self, name: str) -> dict[str, Any]:
        """The JSON Schema of job `name`'s result, from its return annotation."""
        schema: dict[str, Any] = self._handlers[name].result_adapter.json_schema(
            mode="serialization"
        )
        return schema

    def payload_shape(self, name: str) -> PayloadShape:
        """Job `name`'s payload as its handler's hints describe it (`KeyError` if unknown).

        The same reading `submit` validates with: an HTTP layer can build a
        typed request body from it (the handler's model, or one of its fields).
        """
        return self._handlers[name].shape

    def handler(self, name: str) -> Handler:
        """The handler registered as job `name`, as given to `job` (`KeyError` if unknown).

        Read-only: its signature is the payload's contract (what `payload_schema`
        describes), so an HTTP layer can build a typed request body from its hints.
        """
        return self._handlers[name].handler

    # --- registration ------------------------------------------------------------------------

    def job(
        self,
        name: str,
        *,
        timeout: float | None = None,
        retries: int = 0,
        backoff: RetryBackoff = DEFAULT_BACKOFF,
        retry_on: type[Exception] | tuple[type[Exception], ...] = (Exception,),
        max_deliveries: int = 5,
        concurrency: int | None = None,
    ) -> Callable[[H], H]:
        """Register the decorated async function as the handler of jobs named `name`.

        The payload and result are described by its type hints (see
        `aiocoord.scheduler._jobs`).  `timeout` (seconds) cancels a run that
        takes longer; it counts as a failed attempt (``TimeoutError``).  A
        failed attempt whose error is an instance of `retry_on` runs again
        after `backoff`, up to `retries` times; then the job is FAILED with
        the last error.  A job whose worker died while running it counts a
        delivery: at `max_deliveries` it is FAILED as poison (``PoisonJob``)
        rather than sent to one more worker.  `concurrency` caps the runs
        of `name` at once across the fleet (give every process the same
        cap): a worker holds one of its slots (an ephemeral node) while it
        runs one, so a dead worker's slot is freed when its session ends,
        and the assigner gives no more than that many out at once.  Register every job before
        entering `worker()`: a worker advertises the names it has when it
        registers.  Raises `TypeError` for a handler that is not async or
        whose hints are not JSON, `ValueError`/`TypeError` naming the
        argument for a bad name (or one already registered) or option.
        """
        options = JobOptions.build(
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            retry_on=retry_on,
            max_deliveries=max_deliveries,
            concurrency=concurrency,
        )

        def register(handler: H) -> H:
            job = replace(JobType.build(name, handler), options=options)
            if job.name in self._handlers:
                raise ValueError(f"name: a job named {name!r} is already registered")
            self._handlers[job.name] = job
            return handler

        return register

    def worker(
        self,
        capacity: int = 8,
        *,
        participant_id: str | None = None,
        worker_id: str | None = None,
        drain_timeout: float = DRAIN_TIMEOUT,
    ) -> JobWorker:
        """This process as a worker: ``async with sched.worker(capacity=8):`` (see `JobWorker`).

        Without ``async with``: ``w = sched.worker(); await w.start()`` ...
        ``await w.aclose()``, from any task.

        `participant_id` names this process among the workers, as it does in
        the other recipes (a leader latch, a mutex): give the one the process
        uses elsewhere (``lifespan(participant_id=...)``).  The worker's node
        name, shown as a job's ``worker``, is ``<participant_id>-<session id
        in hex>``, and its id in the assigner election is `participant_id`.
        Default: host, pid and a random suffix (so two workers of one process
        never share a name).  It must be 1-200 of ``[A-Za-z0-9_.:@=+-]``
        (`ConfigError` naming it otherwise).  `worker_id` is its former name:
        the same, and not both.  `drain_timeout` (default 20 s) bounds how
        long leaving waits for running jobs before handing them back: keep it
        below the time the process is given to stop (Kubernetes'
        ``terminationGracePeriodSeconds``, 30 s by default).
        """
        if participant_id is not None and worker_id is not None:
            raise ConfigError("participant_id", "give participant_id or worker_id, not both")
        return JobWorker(
            self._coord,
            self._layout,
            self._handlers,
            self._strategy,
            self._retention,
            capacity=capacity,
            worker_id=worker_id if participant_id is None else participant_id,
            drain_timeout=drain_timeout,
            id_name="worker_id" if participant_id is None else "participant_id",
        )

    # --- client side -------------------------------------------------------------------------

    async def submit(
        self,
        name: str,
        payload: Any = None,
        job_id: str | None = None,
        *,
        delay: float | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> str:
        """Queue a job; returns its id.  Idempotent for a given `job_id`.

        `delay` (seconds) or `run_at` (a timezone-aware datetime) hold it back
        until then (status SCHEDULED); it is stored durably and survives an
        assigner's failover.  `priority` (an int, default 0, within
        +-1,000,000): among due jobs a higher one is assigned first; within
        one priority, jobs run in about the order submitted.

        Everything is checked before anything is written: `ValueError` or
        `TypeError` naming the argument for an unknown `name`, a `payload`
        that fails validation or is over the 1 MB node limit, a bad `job_id`,
        a negative, NaN or infinite `delay`, a naive `run_at`, or both.
        Submitting an id that is pending or done with the same name, payload
        and priority writes nothing and returns the id; with another name,
        payload or priority it raises `JobConflict`.  An id still running
        makes the assigner drop the second copy once the first has finished.
        A submit with its own `job_id` costs one listing of the bucket names
        more than one without (to look for the id at other priorities).
        Raises `ConnectionLostError` once the request timeout has passed
        without the job written (one deadline across retries and reconnect
        waits; the cause is chained): the job may have been queued all the
        same, so submit again with the same `job_id` to be sure.
        """
        new = prepare_job(
            self._handlers, self._layout, name, payload, job_id, delay, run_at, priority
        )
        job_id = await write_job(
            self._client,
            self._layout,
            new.job_id,
            new.data,
            careful=new.careful,
            key=new.key,
            priority=new.priority,
        )
        self._submitted[job_id] = None
        if len(self._submitted) > _REMEMBERED:
            del self._submitted[next(iter(self._submitted))]
        return job_id

    async def result(self, job_id: str, *, not_submitted_yet: bool = False) -> Any:
        """Wait for the job's outcome through a watch and return its result.

        Blocks until the result exists: bound it with ``anyio.fail_after``.
        Raises `NoNodeError` at once for an id nothing is known of (never
        submitted, a typo, or its result is older than `result_ttl`); pass
        ``not_submitted_yet=True`` to wait for a job that another task or
        process may still submit under that id.  Raises `JobFailed` (with the
        remote error's type and message) if the job failed (its handler
        raised, timed out, or it was poison), `JobCancelled` if it was
        cancelled, `NodeDataError` if the result node is not a scheduler
        result (or does not fit the handler's return type registered here).
        The result is validated against the return annotation when the job's
        handler is registered in this process.  While ZooKeeper is away it
        waits for the session to come back.  A wait given up (cancelled,
        timed out) leaves no watch behind, here or on the server.
        """
        job_id = check_job_id(job_id)
        if not isinstance(not_submitted_yet, bool):
            raise TypeError(f"not_submitted_yet must be a bool, not {not_submitted_yet!r}")
        path = self._layout.result(job_id)
        known = not_submitted_yet or job_id in self._submitted
        while True:
            try:
                stat, watch = await self._client.exists_watch(path)
                try:
                    # Looked for once, with the watch already set: a job that finishes
                    # meanwhile is found here or fires the watch.
                    if (
                        stat is None
                        and not known
                        and await locate(self._client, self._layout, job_id) is None
                    ):
                        raise NoNodeError(
                            f"no job {job_id!r} (never submitted, or its result expired); "
                            "pass not_submitted_yet=True to wait for it",
                            path=self._layout.job(job_id),
                        )
                    known = True
                    if stat is None:
                        event = await watch.wait()
                        if event.type is EventType.SESSION_LOST:
                            await self._coord.client.session.wait_connected()
                            continue
                finally:
                    # Given up, or the result was already there: the watch is not needed.
                    self._client.remove_watch(watch)
                node = await self._client.get(path)
            except NoNodeError:
                if not known:
                    raise
                continue  # a transient node (a careful submit) or removed: wait again
            except CoordinatorClosedError:
                raise
            except ConnectionLostError:
                await self._coord.client.session.wait_connected()
                continue
            return self._outcome(job_id, path, node.data)

    def _outcome(self, job_id: str, path: str, data: bytes) -> Any:
        record = decode_result(path, data)
        if record.cancelled:
            raise JobCancelled(job_id, record.message)
        if not record.ok:
            raise JobFailed(job_id, record.type, record.message)
        job = self._handlers.get(record.name)
        if job is None:
            return record.value
        try:
            return job.load_result(record.value)
        except pydantic.ValidationError as exc:
            raise NodeDataError(path, f"result does not fit {record.name!r}: {exc}") from exc

    async def status(self, job_id: str) -> JobStatus:
        """Where the job is now; `NoNodeError` if nothing is known of it (or its result expired).

        Costs what `info` costs.  `NodeDataError` if its node is not a scheduler record.
        """
        return (await self.info(job_id)).status

    async def info(self, job_id: str) -> JobInfo:
        """The job's status record (`JobInfo`); `NoNodeError` if nothing is known of it.

        A finished or waiting job costs one or two reads; a job with a worker
        also a listing of the worker queues and one read per queue: for
        monitoring, not for polling (use `result`).  `NodeDataError` if the
        job's node is not a scheduler record.
        """
        job_id = check_job_id(job_id)
        found = await locate(self._client, self._layout, job_id)
        if found is None:
            raise NoNodeError(
                f"no job {job_id!r} (never submitted, or its result expired)",
                path=self._layout.job(job_id),
            )
        return info_of(job_id, found)

    async def cancel(self, job_id: str) -> JobStatus:
        """Cancel the job; returns its final status (or current one, see below).

        Pending or scheduled: it never runs, CANCELLED.  Running: its worker
        cancels the handler, CANCELLED.  Already finished: nothing changes,
        its status is returned.  Idempotent; a cancel racing the job's end
        leaves one final status that every reader sees.  `NoNodeError` if
        nothing is known of the job; `ConnectionLostError` if the connection
        failed meanwhile (cancel again: it is idempotent).
        """
        job_id = check_job_id(job_id)
        return await cancel_job(self._client, self._layout, self._retention, job_id)

    async def retry(self, job_id: str) -> None:
        """Run a FAILED or CANCELLED job again: it is pending once more, with its attempts kept.

        One transaction removes its result and queues it (same id, name,
        payload and priority; it gets its `retries` again).  Raises
        `JobConflict` (a `ValueError`) for a DONE job or one not finished,
        naming its status, or one whose result did not keep its payload;
        `NoNodeError` if nothing is known of it (or its result expired).
        """
        job_id = check_job_id(job_id)
        await retry_job(self._coord, self._layout, job_id)

    def watch(self, job_id: str) -> AsyncIterator[JobInfo]:
        """`JobInfo` at each status change: ``async for info in sched.watch(job_id)``.

        Yields the current status first, then each new one, and ends after the
        final one (DONE, FAILED or CANCELLED).  Blocks between changes on
        watches, never polling; leaving the loop (or cancelling it) removes
        them.  A status that lasts less than one look may be skipped (the
        later one is yielded).  Waits out connection losses.  Raises
        `NoNodeError` if nothing is known of the job when it starts.
        """
        job_id = check_job_id(job_id)
        return watch_job(self._coord, self._layout, job_id)

    def jobs(
        self,
        status: JobStatus | None = None,
        *,
        limit: int | None = None,
        after: str | None = None,
    ) -> AsyncIterator[JobInfo]:
        """The jobs known now, in job id order: ``async for info in sched.jobs(...)``.

        `status` keeps only jobs with that status; `limit` stops after that
        many; `after` starts after that job id (the last id of the previous
        page).  Results are kept `result_ttl` seconds.  A record that does not
        decode is logged and left out.  Bad arguments fail at the call.
        """
        if status is not None and not isinstance(status, JobStatus):
            raise TypeError(f"status must be a JobStatus, not {type(status).__name__}")
        if limit is not None:
            check_int("limit", limit, least=1)
        if after is not None:
            after = check_job_id(after, "after")
        return list_jobs(self._client, self._layout, status=status, limit=limit, after=after)

    def __repr__(self) -> str:
        return (
            f"<Scheduler {self.root} jobs={list(self._handlers)} "
            f"strategy={type(self._strategy).__name__}>"
        )
