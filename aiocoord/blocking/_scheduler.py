"""The job scheduler from threads: submit, wait for results, and (optionally) run a worker.

``coord.scheduler(root)`` wraps one async `Scheduler` built in the loop.
Every call is the async method run there, blocking the calling thread.
Handlers registered with `job` describe the payload and result for
validation, as on the async scheduler; they may be plain functions (run in
a worker thread of the loop when this process runs a worker) or async ones
(run in the loop).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .._checks import check_timeout
from ..scheduler import Backoff, JobInfo, JobStatus, JobWorker, Scheduler
from ._loop import Loop
from ._services import Started

__all__ = ("BlockingJobWorker", "BlockingScheduler")

F = TypeVar("F", bound=Callable[..., Any])


class BlockingJobWorker(Started[JobWorker]):
    """This process as a worker of the scheduler (see `aiocoord.JobWorker`), from threads.

    ``with sched.worker(capacity=4):`` blocks until registered; leaving
    blocks while it drains (running jobs finish for up to `drain_timeout`).
    Plain-function handlers run in worker threads, async ones in the loop.
    """


class BlockingScheduler:
    """The job scheduler at `root` for threads; see `aiocoord.Scheduler` for what each call does."""

    def __init__(self, loop: Loop, build: Callable[[], Scheduler]) -> None:
        self._loop = loop
        self.value: Scheduler = loop.call(build, what="scheduler")

    @property
    def root(self) -> str:
        return self.value.root

    @property
    def job_names(self) -> tuple[str, ...]:
        return self.value.job_names

    def job(
        self,
        name: str,
        *,
        timeout: float | None = None,
        retries: int = 0,
        backoff: Backoff | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = (Exception,),
        max_deliveries: int = 5,
        concurrency: int | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as the handler of jobs named `name`.

        Its type hints describe the payload and result, validated on submit
        and on `result` as by `Scheduler.job` (whose options these are).  A
        plain function is run in a worker thread when a worker of this
        process takes the job (a `timeout` or a cancel then stops waiting for
        it at the thread's end, since a thread cannot be interrupted); an
        async one in the loop.  `backoff` None: the async scheduler's default.
        Raises as `Scheduler.job` does.
        """
        register = self.value.job(
            name,
            timeout=timeout,
            retries=retries,
            backoff=Backoff() if backoff is None else backoff,
            retry_on=retry_on,
            max_deliveries=max_deliveries,
            concurrency=concurrency,
        )

        def decorate(handler: F) -> F:
            job: Callable[..., Any]
            if inspect.iscoroutinefunction(handler):
                job = handler
            elif callable(handler):
                job = _in_thread(handler)
            else:
                raise TypeError(f"job {name!r}: the handler must be a function")
            # In the loop, where a worker reads the handlers.
            self._loop.call(register, job, what="job()")
            return handler

        return decorate

    def submit(
        self,
        name: str,
        payload: Any = None,
        job_id: str | None = None,
        *,
        delay: float | None = None,
        run_at: datetime | None = None,
        priority: int = 0,
    ) -> str:
        """Queue a job and return its id (see `Scheduler.submit`); blocks until written."""

        async def submit() -> str:
            return await self.value.submit(
                name, payload, job_id, delay=delay, run_at=run_at, priority=priority
            )

        return self._loop.call(submit, what="submit()")

    def result(
        self, job_id: str, *, timeout: float | None = None, not_submitted_yet: bool = False
    ) -> Any:
        """Block until the job's outcome exists and return its result (see `Scheduler.result`).

        `TimeoutError` after `timeout` seconds (None: no bound); the wait given
        up leaves no watch behind.  `JobFailed`, `JobCancelled`, `NoNodeError`
        as from the async scheduler.
        """
        seconds = check_timeout(timeout)

        async def result() -> Any:
            with anyio.fail_after(seconds):
                return await self.value.result(job_id, not_submitted_yet=not_submitted_yet)

        return self._loop.call(result, what="result()")

    def status(self, job_id: str) -> JobStatus:
        """Where the job is now (see `Scheduler.status`)."""
        return self._loop.call(self.value.status, job_id, what="status()")

    def info(self, job_id: str) -> JobInfo:
        """The job's status record (see `Scheduler.info`)."""
        return self._loop.call(self.value.info, job_id, what="info()")

    def cancel(self, job_id: str) -> JobStatus:
        """Cancel the job; its final (or current) status (see `Scheduler.cancel`)."""
        return self._loop.call(self.value.cancel, job_id, what="cancel()")

    def retry(self, job_id: str) -> None:
        """Run a FAILED or CANCELLED job again (see `Scheduler.retry`)."""
        self._loop.call(self.value.retry, job_id, what="retry()")

    def jobs(
        self, status: JobStatus | None = None, *, limit: int | None = None, after: str | None = None
    ) -> list[JobInfo]:
        """The jobs known now, in job id order, as a list (see `Scheduler.jobs`)."""

        async def jobs() -> list[JobInfo]:
            return [info async for info in self.value.jobs(status, limit=limit, after=after)]

        return self._loop.call(jobs, what="jobs()")

    def worker(
        self, capacity: int = 8, *, worker_id: str | None = None, drain_timeout: float = 20.0
    ) -> BlockingJobWorker:
        """This process as a worker: ``with sched.worker(capacity=4):`` (see `Scheduler.worker`).

        Register every job first, as for the async scheduler.
        """
        return BlockingJobWorker(
            self._loop,
            lambda: self.value.worker(capacity, worker_id=worker_id, drain_timeout=drain_timeout),
            what="job worker",
        )

    def __repr__(self) -> str:
        return f"<blocking {self.value!r}>"


def _in_thread(handler: Callable[..., Any]) -> Callable[..., Any]:
    """`handler` as an async function with its signature, run in a worker thread."""

    @functools.wraps(handler)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(handler, *args, **kwargs))

    return run
