"""The HTTP shapes of `jobs_router`: a typed request body per job, and the JSON answers.

A job's request body is a pydantic model built from the payload shape the
scheduler read from its handler (`Scheduler.payload_shape`), the contract the
scheduler validates: a handler taking one pydantic model takes that model; any
other handler takes a JSON object of its parameters, where a parameter with a
default may be left out (the handler's default applies where it runs) and
unknown keys are refused.  FastAPI validates the body against it (422 naming
the field) and shows it in the OpenAPI schema, so ``/docs`` offers a form per
job.  The scheduler validates the payload again at submit.
"""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import datetime
from typing import Any

import pydantic

from ..scheduler import JobInfo, PayloadShape

__all__ = (
    "Cancelled",
    "JobError",
    "JobPage",
    "JobView",
    "Outcome",
    "Submitted",
    "job_view",
    "payload_model",
    "payload_of",
)


def _title(name: str) -> str:
    """``resize-image.v2`` -> ``ResizeImageV2``: a schema name from a job name."""
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", name))


def payload_model(
    name: str, shape: PayloadShape, taken: set[str]
) -> tuple[type[pydantic.BaseModel], bool]:
    """The request body of job `name`, and whether it is the model the handler takes whole.

    The handler's own model if it takes one, else a model built from its
    parameters (`shape`, from `Scheduler.payload_shape`).  `taken` holds the
    schema names already used by this router's other jobs: two job names that
    differ only in punctuation get distinct schemas.
    """
    if shape.model is not None:
        return shape.model, True
    title = f"{_title(name)}Payload"
    while title in taken:
        title = f"{title}_"
    taken.add(title)
    definitions: dict[str, Any] = {
        f.name: (f.hint, ... if f.required else f.default) for f in shape.fields
    }
    built: type[pydantic.BaseModel] = pydantic.create_model(
        title,
        __config__=pydantic.ConfigDict(extra="forbid", title=title),
        __doc__=f"The payload of job {name!r}: the parameters of its handler.",
        **definitions,
    )
    return built, False


def payload_of(body: pydantic.BaseModel, model_param: bool) -> Any:
    """What to pass to `Scheduler.submit`: the model, or only the fields the client sent.

    Leaving out a parameter the client did not send lets the handler's own
    default apply where it runs, as it does for a payload submitted in Python.
    """
    if model_param:
        return body
    return body.model_dump(mode="json", exclude_unset=True)


# --- answers ------------------------------------------------------------------------------------


class Submitted(pydantic.BaseModel):
    """A job accepted (202); ``Location`` names its status route."""

    id: str
    name: str
    location: str


class JobView(pydantic.BaseModel):
    """Where a job is: the scheduler's `JobInfo` as JSON (times as ISO 8601 strings)."""

    id: str
    name: str
    status: str
    attempts: int = 0
    worker: str | None = None
    submitted_at: datetime | None = None
    run_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str | None = None


class JobPage(pydantic.BaseModel):
    """A page of jobs; pass `next` as ``after=`` for the next page (null: the last page)."""

    jobs: list[JobView]
    next: str | None = None


class Outcome(pydantic.BaseModel):
    """A finished job's result (200)."""

    id: str
    status: str
    result: Any


class JobError(pydantic.BaseModel):
    """A job that failed or was cancelled (409): the error's type and message."""

    id: str
    status: str
    type: str
    message: str


class Cancelled(pydantic.BaseModel):
    """What a cancel left: the job's final or current status."""

    id: str
    status: str


def job_view(info: JobInfo) -> JobView:
    """The JSON view of a `JobInfo`."""
    data = {f.name: getattr(info, f.name) for f in fields(info)}
    return JobView.model_validate({**data, "status": info.status.value})
