"""What the FastAPI lifespan runs: one coordinator, its latches, leader-only tasks, tracked holds.

`Coordination` is framework-free (the FastAPI module only wires it into an
app), so it can be driven and tested as plain anyio code.

Leader tasks: for each ``{path: func}`` entry a `LeaderSelector` on the leader
latch's nodes (``layout="latch"``: one election with the processes that list
the path in `latches`) runs `func` while this process leads (inside the
latch's ``leadership()``), so it is
cancelled the moment leadership is lost (SUSPENDED by default, LOST, the node
deleted) and started again when leadership comes back.  A `func` that returns
keeps the leadership idle until it is lost; a `func` that raises is logged and
started again after a backoff (1 s doubling to 30 s) while still leader: both
happen inside the selector's `lead` (`_leader_tasks.run_while_leader`), which
therefore never returns nor raises.

Cron: a `Cron` given to the coordination starts once the latches are joined
(after its metrics watcher, if any) and stops first when the coordination
does; its jobs and what this process leads show in the status.

Shutting down: `retire()` (called when the server is told to stop, see
`_shutdown`): no leadership is taken from then on (see its docstring).

Tracked holds: `lock` and `once_per` bodies are listed while they run (see
`_holds`), for the status and for health.

Recipes run with the app (`recipes`, `run()`): caches, group memberships,
persistent and TTL nodes, service discovery, job workers, any object with
``status_view()``; entered once the cron runs, left first, each listed in the
status by its own `StatusView` while it runs (`recipes`: one registry, so the
status needs no knowledge of each kind).

Health: a process is *not live* when a body that believes it has a right (a
leader task, a tracked lock) is still running more than `grace` seconds after
the session it got that right on was LOST: its cancellation did not take,
and only a restart ends it.  It is *ready* while the session is CONNECTED or
RECONNECTED.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .._lifecycle import Lifecycle, Service
from .._status_view import Reports
from ..recipes.cas_lock import CasLock, Slot
from ..recipes.cron import Cron
from ..recipes.leader_latch import (
    LeaderLatch,
    LeaderSelector,
    LeadershipTerm,
    default_participant_id,
)
from ..recipes.task_leadership import TaskLeadership
from ..session import Coordinator
from ..zk.states import ConnectionState
from ._holds import Hold, tracked_lock, tracked_once_per
from ._leader_names import LeaderNames
from ._leader_tasks import (
    LeaderFunc,
    LeaderTask,
    check_grace,
    check_leader_tasks,
    run_while_leader,
    wants_term,
)
from ._recipes import R, Runnable, check_recipes
from ._status import status_of

if TYPE_CHECKING:
    from ..metrics import Metrics

__all__ = ("Coordination", "LeaderFunc", "LeaderTask", "check_grace", "check_leader_tasks")

log = logging.getLogger("aiocoord.integrations.fastapi")

_READY = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


class Coordination(Service):
    """A coordinator plus the latches, leader tasks and holds an application runs on it.

    Made and run by `aiocoord.integrations.fastapi.lifespan`; handlers get it
    with the ``coordination`` dependency (or ``request.state.aiocoord``).  Run
    on its own as ``async with coordination.running():`` or ``await
    coordination.start()`` ... ``await coordination.aclose()``; it may be left
    from another task than the one that started it.
    """

    def __init__(
        self,
        coord: Coordinator,
        *,
        leader_tasks: Mapping[str, LeaderFunc] | None = None,
        latches: tuple[str, ...] = (),
        participant_id: str | None = None,
        lose_on_suspend: bool | None = None,
        metrics: Metrics | None = None,
        grace: float = 1.0,
        status_detail: bool = False,
        cron: Cron | None = None,
        recipes: Iterable[Runnable] = (),
    ) -> None:
        self.coord = coord
        self.participant_id = participant_id or default_participant_id()
        self.tasks = {p: LeaderTask(p, f) for p, f in check_leader_tasks(leader_tasks).items()}
        self._paths = list(dict.fromkeys([*self.tasks, *latches]))
        self._lose_on_suspend = lose_on_suspend
        self.metrics = metrics
        self.grace = check_grace(grace)
        self.cron = cron
        """The `Cron` run with the app, if any."""
        self.status_detail = status_detail
        """Whether ``/coordination/status`` shows hosts, session ids, owners, tokens, errors."""
        self._retiring = False
        self._retired = anyio.Event()
        self.latches: dict[str, LeaderLatch] = {}
        self.leaders = LeaderNames(coord)
        """Who leads each latch path, from memory (what `require_leader`'s 503 names)."""
        self.task_leaderships: list[TaskLeadership] = []
        self._to_run = check_recipes(recipes)
        self.recipes: list[Reports] = []
        """The recipes running with the app, each listed in the status by its ``status_view()``."""
        self.transitions: dict[str, int] = {}
        self._lost_at: dict[int, float] = {}  # session id -> when it was seen LOST
        self._holds: list[Hold] = []
        self._stack = AsyncExitStack()  # the latches (and their metrics), left in reverse
        self._life = Lifecycle(
            f"coordination {self.participant_id}", self._run, stopped=self._stack.aclose
        )

    def __repr__(self) -> str:
        state = self.coord.state.value if self.coord.state else "CLOSED"
        leading = sum(1 for latch in self.latches.values() if latch.has_leadership)
        live = "" if self.live else " NOT-LIVE"
        return (
            f"<Coordination {self.participant_id} {state}{live} "
            f"leading={leading}/{len(self.latches)} locks={len(self._holds)}>"
        )

    # --- running ---------------------------------------------------------------------------------

    def running(self) -> Coordination:
        """This `Coordination`, to run as ``async with coordination.running():``."""
        return self

    async def start(self) -> None:
        """Join the latches, start the leader tasks, the cron and the recipes; from any task.

        Blocks until every latch has its node (not until it leads), knows
        who leads (within the request timeout), the cron's worker is
        registered and each recipe is entered.  Raises
        what a latch's start raises, once the latches joined so far are left;
        `CoordinatorClosedError` if started before.
        """
        await self._life.start()

    async def _run(self, tg: anyio.abc.TaskGroup) -> None:
        stack = self._stack
        for path in self._paths:
            task = self.tasks.get(path)
            if task is None:
                latch = LeaderLatch(
                    self.coord,
                    path,
                    participant_id=self.participant_id,
                    lose_on_suspend=self._lose_on_suspend,
                )
                await stack.enter_async_context(latch)
            else:
                selector = LeaderSelector(
                    self.coord,
                    path,
                    self._leader(task),
                    participant_id=self.participant_id,
                    lose_on_suspend=self._lose_on_suspend,
                    layout="latch",  # one election with the `latches` of other processes
                )
                latch = (await stack.enter_async_context(selector)).latch
            self.latches[path] = latch
            if self.metrics is not None:
                await stack.enter_async_context(self.metrics.watch_latch(latch))
        # Ready means every path knows its leader (or leads): a 503 right after startup
        # names it.  Bounded: an election that takes longer is reported as it goes.
        known = {path: anyio.Event() for path in self.latches}
        for path, latch in self.latches.items():
            tg.start_soon(self.leaders.follow, latch, known[path])
        with anyio.move_on_after(self.coord.client.session.timing.request_timeout):
            for event in known.values():
                await event.wait()
        if self.cron is not None:  # left first: its firings end before the latches go
            if self.metrics is not None:
                await stack.enter_async_context(self.metrics.watch_cron(self.cron))
            await stack.enter_async_context(self.cron)
        for recipe in self._to_run:  # left first, in reverse order
            await stack.enter_async_context(self.run(recipe))
        await tg.start(self._follow_session)
        tg.start_soon(self._leave_when_retired)

    # --- shutting down ---------------------------------------------------------------------------

    @property
    def retiring(self) -> bool:
        """Whether `retire()` was called: this process takes no leadership any more."""
        return self._retiring

    def retire(self) -> None:
        """This process is shutting down: take no leadership from now on.

        Synchronous and idempotent (a signal handler may call it).  Latches
        this process does not lead are left at once, so that leadership goes to
        a process that stays rather than to one about to stop; a leader task
        already running runs on until `aclose()`; none is started any more.
        """
        if not self._retiring:
            self._retiring = True
            log.info("%s is shutting down: it takes no leadership from now on", self.participant_id)
        self._retired.set()

    async def _leave_when_retired(self) -> None:
        """Once retired, leave each latch as soon as no leader task of ours runs on it."""
        while True:
            await self._retired.wait()
            self._retired = anyio.Event()
            async with anyio.create_task_group() as tg:
                for path, latch in self.latches.items():
                    task = self.tasks.get(path)
                    if not (task.running if task is not None else latch.has_leadership):
                        tg.start_soon(self._leave, latch)

    async def _leave(self, latch: LeaderLatch) -> None:
        try:
            await latch.aclose()
        except Exception as exc:  # its background task had failed: it is closed all the same
            log.warning("leaving leader latch %s: %s", latch.path, exc)

    async def aclose(self) -> None:
        """Leave the recipes, stop the cron and the leader tasks, then leave the latches.

        From any task; blocks while a job worker among the recipes drains.

        Safe to call twice.
        """
        await self._life.aclose()

    async def _follow_session(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False
        async for event in self.coord.connection_events():
            self.transitions[event.state.value] = self.transitions.get(event.state.value, 0) + 1
            if event.state is ConnectionState.LOST and event.session_id is not None:
                self._lost_at[event.session_id] = time.monotonic()
            if event.state is ConnectionState.RECONNECTED and event.new_session:
                self._mark_old_sessions_lost(event.session_id)
            if self.metrics is not None:
                self.metrics.observe_state(event.state)
            if not started:
                started = True
                task_status.started()
        if not started:
            task_status.started()

    def _mark_old_sessions_lost(self, current: int | None) -> None:
        """A new session means every earlier one is gone, even if its LOST carried no id.

        Only the sessions a task or hold still names are kept: `stuck` asks about no
        other, and no later right is granted on a session gone (one entry per session
        lost would add up over the process's life).
        """
        now = time.monotonic()
        sessions = {t.session for t in self.tasks.values()} | {h.session for h in self._holds}
        for session in sessions:
            if session is not None and session != current:
                self._lost_at.setdefault(session, now)
        for gone in [s for s in self._lost_at if s not in sessions]:
            del self._lost_at[gone]

    def _leader(self, task: LeaderTask) -> Callable[[LeadershipTerm], Awaitable[None]]:
        """The selector's `lead` for `task`."""
        with_term = wants_term(task.func)

        async def lead(term: LeadershipTerm) -> None:
            try:
                await self._lead(task, term, with_term)
            except anyio.get_cancelled_exc_class():
                if term.lost is not None:  # leadership ended (not only the process stopping)
                    task.losses += 1
                    task.last_loss = term.lost
                    log.info("leader task %s stopped: %s", task.path, term.lost)
                raise

        return lead

    async def _lead(self, task: LeaderTask, term: LeadershipTerm, wants_term: bool) -> None:
        """Run `task` while the term lasts: again after a backoff if it fails, idle once it returns."""
        if self._retiring:
            # Elected while shutting down: pass leadership on rather than start the task
            # (leaving the latch ends this term, so the wait below is cancelled).
            log.info("leader task %s not started: this process is shutting down", task.path)
            self._retired.set()
            await anyio.sleep_forever()
        await run_while_leader(task, term, wants_term, self.coord.client.session.session_id)

    # --- tracked holds ----------------------------------------------------------------------------

    @asynccontextmanager
    async def lock(
        self,
        path: str,
        *,
        owner: str | None = None,
        lease: float = 60.0,
        skew: float | None = None,
        blocking: bool = True,
    ) -> AsyncIterator[CasLock]:
        """`aiocoord.cas_lock()` on this coordinator, shown in status and health while held.

        Same behaviour and errors as `CasLock.hold` (`LockNotAcquired` when not
        blocking and held elsewhere, `LockLost` after the body when lost).
        """
        owner = owner or self.participant_id
        async with tracked_lock(
            self.coord,
            self._holds,
            self.metrics,
            path,
            owner=owner,
            lease=lease,
            skew=skew,
            blocking=blocking,
        ) as lock:
            yield lock

    @asynccontextmanager
    async def once_per(
        self, path: str, interval: float, *, lease: float = 60.0, skew: float | None = None
    ) -> AsyncIterator[Slot]:
        """`aiocoord.once_per()` on this coordinator; a running slot shows in status and health."""
        async with tracked_once_per(
            self.coord,
            self._holds,
            path,
            interval,
            owner=self.participant_id,
            lease=lease,
            skew=skew,
        ) as slot:
            yield slot

    @asynccontextmanager
    async def run(self, recipe: R) -> AsyncIterator[R]:
        """Enter `recipe` (not entered yet) and list it in the status while it runs.

        ``async with coordination.run(aiocoord.tree_cache(coord, "/config")) as cache:``.
        Blocks as entering `recipe` does (a cache until read, a job worker
        until registered), and leaving blocks as leaving it does (a job worker
        drains); it is unlisted once left.  Raises what entering `recipe`
        raises; `TypeError` for an object without ``status_view()``.
        """
        check_recipes((recipe,))
        try:
            async with recipe:
                # Listed from entered until left: a draining worker shows DRAINING.
                self.recipes.append(recipe)
                yield recipe
        finally:
            if recipe in self.recipes:
                self.recipes.remove(recipe)

    @asynccontextmanager
    async def task_leadership(self, tl: TaskLeadership) -> AsyncIterator[TaskLeadership]:
        """Enter `tl` (made with ``aiocoord.task_leadership(coord, ...)``) and show it in status."""
        async with tl:
            self.task_leaderships.append(tl)
            try:
                yield tl
            finally:
                self.task_leaderships.remove(tl)

    # --- health and status ------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Whether the session can be used now (CONNECTED or RECONNECTED)."""
        return self.coord.state in _READY

    def stuck(self) -> list[str]:
        """Bodies still running more than `grace` s after the session they hold a right on was lost."""
        now = time.monotonic()
        out: list[str] = []
        for task in self.tasks.values():
            lost = self._lost_at.get(task.session or -1)
            if task.running and lost is not None and now - lost > self.grace:
                out.append(f"leader task {task.path}")
        for hold in self._holds:
            lost = self._lost_at.get(hold.session or -1)
            if lost is not None and now - lost > self.grace:
                out.append(f"lock {hold.path}")
        return out

    @property
    def live(self) -> bool:
        return not self.stuck()

    def health(self) -> dict[str, Any]:
        """Liveness and readiness, from memory (no request); the session id with `status_detail`."""
        stuck = self.stuck()
        sid = self.coord.client.session.session_id
        out: dict[str, Any] = {
            "live": not stuck,
            "ready": self.ready,
            "state": self.coord.state.value if self.coord.state else "CLOSED",
            "stuck": stuck,
        }
        if self.status_detail:
            out["session"] = f"0x{sid:x}" if sid else None
        return out

    async def status(self, timeout: float = 0.08, *, detail: bool | None = None) -> dict[str, Any]:
        """Session, latches (leader, participants, task), held locks, task leadership.

        What this process knows comes from memory; the ZooKeeper reads
        (participants, leaders) run together within `timeout` in all, and only
        while connected: an entry that could not be read says why under
        ``"error"``, nothing is raised.  `detail` (default `status_detail`)
        adds hosts, session id, lock owners and tokens, worker ids and error
        texts.
        """
        return await status_of(self, timeout, self.status_detail if detail is None else detail)

    @property
    def holds(self) -> list[Hold]:
        """The tracked lock and once_per bodies running now."""
        return list(self._holds)
