"""The live dashboard: a read-only web page of what is under a ZooKeeper path.

Install with the ``fastapi`` extra (``pip install 'aiocoord[fastapi]'``)::

    from aiocoord.integrations.dashboard import dashboard_router
    from aiocoord.integrations.fastapi import lifespan

    app = FastAPI(lifespan=lifespan(settings))
    app.include_router(dashboard_router("/app"), prefix="/dashboard")   # the page: /dashboard/

or from the command line: ``aiocoord dashboard /app``.

The page shows each recipe under the path, recognised by its layout as
``aiocoord inspect`` recognises it: leader latches (participants in order,
leader, tokens, sessions), mutexes (holder and waiters), CAS locks (owner,
token, remaining lease), task leadership (workers with versions, task ->
leader), crons (each job's leader, last outcome, next firing), schedulers
(pending, running per worker, failed), and the changes as they happen
(leader changes, lock hand-overs, task and job hand-overs).  It updates live: one ZooKeeper watch per
router serves every open page over server-sent events, so viewers add no
load on ZooKeeper.  The connection state (SUSPENDED, LOST) is shown on the
page, which then marks what it shows as possibly out of date.

Node data is untrusted: the page writes every name and datum as text (never
as HTML), under a Content-Security-Policy that allows no inline script.  The
page, its script and style ship in the package; nothing is fetched elsewhere.

Routes, relative to where the router is included: ``GET /`` the page (link
to it with the trailing slash), ``GET /events`` the server-sent events (one
JSON document per change), ``GET /state`` the current document as JSON.

The router's lifespan starts the watch: include the router in the app
(``app.include_router``; FastAPI 0.112.2 and later run an included router's
lifespan); an app mounted with ``app.mount`` does not run it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib.resources import files
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse, Response, StreamingResponse

from .._checks import check_int
from ..session import Coordinator
from ..zk.paths import validate_path
from ._dashboard_feed import DashboardFeed
from .fastapi import STATE_KEY, Coordination

__all__ = ("dashboard_app", "dashboard_router")

KEEPALIVE = 15.0  # seconds between comments on an idle event stream, so proxies keep it open

_ASSETS = {
    "": ("index.html", "text/html; charset=utf-8"),
    "dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
_HEADERS = {
    # Node data is untrusted: even if a name slipped into the markup, no inline script runs.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _asset(name: str) -> bytes:
    return (files(__package__) / "dashboard_static" / name).read_bytes()


def _serve_asset(name: str, media_type: str) -> Callable[[], Awaitable[Response]]:
    # An endpoint without parameters: FastAPI would take any parameter from the query string.
    body = _asset(name)

    async def asset() -> Response:
        return Response(body, media_type=media_type, headers=_HEADERS)

    return asset


def _app_coordinator(app: FastAPI) -> Coordinator:
    found = getattr(app.state, STATE_KEY, None)
    if not isinstance(found, Coordination):
        raise RuntimeError(
            "dashboard_router(): no coordinator: pass coord=..., or build the app with "
            "FastAPI(lifespan=aiocoord.integrations.fastapi.lifespan(...))"
        )
    return found.coord


def dashboard_router(
    path: str = "/", *, coord: Coordinator | None = None, depth: int = 4
) -> APIRouter:
    """A router serving the live dashboard of `path`; include it under any prefix.

    `coord` is the connected coordinator to read with; by default the app's
    own, from `aiocoord.integrations.fastapi.lifespan`.  `depth` is how many
    levels of plain nodes are walked below `path` (as ``inspect --depth``).
    The watch runs from the app's startup to its shutdown (the router's
    lifespan); a bad `path` or `depth` raises here.
    """
    validate_path(path, allow_reserved=True)
    check_int("depth", depth, least=0)
    running: list[DashboardFeed] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        feed = DashboardFeed(
            coord if coord is not None else _app_coordinator(app), path, depth=depth
        )
        async with anyio.create_task_group() as tg:
            await tg.start(feed.run)
            running.append(feed)
            try:
                yield
            finally:
                running.remove(feed)
                tg.cancel_scope.cancel()

    def current() -> DashboardFeed | JSONResponse:
        if running:
            return running[-1]
        return JSONResponse(
            {
                "error": "the dashboard is not running: include its router with "
                "app.include_router (FastAPI >= 0.112.2 runs an included router's lifespan)"
            },
            status_code=503,
        )

    router = APIRouter(lifespan=lifespan, tags=["dashboard"])
    for route, (name, media_type) in _ASSETS.items():
        router.add_api_route(
            f"/{route}", _serve_asset(name, media_type), methods=["GET"], include_in_schema=False
        )

    @router.get("/events", summary="The dashboard's documents as server-sent events")
    async def events() -> Response:
        feed = current()
        if isinstance(feed, Response):
            return feed
        return StreamingResponse(
            _stream(feed),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @router.get("/state", summary="The dashboard's current document")
    async def state() -> Response:
        feed = current()
        if isinstance(feed, Response):
            return feed
        return Response(_json(feed.document), media_type="application/json")

    return router


def _json(document: dict[str, Any]) -> str:
    # The viewer's clock may differ from ours: it counts leases down from our time.
    return json.dumps(document | {"server_time": time.time()}, separators=(",", ":"), default=str)


async def _stream(feed: DashboardFeed) -> AsyncIterator[str]:
    """The current document, then each newer one (a slow reader skips to the latest)."""
    yield "retry: 1000\n\n"  # the browser reconnects within a second when the stream breaks
    seq = 0
    while True:
        document: dict[str, Any] | None = None
        with anyio.move_on_after(KEEPALIVE):
            document = await feed.next_document(seq)
        if document is None:
            yield ": keep-alive\n\n"
            continue
        seq = document["seq"]
        yield f"id: {seq}\ndata: {_json(document)}\n\n"


def dashboard_app(coord: Coordinator, path: str = "/", *, depth: int = 4) -> FastAPI:
    """A FastAPI app serving only the dashboard of `path` at ``/`` (``aiocoord dashboard``)."""
    app = FastAPI(title="aiocoord dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.include_router(dashboard_router(path, coord=coord, depth=depth))
    return app
