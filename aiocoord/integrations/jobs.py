"""`jobs_router`: the job scheduler over HTTP, with a typed form per job in ``/docs``.

Install with the ``fastapi`` extra (``pip install 'aiocoord[fastapi]'``)::

    coord = aiocoord.connect(settings)            # connected by the app's lifespan
    sched = aiocoord.Scheduler(coord, "/app/jobs")

    @sched.job("resize")
    async def resize(url: str, width: int) -> dict[str, int]: ...

    app = FastAPI(lifespan=lifespan(coord))
    app.include_router(jobs_router(sched))        # prefix="/jobs" by default

Routes, under the prefix:

- ``POST /{name}``: submit; the body is the payload, one typed request body
  per job registered when the router is built (so ``/docs`` lets a person
  submit by hand; a job whose parameters all have defaults may be sent
  without a body).  Query: ``job_id`` (the idempotence key), ``delay``
  (seconds) or ``run_at`` (ISO 8601), ``priority`` (an int: higher runs first).  202 with the id and a ``Location``;
  422 for a bad payload (naming the field) or argument; 409 when the id
  exists with a different payload; 404 for a name not registered here.
- ``GET /{id}``: the job's `JobInfo`; 404 for an unknown id; 500 naming the
  node and the reason when the job's node does not decode (that job only).
- ``GET /{id}/result?wait=S``: waits up to S seconds (at most `max_wait`):
  200 with the result, 202 with the job's info when not finished yet, 409
  with the error's type and message when FAILED or CANCELLED, 500 as for
  ``GET /{id}`` when its node does not decode.  A wait given up (the
  timeout, a client gone) leaves no watch behind.
- ``DELETE /{id}``: cancel; answers with the job's final or current status.
- ``POST /{id}/retry``: run a FAILED or CANCELLED job again (attempts kept);
  202 with its `JobInfo`; 409 naming the status for a DONE job or one not
  finished; 404 for an unknown id.
- ``GET /{id}/events``: server-sent events, one ``status`` event (the job's
  `JobInfo` as JSON) at each status change, the stream ending after the
  final one; 404 for an unknown id.  A client that goes away ends the watch.
- ``GET /?status=&limit=&after=``: a page of jobs; ``next`` is the cursor
  for the next page (``after=next``), null on the last one.

The scheduler's coordinator must be running while requests come: pass it to
`lifespan` (``lifespan(coord)``), which connects it on startup.  A process
that only submits needs no ``sched.worker()``.  Every route answers 503 with
``Retry-After`` while ZooKeeper cannot be reached: at once while the session
is known to be SUSPENDED or LOST, else when a request times out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from datetime import datetime
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

import anyio
import pydantic
from fastapi import APIRouter, Body, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute

from .._checks import check_seconds
from ..errors import (
    ConnectionLostError,
    CoordinatorClosedError,
    JobCancelled,
    JobConflict,
    JobFailed,
    NodeDataError,
    NoNodeError,
)
from ..scheduler import JobInfo, JobStatus, Scheduler
from ..zk.states import ConnectionState
from ._job_models import (
    Cancelled,
    JobError,
    JobPage,
    JobView,
    Outcome,
    Submitted,
    job_view,
    payload_model,
    payload_of,
)

__all__ = ("jobs_router",)

MAX_WAIT = 60.0  # seconds: a long-poll is bounded so that proxies and clients do not give up first
MAX_LIMIT = 1000
RETRY_AFTER = "1"
READ_BOUND = 10.0  # seconds to read a result already there (the request timeout bounds it too)
MAX_ECHO = 200  # characters of a refused value a 422 shows back (a 20 MB body is not echoed)

T = TypeVar("T")


def jobs_router(
    sched: Scheduler,
    *,
    prefix: str = "/jobs",
    tags: Sequence[str] = ("jobs",),
    max_wait: float = MAX_WAIT,
) -> APIRouter:
    """An `APIRouter` serving `sched` over HTTP (see the module docstring).

    Register the jobs before calling it: each registered job gets its own
    typed ``POST {prefix}/{name}`` route; a job registered later is still
    accepted, validated by the scheduler, without a form in ``/docs``.
    `max_wait` caps ``?wait=`` of the result route, in seconds.  Raises
    `TypeError` for a handler whose hints cannot be a request body,
    `TypeError`/`ValueError` naming a bad argument (`prefix` such as ``"/jobs"``).
    """
    if not isinstance(sched, Scheduler):
        raise TypeError(f"sched must be an aiocoord.Scheduler, not {type(sched).__name__}")
    max_wait = check_seconds("max_wait", max_wait)
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if not prefix.startswith("/") or len(prefix) < 2 or prefix.endswith("/"):
        raise ValueError(f"prefix must start with '/' and not end with it, not {prefix!r}")
    if isinstance(tags, str):
        raise TypeError("tags must be a sequence of tags, not a single string")
    router = APIRouter(prefix=prefix, tags=list(tags), route_class=_CappedEcho)
    taken: set[str] = set()
    for name in sched.job_names:
        _add_submit(router, sched, name, sched.handler(name), taken)
    _add_routes(router, sched, float(max_wait))
    return router


class _CappedEcho(APIRoute):
    """A route whose 422 shows at most `MAX_ECHO` characters of each refused input.

    FastAPI's 422 echoes the whole input of each error: a 20 MB payload of the
    wrong shape would come back whole.  The field, message and type stay.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def capped(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise RequestValidationError([_capped(e) for e in exc.errors()]) from None

        return capped


def _capped(error: Any) -> Any:
    if not isinstance(error, dict) or "input" not in error:
        return error
    try:
        text = json.dumps(error["input"], default=str)
    except (TypeError, ValueError):
        text = repr(error["input"])
    if len(text) <= MAX_ECHO:
        return error
    return {**error, "input": f"{text[:MAX_ECHO]}... ({len(text)} characters, cut)"}


# --- submit ------------------------------------------------------------------------------------

JobIdQuery = Annotated[
    str | None, Query(description="the idempotence key (default: a new random id)")
]
DelayQuery = Annotated[float | None, Query(description="run no sooner than this many seconds")]
RunAtQuery = Annotated[
    datetime | None, Query(description="run no sooner than this time (ISO 8601, with a zone)")
]
PriorityQuery = Annotated[int, Query(description="higher runs first among due jobs")]


def _add_submit(
    router: APIRouter, sched: Scheduler, name: str, handler: Any, taken: set[str]
) -> None:
    try:
        model, whole = payload_model(name, sched.payload_shape(name), taken)
    except (NameError, TypeError, pydantic.PydanticUserError) as exc:
        raise TypeError(f"job {name!r}: its handler cannot be a request body: {exc}") from exc

    async def submit(
        request: Request,
        payload: Any,  # the job's model: set below, where it is known
        job_id: JobIdQuery = None,
        delay: DelayQuery = None,
        run_at: RunAtQuery = None,
        priority: PriorityQuery = 0,
    ) -> JSONResponse:
        return await _submit(
            request, sched, name, payload_of(payload, whole), job_id, delay, run_at, priority
        )

    # Annotations are strings here (PEP 563); FastAPI reads this one as the object itself.
    # A job whose parameters all have defaults takes no body, as `submit` takes no payload.
    optional = not any(f.is_required() for f in model.model_fields.values())
    submit.__annotations__["payload"] = Annotated[
        model, Body(default_factory=model) if optional else Body()
    ]
    router.add_api_route(
        f"/{name}",
        submit,
        methods=["POST"],
        status_code=202,
        response_model=Submitted,
        summary=f"Submit a {name!r} job",
        description=_describe(name, handler),
        operation_id=f"submit_job_{_ident(name)}",
        responses={
            404: {"description": "no such job here"},
            409: {"description": "the id exists with a different payload"},
        },
    )


def _describe(name: str, handler: Any) -> str:
    doc = (handler.__doc__ or "").strip()
    return doc or f"Queue a {name!r} job; the body is its payload."


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)


