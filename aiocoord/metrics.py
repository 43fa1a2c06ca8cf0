"""Optional Prometheus metrics for aiocoord (extra ``metrics``: ``pip install aiocoord[metrics]``).

Nothing is measured unless you make a `Metrics` and hand it what to watch::

    from aiocoord.metrics import Metrics

    metrics = Metrics()                      # registers on prometheus_client's default registry
    async with aiocoord.connect() as coord, metrics.watch_session(coord):
        async with leader_latch(coord, "/app/leader") as latch, metrics.watch_latch(latch):
            ...
        async with metrics.lock(coord, "/locks/report", lease=30):   # a cas_lock, measured
            ...
        async with metrics.watch_cron(cron), cron:                   # a Cron's firings
            ...

The FastAPI integration takes one too: ``lifespan(..., metrics=Metrics())``
(with ``cron=``, the cron is measured as well).
Expose them as usual with prometheus_client (``make_asgi_app()``,
``start_http_server()``).

Metric names follow Prometheus conventions (counters end in ``_total``, times
are in seconds):

========================================== ========= ==========================================
``aiocoord_session_state``                 gauge     1 for the current state (label ``state``)
``aiocoord_session_transitions_total``     counter   connection-state transitions (``state``)
``aiocoord_leader``                        gauge     1 while this process leads (``path``)
``aiocoord_leadership_transitions_total``  counter   ``path``, ``transition`` = elected|lost
``aiocoord_lock_acquire_total``            counter   ``path``, ``result`` = acquired|busy|error
``aiocoord_lock_held_seconds``             histogram how long each hold lasted (``path``)
``aiocoord_jobs_total``                    counter   ``job`` (the job's name), ``outcome`` = done|failed
``aiocoord_job_duration_seconds``          histogram a job handler's run time (``job``)
``aiocoord_cron_firings_total``            counter   ``path``, ``job``, ``outcome`` = ok|failed|interrupted
``aiocoord_cron_missed_total``             counter   scheduled times given up (``path``, ``job``)
``aiocoord_cron_firing_duration_seconds``  histogram a firing's run time, ok or failed (``path``, ``job``)
========================================== ========= ==========================================

Label values are paths and job names, so keep them few (one per recipe, not
one per request).
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import anyio
import anyio.abc

from ._lifecycle import Lifecycle, Service
from .errors import LockNotAcquired, SubscriberLagged
from .recipes.cas_lock import CasLock
from .recipes.leader_latch import ElectionState
from .session import Coordinator
from .zk.states import ConnectionState

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from .recipes.cron import Cron, FiringOutcome
    from .recipes.leader_latch import LeaderLatch

__all__ = ("Metrics", "Watcher")

P = ParamSpec("P")
R = TypeVar("R")

_STATES = [s.value for s in ConnectionState]
_FIRING_OUTCOMES = ("ok", "failed", "interrupted")


class Watcher(Service):
    """What `Metrics.watch_session`, `watch_latch` and `watch_cron` return: it measures while open.

    Use it as ``async with`` (entering returns the watcher), or ``await w.start()``
    ... ``await w.aclose()``; it may be left from another task than the one
    that entered it.
    """

    def __init__(
        self,
        name: str,
        run: Callable[[anyio.abc.TaskGroup], Awaitable[None]],
        *,
        stopped: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._life = Lifecycle(name, run, stopped=stopped)

    async def start(self) -> None:
        """Start measuring (returns at once: the first state is recorded first)."""
        await self._life.start()

    async def aclose(self) -> None:
        """Stop measuring; from any task.  Safe to call twice."""
        await self._life.aclose()

    def __repr__(self) -> str:
        return f"<Watcher {self._life.name} {self._life.phase.value}>"


class Metrics:
    """The aiocoord metrics, registered on `registry` (prometheus_client's default if None).

    Raises `ImportError` with an install hint when prometheus_client is missing.
    Make one per registry: registering the same names twice is an error in
    prometheus_client.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        try:
            import prometheus_client as prom
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "aiocoord.metrics needs prometheus_client: pip install 'aiocoord[metrics]'"
            ) from exc
        reg = registry if registry is not None else prom.REGISTRY
        self.registry = reg
        self.session_state = prom.Gauge(
            "aiocoord_session_state",
            "1 for the current ZooKeeper connection state, 0 for the others",
            ["state"],
            registry=reg,
        )
        self.session_transitions = prom.Counter(
            "aiocoord_session_transitions",
            "ZooKeeper connection-state transitions",
            ["state"],
            registry=reg,
        )
        self.leader = prom.Gauge(
            "aiocoord_leader", "1 while this process leads the latch", ["path"], registry=reg
        )
        self.leadership_transitions = prom.Counter(
            "aiocoord_leadership_transitions",
            "Leadership gained (elected) and lost",
            ["path", "transition"],
            registry=reg,
        )
        self.lock_acquire = prom.Counter(
            "aiocoord_lock_acquire",
            "CAS lock acquisition attempts by result",
            ["path", "result"],
            registry=reg,
        )
        self.lock_held = prom.Histogram(
            "aiocoord_lock_held_seconds",
            "How long a CAS lock was held",
            ["path"],
            registry=reg,
        )
        self.jobs = prom.Counter(
            "aiocoord_jobs", "Jobs run by outcome", ["job", "outcome"], registry=reg
        )
        self.job_duration = prom.Histogram(
            "aiocoord_job_duration_seconds", "Job handler run time", ["job"], registry=reg
        )
        self.cron_firings = prom.Counter(
            "aiocoord_cron_firings",
            "Cron firings by outcome: ended here (ok, failed), or found interrupted",
            ["path", "job", "outcome"],
            registry=reg,
        )
        self.cron_missed = prom.Counter(
            "aiocoord_cron_missed",
            "Scheduled cron times given up as missed",
            ["path", "job"],
            registry=reg,
        )
        self.cron_duration = prom.Histogram(
            "aiocoord_cron_firing_duration_seconds",
            "How long a cron firing ran (ok or failed)",
            ["path", "job"],
            registry=reg,
        )

    def __repr__(self) -> str:
        return f"<Metrics registry={type(self.registry).__name__}>"

    # --- observations (plain calls, for code that measures itself) -------------------------------

    def observe_state(self, state: ConnectionState) -> None:
        """Record a connection-state transition."""
        for name in _STATES:
            self.session_state.labels(state=name).set(1 if name == state.value else 0)
        self.session_transitions.labels(state=state.value).inc()

    def observe_leadership(self, path: str, leading: bool) -> None:
        """Record that this process started (True) or stopped (False) leading `path`."""
        self.leader.labels(path=path).set(1 if leading else 0)
        transition = "elected" if leading else "lost"
        self.leadership_transitions.labels(path=path, transition=transition).inc()

    def observe_lock(self, path: str, result: str, held: float | None = None) -> None:
        """Record an acquisition `result` (acquired, busy, error) and, once released, the hold time."""
        if result not in ("acquired", "busy", "error"):
            raise ValueError(f"result must be 'acquired', 'busy' or 'error', not {result!r}")
        self.lock_acquire.labels(path=path, result=result).inc()
        if held is not None:
            self.lock_held.labels(path=path).observe(held)

    def observe_job(self, job: str, outcome: str, seconds: float) -> None:
        """Record one job run: `outcome` is 'done' or 'failed'."""
        if outcome not in ("done", "failed"):
            raise ValueError(f"outcome must be 'done' or 'failed', not {outcome!r}")
        self.jobs.labels(job=job, outcome=outcome).inc()
        self.job_duration.labels(job=job).observe(seconds)

    def observe_firing(self, path: str, outcome: FiringOutcome) -> None:
        """Record one outcome of a job of the cron rooted at `path` (see `Cron.outcomes`).

        ``"missed"`` adds its `count` to the missed times; the others count one
        firing by status, and an ended one (ok, failed) its duration.
        """
        if outcome.status == "missed":
            self.cron_missed.labels(path=path, job=outcome.job).inc(outcome.count)
            return
        if outcome.status not in _FIRING_OUTCOMES:
            raise ValueError(f"not a firing's outcome: {outcome.status!r}")
        self.cron_firings.labels(path=path, job=outcome.job, outcome=outcome.status).inc()
        duration = outcome.duration
        if duration is not None and outcome.status != "interrupted":
            self.cron_duration.labels(path=path, job=outcome.job).observe(max(0.0, duration))

    # --- watchers ---------------------------------------------------------------------------------

    def watch_session(self, coord: Coordinator) -> Watcher:
        """Measure `coord`'s connection states while the block runs (a `Watcher`)."""

        async def run(tg: anyio.abc.TaskGroup) -> None:
            await tg.start(self._follow_session, coord)

        return Watcher(f"metrics of {coord.settings.hosts}", run)

    async def _follow_session(
        self, coord: Coordinator, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        started = False
        async for event in coord.connection_events():
            self.observe_state(event.state)
            if not started:
                started = True
                task_status.started()
        if not started:
            task_status.started()

    def watch_latch(self, latch: LeaderLatch) -> Watcher:
        """Measure an entered latch's leadership while the block runs (a `Watcher`)."""

        async def run(tg: anyio.abc.TaskGroup) -> None:
            self.leader.labels(path=latch.path).set(1 if latch.has_leadership else 0)
            tg.start_soon(self._follow_latch, latch)

        async def stopped() -> None:
            self.leader.labels(path=latch.path).set(0)

        return Watcher(f"metrics of leader latch {latch.path}", run, stopped=stopped)

    async def _follow_latch(self, latch: LeaderLatch) -> None:
        async for event in latch.changes():
            if event.state is ElectionState.ELECTED:
                self.observe_leadership(latch.path, True)
            elif event.state is ElectionState.LOST_LEADERSHIP:
                self.observe_leadership(latch.path, False)

    def watch_cron(self, cron: Cron) -> Watcher:
        """Measure a `Cron`'s firings, misses and durations while the block runs (a `Watcher`).

        Enter it before or after the cron: it counts what this worker records
        from then on (`Cron.outcomes`), labelled with the cron's root.
        """

        async def run(tg: anyio.abc.TaskGroup) -> None:
            tg.start_soon(self._follow_cron, cron, cron.outcomes())

        return Watcher(f"metrics of cron {cron.root}", run)

    async def _follow_cron(self, cron: Cron, outcomes: AsyncIterator[FiringOutcome]) -> None:
        while True:
            try:
                async for outcome in outcomes:
                    self.observe_firing(cron.root, outcome)
                return  # the cron closed
            except SubscriberLagged:
                pass  # fell behind (a stalled loop): count on from now
            finally:
                aclose: Callable[[], Awaitable[None]] | None = getattr(outcomes, "aclose", None)
                if aclose is not None:
                    with anyio.CancelScope(shield=True):
                        await aclose()
            outcomes = cron.outcomes()

    @asynccontextmanager
    async def lock(
        self,
        coord: Coordinator,
        path: str,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
        blocking: bool = True,
    ) -> AsyncIterator[CasLock]:
        """`aiocoord.cas_lock()`, with its acquisition result and hold time measured."""
        lock = CasLock(coord, path, owner=owner, lease=lease, skew=skew)
        held_since: float | None = None
        try:
            async with lock.hold(blocking=blocking):
                held_since = time.monotonic()
                self.observe_lock(path, "acquired")
                yield lock
        except LockNotAcquired:
            self.observe_lock(path, "busy")
            raise
        except Exception:
            if held_since is None:
                self.observe_lock(path, "error")
            raise
        finally:
            if held_since is not None:
                self.lock_held.labels(path=path).observe(time.monotonic() - held_since)

    def job(self, name: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
        """Decorate an async job handler so that each run is counted and timed as `name`."""

        def decorate(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
            @functools.wraps(func)
            async def measured(*args: P.args, **kwargs: P.kwargs) -> R:
                started = time.monotonic()
                try:
                    result = await func(*args, **kwargs)
                except BaseException:
                    self.observe_job(name, "failed", time.monotonic() - started)
                    raise
                self.observe_job(name, "done", time.monotonic() - started)
                return result

            return measured

        return decorate
