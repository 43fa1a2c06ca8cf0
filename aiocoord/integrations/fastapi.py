"""FastAPI integration: a lifespan that runs the coordinator, leader-only tasks, and a health router.

Install with the ``fastapi`` extra (``pip install 'aiocoord[fastapi]'``)::

    from aiocoord.integrations.fastapi import coordinator, lifespan, require_leader, router

    async def run_cron() -> None:            # runs only while this process leads the path
        while True:
            await rebuild_reports()
            await anyio.sleep(60)

    app = FastAPI(lifespan=lifespan(settings, leader_tasks={"/app/cron-leader": run_cron}))
    app.include_router(router)               # GET /coordination/health, GET /coordination/status

    @app.post("/admin/rebuild", dependencies=[Depends(require_leader("/app/cron-leader"))])
    async def rebuild(coord: aiocoord.Coordinator = Depends(coordinator)) -> dict[str, str]: ...

`lifespan(...)` connects on startup (startup fails, and the server with it,
if no session is established within the connect timeout) and closes the
session on shutdown.  It wraps the application's own lifespan
(``app_lifespan=``), which runs inside it: connected on entry, still
connected on exit.  The lifespan may be left from another task than the one
that entered it (a test fixture's teardown, say), as long as the app's own
lifespan allows it.  Each ``leader_tasks`` entry joins a leader latch on its
path with participant id ``<host>-<pid>`` (so ``uvicorn --workers N`` gives N
participants and the task runs once across all workers and pods) and runs the
coroutine function only while this process leads: cancelled when leadership
is lost (SUSPENDED by default, LOST), started again when it is regained.  The
function takes no argument, or one: the `LeadershipTerm` (``term.token`` is
the fencing token).

Routes (``router``):

- ``GET /coordination/health`` and ``/coordination/health/live``: 200, or 503
  when this process still runs a leader task or a tracked lock body although
  the session it got that right on was LOST (its cancellation did not take:
  restart the process);
- ``GET /coordination/health/ready``: 200 while the session is CONNECTED or
  RECONNECTED, 503 while SUSPENDED, LOST (until the next session) or READ_ONLY;
- ``GET /coordination/status``: session, each latch's leader and participant
  count, leader tasks, held locks, task leadership, the cron's jobs, and each
  recipe run with the app (``recipes``: its ``status_view()``); within about 100 ms
  whatever the connection state (what could not be read says so).  Redacted
  unless ``status_detail=True``: no hosts, session id, lock owners or tokens,
  worker ids or exception texts.

With ``cron=`` (an `aiocoord.Cron` made on ``aiocoord.connect(...)``, not
entered), the lifespan connects the cron's coordinator, starts the cron once
connected (this process then fires its share of the jobs) and stops it on
shutdown, before the latches are left and the session closed::

    coord = aiocoord.connect()               # connected by the lifespan
    cron = aiocoord.Cron(coord, "/app/cron", worker=aiocoord.Worker(version="2.5.0"))

    @cron.job("0 */6 * * *")
    async def revenue_query(firing: aiocoord.Firing) -> None: ...

    app = FastAPI(lifespan=lifespan(cron=cron))

With ``recipes=[...]`` (recipes made on the app's coordinator, not entered:
``aiocoord.tree_cache(coord, ...)``, ``aiocoord.group_member(...)``,
``sched.worker(capacity=8, participant_id=...)``), the lifespan enters them
once the cron runs, lists each in the status and leaves them first on
shutdown (a job worker drains)::

    coord = aiocoord.connect()
    sched = aiocoord.Scheduler(coord, "/app/jobs")
    app = FastAPI(lifespan=lifespan(coord, participant_id="pod-1",
                                    recipes=[sched.worker(capacity=8, participant_id="pod-1")]))

`jobs_router(sched)` (from `aiocoord.integrations.jobs`) serves a job
scheduler over HTTP: submit with a typed body per job, status, long-poll
result, cancel, listing; give the lifespan the scheduler's coordinator
(``lifespan(coord)``).

`require_leader(path)` answers 503 at once, from what this process knows
(no request), naming the leader when known without a round trip, when this
process does not lead `path` (which must be one of the lifespan's
``leader_tasks`` or ``latches``: startup fails otherwise); otherwise the
dependency's value is the `LeadershipTerm`.  A process told to stop
(SIGTERM, SIGINT) takes no more leadership (``retire_on_signal``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from .._checks import check_root
from .._status_view import StatusView as StatusView
from ..errors import ConfigError
from ..recipes.cron import Cron
from ..recipes.leader_latch import LeadershipTerm, check_participant_id
from ..recipes.membership import ServiceInstance, service_discovery
from ..session import Coordinator, connect
from ..settings import Settings
from ..zk.paths import validate_path
from ._coordination import Coordination, LeaderFunc, check_grace, check_leader_tasks
from ._recipes import Runnable, check_recipes
from ._shutdown import retire_on_signals
from .jobs import jobs_router as jobs_router

if TYPE_CHECKING:
    from ..metrics import Metrics

__all__ = (
    "Coordination",
    "StatusView",
    "coordination",
    "coordinator",
    "jobs_router",
    "lifespan",
    "require_leader",
    "router",
)

STATE_KEY = "aiocoord"
RETRY_AFTER = "1"  # seconds: a hand-over takes about a round trip, an election a session timeout

log = logging.getLogger("aiocoord.integrations.fastapi")

AppLifespan = Callable[[FastAPI], AbstractAsyncContextManager[Mapping[str, Any] | None]]


def lifespan(
    settings: Settings | str | Coordinator | None = None,
    /,
    *,
    leader_tasks: Mapping[str, LeaderFunc] | None = None,
    latches: Iterable[str] = (),
    participant_id: str | None = None,
    lose_on_suspend: bool | None = None,
    app_lifespan: AppLifespan | None = None,
    metrics: Metrics | None = None,
    liveness_grace: float = 1.0,
    status_detail: bool = False,
    retire_on_signal: bool = True,
    cron: Cron | None = None,
    register: ServiceInstance | None = None,
    discovery_base: str = "/services",
    recipes: Iterable[Runnable] = (),
    **overrides: Any,
) -> Callable[[FastAPI], AbstractAsyncContextManager[dict[str, Any]]]:
    """A FastAPI ``lifespan=`` that runs a coordinator for the application's lifetime.

    `settings` and `overrides` are those of `aiocoord.connect` (nothing: the
    ``AIOCOORD_*`` environment), validated here, so a bad value fails when the
    app is built (`ConfigError` naming the field).  `settings` may instead be
    a `Coordinator` not entered yet (``coord = aiocoord.connect(...)``), which
    the lifespan connects and closes: what was built on it before the app
    started (a `Scheduler` for `jobs_router`) then runs on the app's session.
    A coordinator runs once: such a lifespan cannot start a second time.  `leader_tasks` maps latch
    paths to coroutine functions run only while leading; `latches` are extra
    paths to join without a task (for `require_leader`).  `participant_id`
    defaults to ``<host>-<pid>``.  `lose_on_suspend` as the latch's (not
    given: leadership kept through SUSPENDED while the session provably lives;
    ``True``: lost at SUSPENDED; ``False``: kept until LOST).  `app_lifespan` is the app's own lifespan,
    run inside this one; the state it yields is merged with ours.  `metrics`
    (`aiocoord.metrics.Metrics`) measures the session, the latches and the
    tracked locks.  `liveness_grace` is how long (s) a body may outlive its
    lost session before ``/coordination/health`` reports the process not live
    (a finite number >= 0).  `status_detail=True` lets ``/coordination/status``
    show hosts, the session id, lock owners and tokens, worker ids and error
    texts (redacted by default: serve it behind authentication).
    `retire_on_signal`: when the server is told to stop (SIGTERM, SIGINT),
    this process takes no more leadership (`Coordination.retire`), so that
    leadership goes to a process that stays; see `_shutdown`.  `cron`: an
    `aiocoord.Cron` to run with the app: its coordinator (made with
    ``aiocoord.connect(...)``) is the app's, so `settings` and `overrides`
    are refused with it (`ConfigError`); the lifespan connects it (or uses
    it as it is, if already connected: its owner then closes it), starts the
    cron once connected and stops it first on shutdown.  A `Cron` runs once:
    such an app's lifespan runs once.  `register`: an
    `aiocoord.ServiceInstance` registered under `discovery_base` (curator-x-
    discovery's layout, see `aiocoord.service_discovery`) once the app's own
    lifespan has started, for as long as the app serves, and unregistered
    first on shutdown; it comes back by itself after a lost session; the
    status lists it.  `recipes`: recipe objects made on the app's coordinator
    (so `settings` is that `Coordinator`) and not entered yet (a cache, a
    group membership, a persistent or TTL node, service discovery, a job
    worker: anything with ``status_view()``), entered once the cron runs and
    left first on shutdown (in reverse order; a job worker drains), each
    listed under ``"recipes"`` in ``/coordination/status``; a recipe runs
    once, so such a lifespan runs once.  A job worker keeps the id it was
    made with: give it the app's (``sched.worker(participant_id=...)``).
    `TypeError` naming the entry for an object that is not a recipe,
    `ConfigError` naming `recipes` when `settings` is not a `Coordinator`.

    At startup, before connecting, every route that depends on
    `require_leader(path)` is checked: a `path` this lifespan does not run
    fails the startup with `ConfigError`.

    The lifespan state holds the `Coordination` under ``"aiocoord"``
    (``request.state.aiocoord``); ``app.state.aiocoord`` too, for the app's own
    lifespan.
    """
    if cron is not None and not isinstance(cron, Cron):
        raise TypeError(f"cron must be an aiocoord.Cron, not {type(cron).__name__}")
    given, plain = (settings, None) if isinstance(settings, Coordinator) else (None, settings)
    if overrides and given is not None:
        raise TypeError(
            f"lifespan(coord): settings overrides {sorted(overrides)} apply only when the "
            "lifespan makes its own coordinator; pass them to aiocoord.connect()"
        )
    if cron is not None:
        if given is not None and given is not cron.coord:
            raise ConfigError(
                "cron", "the cron runs on another coordinator than the one given to lifespan()"
            )
        if (settings is not None and given is None) or overrides:
            raise ConfigError(
                "cron",
                "the cron's coordinator is the app's: give the settings to the aiocoord.connect() "
                "that made it, not to lifespan()",
            )
        given = cron.coord
    built = given.settings if given is not None else Settings.build(plain, **overrides)
    tasks = check_leader_tasks(leader_tasks)
    if isinstance(latches, str):
        raise TypeError("latches must be an iterable of paths, not a single string")
    extra = tuple(validate_path(p) for p in latches)
    pid = check_participant_id(participant_id) if participant_id is not None else None
    if lose_on_suspend is not None and not isinstance(lose_on_suspend, bool):
        raise TypeError(
            f"lose_on_suspend must be None or a bool, not {type(lose_on_suspend).__name__}"
        )
    if app_lifespan is not None and not callable(app_lifespan):
        raise TypeError(f"app_lifespan must be a lifespan function, not {app_lifespan!r}")
    grace = check_grace(liveness_grace)
    for name, flag in (("status_detail", status_detail), ("retire_on_signal", retire_on_signal)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
    run_paths = {*tasks, *extra}
    if register is not None and not isinstance(register, ServiceInstance):
        raise TypeError(
            f"register must be an aiocoord.ServiceInstance, not {type(register).__name__}"
        )
    base = check_root(discovery_base, "discovery_base")
    to_run = check_recipes(recipes)
    if to_run and given is None:
        raise ConfigError(
            "recipes",
            "recipes are made on the app's coordinator: pass it as lifespan(coord), "
            "with coord = aiocoord.connect(...)",
        )

    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        check_leader_routes(app, run_paths)
        if status_detail:
            log.warning(
                "status_detail=True: /coordination/status shows ZooKeeper hosts, the session id, "
                "lock owners and tokens and error texts; serve it behind authentication"
            )
        async with _connected(built, given) as coord:
            coord_state = Coordination(
                coord,
                leader_tasks=tasks,
                latches=extra,
                participant_id=pid,
                lose_on_suspend=lose_on_suspend,
                metrics=metrics,
                grace=grace,
                status_detail=status_detail,
                cron=cron,
                recipes=to_run,
            )
            retiring = retire_on_signals(coord_state) if retire_on_signal else nullcontext()
            async with _watched(coord_state), coord_state.running():
                app.state.aiocoord = coord_state
                state: dict[str, Any] = {STATE_KEY: coord_state}
                try:
                    with retiring:
                        if app_lifespan is None:
                            async with _registered(coord_state, register, base):
                                yield state
                        else:
                            async with (
                                app_lifespan(app) as inner,
                                _registered(coord_state, register, base),
                            ):
                                yield {**dict(inner or {}), **state}
                finally:
                    app.state.aiocoord = None

    return run


@asynccontextmanager
async def _connected(settings: Settings, given: Coordinator | None) -> AsyncIterator[Coordinator]:
    """The app's coordinator: a new one, or the given one (connected here unless it is already)."""
    if given is None:
        async with connect(settings) as coord:
            yield coord
    elif given.state is None or given.closed:
        async with given as coord:  # a closed one refuses: a coordinator runs once
            yield coord
    else:
        yield given  # entered by its owner, who closes it


@asynccontextmanager
async def _registered(
    coordination: Coordination, instance: ServiceInstance | None, base: str
) -> AsyncIterator[None]:
    """`instance` registered under `base` while the app serves (nothing if None); in the status."""
    if instance is None:
        yield
        return
    async with coordination.run(service_discovery(coordination.coord, base)) as discovery:
        await discovery.register(instance)
        yield  # leaving unregisters


@asynccontextmanager
async def _watched(coordination: Coordination) -> AsyncIterator[None]:
    if coordination.metrics is None:
        yield
        return
    async with coordination.metrics.watch_session(coordination.coord):
        yield


# --- dependencies -----------------------------------------------------------------------------


def coordination(request: Request) -> Coordination:
    """Dependency: the app's `Coordination` (raises `RuntimeError` without our lifespan)."""
    found = getattr(request.state, STATE_KEY, None)
    if found is None:
        found = getattr(request.app.state, STATE_KEY, None)
    if not isinstance(found, Coordination):
        raise RuntimeError(
            "no aiocoord coordinator: build the app with "
            "FastAPI(lifespan=aiocoord.integrations.fastapi.lifespan(...))"
        )
    return found


def coordinator(request: Request) -> Coordinator:
    """Dependency: the app's connected `aiocoord.Coordinator`."""
    return coordination(request).coord


class _LeaderOnly:
    """The dependency `require_leader(path)` returns; the lifespan finds it by its type."""

    def __init__(self, path: str) -> None:
        self.path = path

    async def __call__(self, request: Request) -> LeadershipTerm:
        path = self.path
        c = coordination(request)
        latch = c.latches.get(path)
        if latch is None:
            raise RuntimeError(
                f"require_leader({path!r}): this app does not take part in {path}; "
                "add it to lifespan(leader_tasks=...) or lifespan(latches=[...])"
            )
        if latch.has_leadership:
            return await latch.wait()  # returns at once: we lead
        # Local state only, no request: a 503 must come at once, even while ZooKeeper is away.
        raise HTTPException(
            status_code=503,
            detail={"error": "not the leader", "path": path, "leader": c.leaders.leader(path)},
            headers={"Retry-After": RETRY_AFTER},
        )

    def __repr__(self) -> str:
        return f"require_leader({self.path!r})"


def require_leader(path: str) -> Callable[[Request], Any]:
    """Dependency factory: pass only while this process leads `path`, else 503 at once.

    Answered from what this process knows, with no request to ZooKeeper, so
    it is as fast during an outage as otherwise.  The 503's detail names the
    path and the leader's id (known from memory while connected: the
    lifespan reports ready once each path knows it; None while the session is
    away or the election is still going on), with ``Retry-After: 1``.  The
    dependency's value is the `LeadershipTerm`.  `path` must be one of the
    lifespan's ``leader_tasks`` or ``latches``: the lifespan refuses to start
    otherwise.
    """
    return _LeaderOnly(validate_path(path))


def check_leader_routes(app: FastAPI, run_paths: Iterable[str]) -> None:
    """Raise `ConfigError` for a route that requires leading a path the lifespan does not run."""
    known = set(run_paths)
    for where, dependency in _route_dependencies(app.router.routes, ""):
        if isinstance(dependency, _LeaderOnly) and dependency.path not in known:
            raise ConfigError(
                "require_leader",
                f"{dependency.path!r} (on {where}) is not run by this app's lifespan: "
                "add it to lifespan(leader_tasks=...) or lifespan(latches=[...])",
            )


def _route_dependencies(routes: Iterable[Any], prefix: str) -> Iterable[tuple[str, object]]:
    """(route, dependency callable) for every dependency of every route, nested ones included."""
    for route in routes:
        dependant = getattr(route, "dependant", None)
        if dependant is not None:
            methods = ",".join(sorted(getattr(route, "methods", None) or ())) or "route"
            where = f"{methods} {prefix}{route.path}"
            stack = list(dependant.dependencies)
            while stack:
                sub = stack.pop()
                yield where, sub.call
                stack.extend(sub.dependencies)
        nested = getattr(route, "routes", None)
        if nested is not None and dependant is None:  # a Mount or a router of routes
            yield from _route_dependencies(nested, prefix + getattr(route, "path", ""))


# --- routes ------------------------------------------------------------------------------------

router = APIRouter(prefix="/coordination", tags=["coordination"])


def _health(request: Request, ok: Callable[[Coordination], bool]) -> JSONResponse:
    c = coordination(request)
    return JSONResponse(c.health(), status_code=200 if ok(c) else 503)


@router.get("/health", summary="Liveness: 503 only when a body outlived its lost session")
async def health(request: Request) -> JSONResponse:
    return _health(request, lambda c: c.live)


@router.get("/health/live", summary="Liveness (same as /coordination/health)")
async def health_live(request: Request) -> JSONResponse:
    return _health(request, lambda c: c.live)


@router.get("/health/ready", summary="Readiness: 200 while the session is usable")
async def health_ready(request: Request) -> JSONResponse:
    return _health(request, lambda c: c.ready)


@router.get("/status", summary="Session, latches, leader tasks, held locks, task leadership")
async def status(request: Request) -> dict[str, Any]:
    return await coordination(request).status()
