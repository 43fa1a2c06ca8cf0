"""Leader-only tasks of the FastAPI lifespan: checking them, and what each did so far.

Each task runs under a `LeaderSelector` with `Coordination._leader` as its
`lead`; this module holds what that and the lifespan's argument checks share.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..zk.paths import validate_path

__all__ = (
    "MAX_BACKOFF",
    "LeaderFunc",
    "LeaderTask",
    "check_grace",
    "check_leader_tasks",
    "wants_term",
)

LeaderFunc = Callable[..., Awaitable[Any]]
MAX_BACKOFF = 30.0


def check_grace(grace: object) -> float:
    """`liveness_grace` as seconds: a finite number >= 0 (NaN would disable liveness)."""
    if isinstance(grace, bool) or not isinstance(grace, int | float):
        raise TypeError(f"liveness_grace must be a number of seconds, not {grace!r}")
    if not 0 <= grace < math.inf:
        raise ConfigError(
            "liveness_grace", f"must be a finite number of seconds >= 0, not {grace!r}"
        )
    return float(grace)


def check_leader_tasks(leader_tasks: Mapping[str, LeaderFunc] | None) -> dict[str, LeaderFunc]:
    """Validate ``{path: coroutine function}``; raise `TypeError` / `InvalidPathError`."""
    if leader_tasks is None:
        return {}
    if not isinstance(leader_tasks, Mapping):
        raise TypeError(
            f"leader_tasks must be a mapping of path -> async function, not {type(leader_tasks).__name__}"
        )
    out: dict[str, LeaderFunc] = {}
    for path, func in leader_tasks.items():
        validate_path(path)
        if not callable(func):
            raise TypeError(f"leader_tasks[{path!r}] must be an async function, not {func!r}")
        wants_term(func)  # raises for a function that takes more than one argument
        out[path] = func
    return out


def wants_term(func: LeaderFunc) -> bool:
    """Whether `func` takes the `LeadershipTerm` (one positional parameter) or nothing."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in params
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) > 1:
        raise TypeError(f"a leader task takes no argument or the LeadershipTerm, not {func!r}")
    return len(required) == 1


@dataclass(slots=True)
class LeaderTask:
    """A leader-only task and what it did so far (shown by ``/coordination/status``)."""

    path: str
    func: LeaderFunc
    running: bool = False
    session: int | None = None  # the session its current run got leadership on
    token: int | None = None
    starts: int = 0
    losses: int = 0
    failures: int = 0
    last_error: str | None = None
    last_loss: str | None = None
