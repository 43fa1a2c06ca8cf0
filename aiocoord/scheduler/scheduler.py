"""`Scheduler`: submit JSON jobs by name, run them on workers, await their results.

Clients submit jobs by name; one elected assigner (a leader latch among the
workers) gives each job to a live worker with one atomic transaction; the
worker runs the registered async handler and records the result; the client
awaits the result through a watch.  At-least-once: a job whose worker dies
goes back to the pending jobs and runs again elsewhere; the job id makes
submits idempotent.

    sched = Scheduler(coord, "/app/jobs")

    @sched.job("sum")
    async def add(a: int, b: int) -> int:
        return a + b

    async with sched.worker(capacity=8):
        job_id = await sched.submit("sum", {"a": 1, "b": 2})
        assert await sched.result(job_id) == 3

Node layout under `root` (details in `aiocoord.scheduler._records`)::

    jobs/<id>                 pending jobs
    workers/<worker>          live workers (ephemeral), capacity and job names
    assignments/<worker>/<id> jobs given to a worker
    results/<id>              outcomes, kept `result_ttl` seconds (TTL nodes)
    assigner/                 the assigner election (Curator LeaderLatch layout)

Requests per job are constant in the number of workers and jobs: a submit
(1), the assigner's read and transaction (2), the worker's read, result and
delete (3), the client's watch and read (2).  Nobody lists a directory per
job; the assigner and each worker learn of changes from one persistent
recursive watch each.

Results are TTL nodes where the server allows them (``extendedTypesEnabled``);
otherwise persistent nodes that the assigner sweeps after `result_ttl` (by
their modification time against the assigner's clock).

Limits: a payload or result is at most 1 MB of JSON (ZooKeeper's node
limit); a newly elected assigner lists the pending jobs in one reply, which
the client's 1 MB packet limit caps at some 25,000 pending ids of 32
characters: submit in waves rather than queue more than that.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import pydantic

from ..errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    InvalidPathError,
    JobFailed,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from ..session import Coordinator
from ..zk.paths import validate_path
from ..zk.types import CreateOp, DeleteOp, EventType
from ._jobs import Handler, JobType
from ._ops import Retention, ensure_layout
from ._records import (
    JobsLayout,
    check_job_id,
    decode_result,
    encode_job,
    job_limit,
    new_job_id,
)
from ._strategies import Strategy, strategy_from
from ._worker import JobWorker

__all__ = ("JobStatus", "Scheduler")

H = TypeVar("H", bound=Handler)


class JobStatus(enum.Enum):
    """Where a job is: waiting, with a worker, or finished (with a result or an error)."""

    PENDING = "pending"
    ASSIGNED = "assigned"
    DONE = "done"
    FAILED = "failed"


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
        if not isinstance(coord, Coordinator):
            raise TypeError(f"coord must be an aiocoord.Coordinator, not {type(coord).__name__}")
        try:
            root = validate_path(root)
        except InvalidPathError as exc:
            raise InvalidPathError(root, f"root {exc.reason}") from None
        if root == "/":
            raise InvalidPathError(root, "root: the scheduler needs a node of its own, not '/'")
        if isinstance(result_ttl, bool) or not isinstance(result_ttl, int | float):
            raise TypeError(f"result_ttl must be a number of seconds, not {result_ttl!r}")
        if not 0.001 <= result_ttl <= 10 * 365 * 86400:
            raise ConfigError("result_ttl", f"must be between 1 ms and 10 years, not {result_ttl}")
        self._coord = coord
        self._client = coord.client
        self._layout = JobsLayout(root)
        self._strategy = strategy_from(strategy)
        self._retention = Retention(float(result_ttl))
        self._handlers: dict[str, JobType] = {}

    @property
    def root(self) -> str:
        return self._layout.root

    @property
    def strategy(self) -> Strategy:
        return self._strategy

    @property
    def jobs(self) -> tuple[str, ...]:
        """The names of the registered jobs."""
        return tuple(self._handlers)

    # --- registration ------------------------------------------------------------------------

    def job(self, name: str) -> Callable[[H], H]:
        """Register the decorated async function as the handler of jobs named `name`.

        The payload and result are described by its type hints (see
        `aiocoord.scheduler._jobs`).  Register every job before entering
        `worker()`: a worker advertises the names it has when it registers.
        Raises `TypeError` for a handler that is not async or whose hints are
        not JSON, `ValueError` for a bad or already registered name.
        """

        def register(handler: H) -> H:
            job = JobType.build(name, handler)
            if job.name in self._handlers:
                raise ValueError(f"name: a job named {name!r} is already registered")
            self._handlers[job.name] = job
            return handler

        return register

    def worker(
        self, capacity: int = 8, *, worker_id: str | None = None, drain_timeout: float = 30.0
    ) -> JobWorker:
        """This process as a worker: ``async with sched.worker(capacity=8):`` (see `JobWorker`).

        Without ``async with``: ``w = sched.worker(); await w.start()`` ...
        ``await w.aclose()``, from any task.

        `worker_id` names it (default: host, pid and a random suffix; the node
        name adds the session id); `drain_timeout` bounds how long leaving
        waits for running jobs before handing them back.
        """
        return JobWorker(
            self._coord,
            self._layout,
            self._handlers,
            self._strategy,
            self._retention,
            capacity=capacity,
            worker_id=worker_id,
            drain_timeout=drain_timeout,
        )

    # --- client side -------------------------------------------------------------------------

    async def submit(self, name: str, payload: Any = None, job_id: str | None = None) -> str:
        """Queue a job; returns its id.  Idempotent for a given `job_id`.

        Everything is checked before anything is written: `ValueError` for an
        unknown `name`, a `payload` that fails validation or is over the 1 MB
        node limit, a bad `job_id`.  Submitting an id that is pending or done
        writes nothing and returns the id; an id still running makes the
        assigner drop the second copy once the first has finished.  Raises
        `ConnectionLostError` once the request timeout has passed without the
        job written (one deadline across retries and reconnect waits; the cause
        is chained): the job may have been queued all the same, so submit
        again with the same `job_id` to be sure.
        """
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        job = self._handlers.get(name)
        if job is None:
            known = ", ".join(repr(n) for n in self._handlers) or "none"
            raise ValueError(
                f"name: no job {name!r} is registered here (registered: {known}); "
                f"use @scheduler.job({name!r})"
            )
        data = encode_job(name, job.validate_payload(payload), job_limit(self._layout))
        careful = job_id is not None
        job_id = check_job_id(job_id) if job_id is not None else new_job_id()
        path, result = self._layout.job(job_id), self._layout.result(job_id)
        client = self._client
        # One deadline for the whole submit: the writes, the reconnect waits and the retries.
        deadline = client.deadline()
        failure: ConnectionLostError | None = None
        with anyio.CancelScope(deadline=deadline.at):
            for _ in range(6):
                try:
                    if careful:
                        # Create the job only if it has no result yet: creating and deleting
                        # the result node in the same transaction fails if it exists.
                        await client.multi(
                            [CreateOp(path, data), CreateOp(result), DeleteOp(result)]
                        )
                    else:
                        await client.create(path, data)
                    return job_id
                except TransactionFailed as exc:
                    if isinstance(exc.cause, NodeExistsError):
                        return job_id  # pending (first op) or done (second op)
                    if not isinstance(exc.cause, NoNodeError):
                        raise
                    await ensure_layout(client, self._layout)
                except NodeExistsError:
                    return job_id  # our own create, whose reply was lost
                except NoNodeError:
                    await ensure_layout(client, self._layout)
                except CoordinatorClosedError:
                    raise
                except ConnectionLostError as exc:
                    failure = exc
                    careful = True  # the job may have been created and run meanwhile
                    await client.wait_connected()  # within the deadline around the loop
        client.session.ensure_open()
        error = client.unreachable(
            deadline, f"could not submit job {job_id} to {self.root} (it may have been queued)"
        )
        raise error from (error.__cause__ or failure)

    async def result(self, job_id: str) -> Any:
        """Wait for the job's outcome through a watch and return its result.

        Blocks until the result exists: bound it with ``anyio.fail_after``.
        Raises `JobFailed` (with the remote error's type and message) if the
        handler raised, `NodeDataError` if the result node is not a scheduler
        result (or does not fit the handler's return type registered here).
        The result is validated against the return annotation when the job's
        handler is registered in this process.  A result is kept `result_ttl`
        seconds: waiting for an older job waits forever.  A wait given up
        (cancelled, timed out) leaves no watch behind, here or on the server.
        """
        job_id = check_job_id(job_id)
        path = self._layout.result(job_id)
        while True:
            try:
                stat, watch = await self._client.exists_watch(path)
                try:
                    if stat is None:
                        event = await watch.wait()
                        if event.type is EventType.SESSION_LOST:
                            await self._coord.wait_connected()
                            continue
                finally:
                    # Given up, or the result was already there: the watch is not needed.
                    self._client.remove_watch(watch)
                node = await self._client.get(path)
            except NoNodeError:
                continue  # a transient node (a careful submit) or removed: wait again
            except CoordinatorClosedError:
                raise
            except ConnectionLostError:
                await self._coord.wait_connected()
                continue
            return self._outcome(job_id, path, node.data)

    def _outcome(self, job_id: str, path: str, data: bytes) -> Any:
        record = decode_result(path, data)
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

        Finished jobs cost one read; a job with a worker costs a listing and one
        read per worker queue: for monitoring, not for polling (use `result`).
        `NodeDataError` if the result node is not a scheduler result.
        """
        job_id = check_job_id(job_id)
        layout, client = self._layout, self._client
        for _ in range(2):  # a job moved back to pending while we looked is seen the second time
            try:
                node = await client.get(layout.result(job_id))
            except NoNodeError:
                pass
            else:
                record = decode_result(layout.result(job_id), node.data)
                return JobStatus.DONE if record.ok else JobStatus.FAILED
            if await client.exists(layout.job(job_id)) is not None:
                return JobStatus.PENDING
            try:
                queues = await client.children(layout.assignments)
            except NoNodeError:
                queues = []
            found: list[str] = []
            async with anyio.create_task_group() as tg:
                for worker in queues:
                    tg.start_soon(self._look, found, layout.assignment(worker, job_id))
            if found:
                return JobStatus.ASSIGNED
        raise NoNodeError(
            f"no job {job_id!r} (never submitted, or its result expired)", path=layout.job(job_id)
        )

    async def _look(self, found: list[str], path: str) -> None:
        if await self._client.exists(path) is not None:
            found.append(path)

    def __repr__(self) -> str:
        return (
            f"<Scheduler {self.root} jobs={list(self._handlers)} "
            f"strategy={type(self._strategy).__name__}>"
        )