async def _submit(
    request: Request,
    sched: Scheduler,
    name: str,
    payload: Any,
    job_id: str | None,
    delay: float | None,
    run_at: datetime | None,
    priority: int = 0,
) -> JSONResponse:
    if delay is not None and run_at is not None:
        raise _invalid(["query", "delay"], "give delay or run_at, not both")
    _check_near(sched)
    when: dict[str, Any] = {}
    if delay is not None:
        when["delay"] = delay
    if run_at is not None:
        when["run_at"] = run_at
    if priority:
        when["priority"] = priority
    try:
        new_id = await _call(sched.submit(name, payload, job_id=job_id, **when))
    except JobConflict as exc:
        raise HTTPException(
            409, {"error": "conflict", "id": exc.job_id, "reason": exc.reason}
        ) from None
    except (ValueError, TypeError) as exc:
        raise _invalid(_where(str(exc)), str(exc)) from None
    # The job's own route is a sibling of this one: .../jobs/{name} -> .../jobs/{id}.
    location = request.url.path.rsplit("/", 1)[0] + "/" + quote(new_id, safe="")
    body = Submitted(id=new_id, name=name, location=location)
    return JSONResponse(body.model_dump(), status_code=202, headers={"Location": location})


def _where(message: str) -> list[str]:
    """Where a scheduler's `ValueError` points: its messages start with the argument's name."""
    for arg in ("job_id", "delay", "run_at", "priority"):
        if message.startswith(arg):
            return ["query", arg]
    return ["body"]


