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
- ``GET /coordination/status``: session, each latch's leader and participants,
  leader tasks, held locks with their tokens, task leadership.

`require_leader(path)` answers 503 with the current leader's id when this
process does not lead `path` (which must be one of the lifespan's
``leader_tasks`` or ``latches``); otherwise the dependency's value is the
`LeadershipTerm`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from ..errors import CoordError
from ..recipes.leader_latch import LeadershipTerm, check_participant_id
from ..session import Coordinator, connect
from ..settings import Settings
from ..zk.paths import validate_path
from ._coordination import Coordination, LeaderFunc, check_leader_tasks

if TYPE_CHECKING:
    from ..metrics import Metrics

__all__ = (
    "Coordination",
    "coordination",
    "coordinator",
    "lifespan",
    "require_leader",
    "router",
)

STATE_KEY = "aiocoord"

AppLifespan = Callable[[FastAPI], AbstractAsyncContextManager[Mapping[str, Any] | None]]


def lifespan(
    settings: Settings | str | None = None,
    /,
    *,
    leader_tasks: Mapping[str, LeaderFunc] | None = None,
    latches: Iterable[str] = (),
    participant_id: str | None = None,
    lose_on_suspend: bool = True,
    app_lifespan: AppLifespan | None = None,
    metrics: Metrics | None = None,
    liveness_grace: float = 1.0,
    **overrides: Any,
) -> Callable[[FastAPI], AbstractAsyncContextManager[dict[str, Any]]]:
    """A FastAPI ``lifespan=`` that runs a coordinator for the application's lifetime.

    `settings` and `overrides` are those of `aiocoord.connect` (nothing: the
    ``AIOCOORD_*`` environment), validated here, so a bad value fails when the
    app is built (`ConfigError` naming the field).  `leader_tasks` maps latch
    paths to coroutine functions run only while leading; `latches` are extra
    paths to join without a task (for `require_leader`).  `participant_id`
    defaults to ``<host>-<pid>``.  `lose_on_suspend=False` keeps leadership
    through SUSPENDED until LOST.  `app_lifespan` is the app's own lifespan,
    run inside this one; the state it yields is merged with ours.  `metrics`
    (`aiocoord.metrics.Metrics`) measures the session, the latches and the
    tracked locks.  `liveness_grace` is how long (s) a body may outlive its
    lost session before ``/coordination/health`` reports the process not live.

    The lifespan state holds the `Coordination` under ``"aiocoord"``
    (``request.state.aiocoord``); ``app.state.aiocoord`` too, for the app's own
    lifespan.
    """
    built = Settings.build(settings, **overrides)
    tasks = check_leader_tasks(leader_tasks)
    if isinstance(latches, str):
        raise TypeError("latches must be an iterable of paths, not a single string")
    extra = tuple(validate_path(p) for p in latches)
    pid = check_participant_id(participant_id) if participant_id is not None else None
    if not isinstance(lose_on_suspend, bool):
        raise TypeError(f"lose_on_suspend must be a bool, not {type(lose_on_suspend).__name__}")
    if app_lifespan is not None and not callable(app_lifespan):
        raise TypeError(f"app_lifespan must be a lifespan function, not {app_lifespan!r}")
    if isinstance(liveness_grace, bool) or not isinstance(liveness_grace, int | float):
        raise TypeError("liveness_grace must be a number of seconds")
    if liveness_grace < 0:
        raise ValueError("liveness_grace must be >= 0")

    @asynccontextmanager
    async def run(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with connect(built) as coord:
            coord_state = Coordination(
                coord,
                leader_tasks=tasks,
                latches=extra,
                participant_id=pid,
                lose_on_suspend=lose_on_suspend,
                metrics=metrics,
                grace=float(liveness_grace),
            )
            async with _watched(coord_state), coord_state.running():
                app.state.aiocoord = coord_state
                state: dict[str, Any] = {STATE_KEY: coord_state}
                try:
                    if app_lifespan is None:
                        yield state
                    else:
                        async with app_lifespan(app) as inner:
                            yield {**dict(inner or {}), **state}
                finally:
                    app.state.aiocoord = None

    return run


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


def require_leader(path: str) -> Callable[[Request], Any]:
    """Dependency factory: pass only while this process leads `path`, else 503.

    The 503's detail names the path and the current leader's id (None when
    there is none, or ZooKeeper cannot be asked right now), with
    ``Retry-After: 1``.  The dependency's value is the `LeadershipTerm`.
    """
    validate_path(path)

    async def leader_only(request: Request) -> LeadershipTerm:
        latch = coordination(request).latches.get(path)
        if latch is None:
            raise RuntimeError(
                f"require_leader({path!r}): this app does not take part in {path}; "
                "add it to lifespan(leader_tasks=...) or lifespan(latches=[...])"
            )
        if latch.has_leadership:
            return await latch.wait()  # returns at once: we lead
        try:
            leader = await latch.leader()
            leader_id = leader.id if leader is not None else None
        except CoordError:
            leader_id = None
        raise HTTPException(
            status_code=503,
            detail={"error": "not the leader", "path": path, "leader": leader_id},
            headers={"Retry-After": "1"},
        )

    return leader_only


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
