"""A job's payload shape, read once from its handler's signature and hints.

The one reading of a handler: `JobType` builds the adapters the scheduler
validates with from it, and an HTTP layer its request body (through
`Scheduler.payload_shape`), so both describe the same contract.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pydantic

__all__ = ("PayloadField", "PayloadShape", "payload_shape")

_REQUIRED: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class PayloadField:
    """One parameter of a handler: a key of the payload's JSON object.

    `default` is the handler's default (`required` False), which applies where
    the handler runs when the key is left out.
    """

    name: str
    hint: Any
    default: Any = _REQUIRED

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED


@dataclass(frozen=True)
class PayloadShape:
    """A job's payload and result as its handler's hints describe them.

    `model` is the pydantic model the handler takes as its one argument (the
    payload is that model), else None and the payload is a JSON object of
    `fields`, unknown keys refused.  `returns` is the return annotation.
    """

    model: type[pydantic.BaseModel] | None
    fields: tuple[PayloadField, ...]
    returns: Any


def payload_shape(name: str, handler: Callable[..., Awaitable[Any]]) -> PayloadShape:
    """Read `handler`'s shape; `TypeError` naming job `name` if it is not an async function
    with ordinary named parameters and resolvable hints."""
    if not inspect.iscoroutinefunction(handler):
        raise TypeError(f"job {name!r}: the handler must be an async function (async def)")
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
    except Exception as exc:
        raise TypeError(f"job {name!r}: cannot resolve the handler's type hints: {exc}") from exc
    params = list(inspect.signature(handler).parameters.values())
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(
                f"job {name!r}: parameter {p.name!r} must be an ordinary named parameter "
                "(no *args, **kwargs or positional-only): the payload is a JSON object"
            )
    fields = tuple(PayloadField(p.name, hints.get(p.name, Any), p.default) for p in params)
    first = fields[0].hint if len(fields) == 1 else None
    model = first if isinstance(first, type) and issubclass(first, pydantic.BaseModel) else None
    return PayloadShape(model, fields, hints.get("return", Any))