def _invalid(loc: list[str], message: str) -> HTTPException:
    return HTTPException(422, [{"loc": loc, "msg": message, "type": "value_error"}])


_AWAY = (ConnectionState.SUSPENDED, ConnectionState.LOST)


def _check_near(sched: Scheduler) -> None:
    """503 at once while the session is known to be away, rather than after a request timeout."""
    state = sched.coordinator.state
    if state is not None and state in _AWAY:
        raise HTTPException(
            503,
            f"ZooKeeper is not reachable: the session is {state.value}",
            headers={"Retry-After": RETRY_AFTER},
        )


async def _call(request: Awaitable[T]) -> T:
    """Await a scheduler call; ZooKeeper out of reach or not connected answers 503.

    A node the scheduler cannot read (corrupt, foreign or too new) answers 500
    naming it and why: that job's fault, not the caller's, and no other job's.
    """
    try:
        return await request
    except NodeDataError as exc:
        raise HTTPException(
            500, {"error": "unreadable", "path": exc.path, "reason": exc.reason}
        ) from None
    except CoordinatorClosedError as exc:
        raise HTTPException(
            503,
            f"the scheduler's coordinator is not running ({exc}): pass it to lifespan(coord)",
            headers={"Retry-After": RETRY_AFTER},
        ) from None
    except ConnectionLostError as exc:
        raise HTTPException(
            503, f"ZooKeeper is not reachable: {exc}", headers={"Retry-After": RETRY_AFTER}
        ) from None


# --- read, wait, cancel, list ------------------------------------------------------------------


