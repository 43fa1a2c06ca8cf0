"""`Cron`: jobs registered with ``@cron.job(...)``, each led by one worker, each firing run once."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta, tzinfo
from typing import Any, Required, TypedDict, TypeVar, Unpack

import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..._broadcast import Broadcast
from ..._checks import check_coordinator, check_int, check_node_name, check_root, check_seconds
from ..._lifecycle import Lifecycle, Service
from ...errors import ConfigError, NoNodeError
from ...session import Coordinator
from ...zk.paths import join
from ..task_leadership import TaskLeadership, Worker, task_leadership
from ._firing import Firing, FiringOutcome, outcome_of
from ._plan import Missed, Options
from ._record import Entry, decode
from ._runner import Job, JobRunner
from ._schedule import resolve_timezone, schedule_of

__all__ = ("Cron", "CronOptions", "cron")

F = TypeVar("F", bound=Callable[[Firing], Awaitable[Any]])

MAX_HISTORY = 500  # entries kept per job: a few hundred bytes each, inside a node's limit
_MISSED = ("skip", "run_once", "run_all")


def _is_async(func: object) -> bool:
    return inspect.iscoroutinefunction(func)


class Cron(Service):
    """Cluster-wide cron: every scheduled time of every job runs once across the fleet.

    Register jobs with `job` before starting.  Entering (``async with cron``
    or ``await cron.start()``) registers this worker in task leadership under
    `root` (each job is a task) and blocks until it has read the worker list;
    the jobs this worker is chosen for then fire in the background.  Leaving
    cancels running firings (their claims stay: the next leader records them
    interrupted, or runs them again with ``retry_interrupted=True``) and
    removes this worker.  It may be left from another task than the one
    that entered it.  Bad arguments raise `TypeError`, `InvalidPathError` or
    `ConfigError` naming them, before anything is written.

    `timezone` (an IANA name or a `tzinfo`; default UTC) is where cron
    expressions are read and `Firing.scheduled_at` is shown; `history` is
    how many outcomes each job keeps; `grace` (seconds) how late a firing may
    still run as scheduled; `settle` goes to the task leadership (how long a
    leader waits before it hands a job over to a newer worker).
    """

    def __init__(
        self,
        coord: Coordinator,
        root: str,
        *,
        worker: Worker,
        timezone: str | tzinfo | None = None,
        history: int = 50,
        grace: float = 60.0,
        settle: float = 1.0,
    ) -> None:
        check_coordinator(coord)
        root = check_root(root)
        if not isinstance(worker, Worker):
            raise TypeError(f"worker must be an aiocoord.Worker, not {type(worker).__name__}")
        self.coord = coord
        self.root = root
        self.worker = worker
        self.timezone = resolve_timezone(timezone)
        self._tz_name = timezone if isinstance(timezone, str) else str(self.timezone)
        self._history = check_int("history", history, least=0, most=MAX_HISTORY)
        self._grace = check_seconds("grace", grace)
        self._settle = check_seconds("settle", settle)
        self._jobs: dict[str, Job] = {}
        self._tl: TaskLeadership | None = None
        self._closing = False
        self._outcomes: Broadcast[FiringOutcome] = Broadcast(replay_last=False)
        self._life = Lifecycle(
            f"cron {root} ({worker.id})", self._setup, stopping=self._stop, stopped=self._stop
        )

    # --- jobs ------------------------------------------------------------------------------

    def job(
        self,
        expression: str | None = None,
        *,
        every: timedelta | float | None = None,
        name: str | None = None,
        missed: Missed = "skip",
        retry_interrupted: bool = False,
        jitter: float = 0.0,
        max_catch_up: int = 100,
        grace: float | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated ``async def f(firing)`` as a job; returns it unchanged.

        Give either a cron `expression` (five fields, or six with seconds
        first; read in the cron's time zone) or `every` (a `timedelta` or
        seconds; fires at the multiples of it since the Unix epoch).  `name`
        defaults to the function's name.  `missed` says what happens to
        firings no worker ran within `grace` seconds of their time:
        ``"skip"`` (recorded missed), ``"run_once"`` (the latest runs once,
        late) or ``"run_all"`` (each runs, oldest first, at most
        `max_catch_up`).  `retry_interrupted` runs again a firing whose runner
        was interrupted (then at least once, not exactly once).  `jitter`
        delays each firing by up to that many seconds, drawn at random.
        """
        if self._life.started:
            raise RuntimeError("register cron jobs before starting the cron")
        tz = self.timezone
        schedule = schedule_of(expression, every, tz)
        if missed not in _MISSED:
            raise ConfigError("missed", f"must be one of {', '.join(_MISSED)}, not {missed!r}")
        if not isinstance(retry_interrupted, bool):
            raise TypeError(
                f"retry_interrupted must be a bool, not {type(retry_interrupted).__name__}"
            )
        jitter = check_seconds("jitter", jitter)
        max_catch_up = check_int("max_catch_up", max_catch_up, least=1, most=10_000)
        grace = self._grace if grace is None else check_seconds("grace", grace)
        options = Options(missed, retry_interrupted, grace + jitter, max_catch_up, self._history)

        def register(func: F) -> F:
            if not _is_async(func):
                raise TypeError(f"a cron job must be an async function, not {func!r}")
            job_name = check_node_name("name", func.__name__ if name is None else name)
            if job_name in self._jobs:
                raise ConfigError("name", f"a job named {job_name!r} is already registered")
            if self._life.started:
                raise RuntimeError("register cron jobs before starting the cron")
            self._jobs[job_name] = Job(job_name, func, schedule, options, jitter)
            return func

        if name is not None:
            check_node_name("name", name)
        return register

    @property
    def jobs(self) -> tuple[str, ...]:
        """The registered jobs' names."""
        return tuple(self._jobs)

    @property
    def leading(self) -> frozenset[str]:
        """The jobs this worker leads now (and so fires)."""
        return frozenset() if self._tl is None else self._tl.leading

    async def history(self, name: str) -> list[FiringOutcome]:
        """The last outcomes of job `name`, oldest first, read from ZooKeeper.

        Any job under this cron's root may be read, registered here or not;
        an unknown one has no history.  `NodeDataError` if its record is not
        one this code can read.
        """
        name = check_node_name("name", name)
        path = join(self.root, "jobs", name)
        try:
            node = await self.coord.client.get(path)
        except NoNodeError:
            return []
        record = decode(path, node.data)
        return [outcome_of(name, entry, self.timezone) for entry in record.history]

    def outcomes(self) -> AsyncIterator[FiringOutcome]:
        """Your own stream of the outcomes this worker writes, as it writes them.

        Subscribed at the call (before the first ``async for``): each firing
        this worker ran, as it ends (``"ok"`` or ``"failed"``, with its times),
        and each interrupted or missed time it records as a job's leader
        (``"interrupted"``: a firing whose runner, maybe on another worker,
        was cut off; ``"missed"``: `FiringOutcome.count` times given up).
        What `Metrics.watch_cron` counts.  A reader that falls 4096 outcomes
        behind gets `SubscriberLagged`; the stream ends when the cron closes.
        """
        send, receive = self._outcomes.open()
        return self._read_outcomes(send, receive)

    async def _read_outcomes(
        self,
        send: MemoryObjectSendStream[FiringOutcome],
        receive: MemoryObjectReceiveStream[FiringOutcome],
    ) -> AsyncIterator[FiringOutcome]:
        try:
            with receive:
                async for outcome in receive:
                    yield outcome
            self._outcomes.check(send)
        finally:
            self._outcomes.unsubscribe(send)

    def _publish(self, job: str, entry: Entry) -> None:
        self._outcomes.publish(outcome_of(job, entry, self.timezone))

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this worker and start leading its share of the jobs; see the class docs."""
        if self._life.started:
            raise RuntimeError("a Cron can be started only once")
        await self._life.start()

    async def aclose(self) -> None:
        """Stop firing: cancel running firings, leave task leadership; from any task, twice."""
        await self._life.aclose()

    async def _setup(self, tg: anyio.abc.TaskGroup) -> None:
        tl = task_leadership(
            self.coord, self.root, worker=self.worker, tasks=self._jobs, settle=self._settle
        )
        self._tl = tl
        await tl.start()
        for job in self._jobs.values():
            runner = JobRunner(
                job,
                client=self.coord.client,
                path=join(self.root, "jobs", job.name),
                tz=self.timezone,
                tz_name=self._tz_name,
                tl=tl,
                worker=self.worker,
                io_timeout=self.coord.session_timeout,
                on_outcome=self._publish,
            )
            tg.start_soon(runner.serve, self._is_closing, name=f"cron job {job.name}")

    def _is_closing(self) -> bool:
        return self._closing

    async def _stop(self) -> None:
        """Leaving: task leadership cancels the firings, drains them and removes this worker."""
        self._closing = True
        try:
            if self._tl is not None:
                await self._tl.aclose()
        finally:
            self._outcomes.close()

    def __repr__(self) -> str:
        state = self._life.phase.value.lower()
        return (
            f"<Cron {self.root} worker={self.worker.id} jobs={len(self._jobs)} "
            f"leading={len(self.leading)} {state}>"
        )


class CronOptions(TypedDict, total=False):
    """`Cron`'s keyword arguments, as `cron()` forwards them."""

    worker: Required[Worker]
    timezone: str | tzinfo | None
    history: int
    grace: float
    settle: float


def cron(coord: Coordinator, root: str, **options: Unpack[CronOptions]) -> Cron:
    """A `Cron` under `root`: register jobs with ``@c.job(...)``, then ``async with c``.

    Entering blocks until this worker has read the worker list; see `Cron`
    for the arguments.
    """
    return Cron(coord, root, **options)
