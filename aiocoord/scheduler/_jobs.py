"""Job handlers and their JSON contract, derived from type hints with pydantic.

A handler is an ``async def``.  Its payload is described by its signature:

- one parameter annotated with a pydantic model: the payload is that model
  (``async def resize(req: ResizeRequest) -> ResizeResult``);
- otherwise a JSON object whose keys are the parameters (``async def add(a:
  int, b: int = 0) -> int`` takes ``{"a": 1, "b": 2}``), validated by a
  `pydantic.TypeAdapter` over a TypedDict built from the signature: a
  parameter with a default may be left out (the handler's default applies
  where it runs), unknown keys are refused.

The result is validated against the return annotation and stored as JSON
(``mode="json"``: models become objects, datetimes ISO strings).  The same
types are checked on both ends: at `submit` and again by the worker before
calling the handler, on the worker's return value, and on the client when it
reads the result.  Nothing is pickled: a payload is data, never code.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import pydantic
import pydantic_core
import typing_extensions

from ._payload import PayloadShape, payload_shape
from ._policy import DEFAULT_OPTIONS, JobOptions
from ._records import ResultRecord, check_job_name

__all__ = ("Handler", "JobType", "run_attempt", "run_job")

Handler = Callable[..., Awaitable[Any]]
"""An async function taking the job's payload (see the module docstring)."""

_CONFIG = pydantic.ConfigDict(extra="forbid")
_TYPED_DICT: Any = typing_extensions.TypedDict  # called with a computed field dict


@dataclass(frozen=True, eq=False)
class JobType:
    """One registered job: its name, handler and the adapters for payload and result."""

    name: str
    handler: Handler
    shape: PayloadShape
    payload_adapter: pydantic.TypeAdapter[Any]
    result_adapter: pydantic.TypeAdapter[Any]
    options: JobOptions = DEFAULT_OPTIONS  # timeout, retries, deliveries (see `Scheduler.job`)

    @property
    def model_param(self) -> bool:
        """Whether the handler takes the payload model as its one argument."""
        return self.shape.model is not None

    @property
    def params(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.shape.fields)

    @classmethod
    def build(cls, name: str, handler: Handler) -> JobType:
        """Describe `handler`; `TypeError` if it is not an async function with usable hints."""
        name = check_job_name(name)
        shape = payload_shape(name, handler)
        try:
            if shape.model is not None:
                payload: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(shape.model)
            else:
                fields: dict[str, Any] = {
                    f.name: (
                        typing_extensions.Required[f.hint]
                        if f.required
                        else typing_extensions.NotRequired[f.hint]
                    )
                    for f in shape.fields
                }
                typed = _TYPED_DICT(f"{name}_payload", fields)
                payload = pydantic.TypeAdapter(pydantic.with_config(_CONFIG)(typed))
            result: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(shape.returns)
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
            raise TypeError(f"job {name!r}: its hints cannot be described as JSON: {exc}") from exc
        except (NameError, TypeError, ValueError) as exc:
            raise TypeError(f"job {name!r}: its hints cannot be described as JSON: {exc}") from exc
        return cls(name, handler, shape, payload, result)

    # --- submit side -------------------------------------------------------------------------

    def validate_payload(self, payload: Any) -> Any:
        """The payload as JSON-ready data; `ValueError` naming `payload` if it does not fit."""
        if payload is None and not self.model_param:
            payload = {}
        elif isinstance(payload, pydantic.BaseModel) and not self.model_param:
            payload = payload.model_dump()
        elif not self.model_param and not isinstance(payload, Mapping):
            raise TypeError(
                f"payload for job {self.name!r} must be a mapping of its parameters "
                f"{list(self.params)}, not {type(payload).__name__}"
            )
        try:
            value = self.payload_adapter.validate_python(payload)
            return self.payload_adapter.dump_python(value, mode="json")
        except pydantic.ValidationError as exc:
            raise ValueError(f"payload for job {self.name!r} is invalid: {exc}") from exc
        except pydantic_core.PydanticSerializationError as exc:
            raise ValueError(f"payload for job {self.name!r} is not JSON: {exc}") from exc

    # --- worker side -------------------------------------------------------------------------

    async def call(self, payload: Any) -> Any:
        """Validate the stored payload, run the handler, return its result as JSON-ready data.

        Raises `pydantic.ValidationError` for a payload or result that does not
        fit, and whatever the handler raises.
        """
        value = self.payload_adapter.validate_python(payload)
        if self.model_param:
            returned = await self.handler(value)
        else:
            returned = await self.handler(**value)
        checked = self.result_adapter.validate_python(returned)
        return self.result_adapter.dump_python(checked, mode="json")

    # --- client side -------------------------------------------------------------------------

    def load_result(self, value: Any) -> Any:
        """The stored result as the return annotation's type (`pydantic.ValidationError`)."""
        return self.result_adapter.validate_python(value)


async def run_job(job: JobType | None, name: str, payload: Any) -> ResultRecord:
    """Run one job to its outcome: a handler error becomes a failed result, not a crash.

    Cancellation propagates (nothing is recorded for a cancelled run).
    """
    return (await run_attempt(job, name, payload))[0]


async def run_attempt(
    job: JobType | None, name: str, payload: Any
) -> tuple[ResultRecord, Exception | None]:
    """Run one attempt, within the job's timeout: its outcome and the error a retry may follow.

    The error is what the handler raised, or `TimeoutError` when it ran past
    its timeout (the handler is cancelled).  A payload or result that does
    not fit the hints fails without an error to retry for: running it again
    cannot help.  Cancellation from outside propagates.
    """
    if job is None:
        failed = ResultRecord(name, ok=False, type="UnknownJob", message=f"no handler for {name!r}")
        return failed, None
    try:
        value = job.payload_adapter.validate_python(payload)
    except Exception as exc:
        return _failed(name, exc), None
    timeout = job.options.timeout
    finished = False
    try:
        with anyio.move_on_after(math.inf if timeout is None else timeout):
            returned = await (job.handler(value) if job.model_param else job.handler(**value))
            finished = True
    except Exception as exc:
        return _failed(name, exc), exc
    if not finished:  # the timeout's scope cancelled the handler
        error = TimeoutError(f"the handler ran past its timeout of {timeout:g} s")
        return _failed(name, error), error
    try:
        checked = job.result_adapter.validate_python(returned)
        return ResultRecord(
            name, ok=True, value=job.result_adapter.dump_python(checked, mode="json")
        ), None
    except Exception as exc:
        return _failed(name, exc), None


def _failed(name: str, exc: BaseException) -> ResultRecord:
    return ResultRecord(name, ok=False, type=type(exc).__name__, message=str(exc))