def _add_routes(router: APIRouter, sched: Scheduler, max_wait: float) -> None:

    @router.post("/{name}", include_in_schema=False)
    async def submit_other(
        request: Request,
        name: str,
        payload: Annotated[Any, Body()] = None,
        job_id: JobIdQuery = None,
        delay: DelayQuery = None,
        run_at: RunAtQuery = None,
        priority: PriorityQuery = 0,
    ) -> JSONResponse:
        names = sched.job_names
        if name not in names:  # one registered after the router was built: the scheduler checks
            known = ", ".join(repr(n) for n in names) or "none"
            raise HTTPException(404, f"no job named {name!r} here (registered: {known})")
        return await _submit(request, sched, name, payload, job_id, delay, run_at, priority)

    @router.get("/{job_id}", response_model=JobView, summary="A job's status and times")
    async def info(job_id: str) -> JobView:
        return job_view(await _info(sched, job_id))

    async def result(job_id: str, wait: float = 0.0) -> Response:
        found = await _info(sched, job_id)  # 404 before waiting: an unknown id would wait forever
        if found.status.final:
            wait = max(wait, READ_BOUND)  # the result is there: only a bound on reading it
        value: Any = None
        finished = False
        try:
            with anyio.move_on_after(wait):
                value = await _call(sched.result(job_id))
                finished = True
        except JobFailed as exc:
            return _failed(job_id, "failed", exc.type, exc.message)
        except JobCancelled as exc:
            return _failed(job_id, "cancelled", exc.type, exc.message)
        if not finished:
            view = job_view(await _info(sched, job_id))
            return JSONResponse(
                view.model_dump(mode="json"), status_code=202, headers={"Retry-After": "1"}
            )
        done = Outcome(id=job_id, status="done", result=value)
        return JSONResponse(done.model_dump(mode="json"))

    # Annotations are strings here (PEP 563): FastAPI gets this one, with its bound, as an object.
    result.__annotations__["wait"] = Annotated[
        float, Query(ge=0, le=max_wait, description="seconds to wait for the outcome")
    ]
    router.add_api_route(
        "/{job_id}/result",
        result,
        methods=["GET"],
        response_model=Outcome,
        summary="A job's result: wait up to `wait` seconds",
        responses={
            202: {"model": JobView, "description": "not finished yet"},
            409: {"model": JobError, "description": "the job failed or was cancelled"},
            500: {"description": "the job's node does not decode: its path and the reason"},
        },
    )

    @router.delete("/{job_id}", response_model=Cancelled, summary="Cancel a job")
    async def cancel(job_id: str) -> Cancelled:
        status = await _lookup(sched, job_id, sched.cancel)
        return Cancelled(id=job_id, status=status.value)

    @router.post(
        "/{job_id}/retry",
        response_model=JobView,
        status_code=202,
        summary="Run a FAILED or CANCELLED job again",
        responses={409: {"description": "the job is DONE, or not finished"}},
    )
    async def retry(job_id: str) -> JobView:
        _check_near(sched)
        try:
            await _call(sched.retry(job_id))
        except JobConflict as exc:  # before ValueError: it is one
            raise HTTPException(
                409, {"error": "conflict", "id": exc.job_id, "reason": exc.reason}
            ) from None
        except (NoNodeError, ValueError) as exc:
            raise HTTPException(404, f"no job {job_id!r}: {exc}") from None
        return job_view(await _info(sched, job_id))

    @router.get(
        "/{job_id}/events",
        summary="A job's status changes, as server-sent events",
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def events(job_id: str) -> StreamingResponse:
        await _info(sched, job_id)  # 404 before the stream starts
        return StreamingResponse(
            _events(sched, job_id),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache"},
        )

    @router.get("", response_model=JobPage, summary="List jobs, a page at a time")
    async def listing(
        status: Annotated[JobStatus | None, Query(description="only jobs in this status")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
        after: Annotated[str | None, Query(description="the `next` of the previous page")] = None,
    ) -> JobPage:
        _check_near(sched)
        found: list[JobView] = []

        async def collect() -> None:
            async for item in sched.jobs(status=status, limit=limit + 1, after=after):
                found.append(job_view(item))

        try:
            await _call(collect())
        except ValueError as exc:  # `after` is no job id
            raise _invalid(["query", "after"], str(exc)) from None
        more = len(found) > limit
        page = found[:limit]
        return JobPage(jobs=page, next=page[-1].id if more and page else None)


async def _events(sched: Scheduler, job_id: str) -> AsyncIterator[str]:
    """One ``status`` event per change, then the stream ends (at the final status)."""
    try:
        async for info in sched.watch(job_id):
            yield f"event: status\ndata: {job_view(info).model_dump_json()}\n\n"
    except NoNodeError:  # its result expired at once: nothing more to tell
        return


def _failed(job_id: str, status: str, type_: str, message: str) -> JSONResponse:
    body = JobError(id=job_id, status=status, type=type_, message=message)
    return JSONResponse(body.model_dump(), status_code=409)


async def _info(sched: Scheduler, job_id: str) -> JobInfo:
    return await _lookup(sched, job_id, sched.info)


async def _lookup(sched: Scheduler, job_id: str, call: Callable[[str], Awaitable[T]]) -> T:
    _check_near(sched)
    try:
        return await _call(call(job_id))
    except NoNodeError:
        raise HTTPException(404, f"no job {job_id!r} (never submitted, or expired)") from None
    except ValueError as exc:  # not a valid id: no such job either
        raise HTTPException(404, f"no job {job_id!r}: {exc}") from None
