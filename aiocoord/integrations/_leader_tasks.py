"""Leader-only tasks of the FastAPI lifespan: checking them, running them, what each did so far.

Each task runs under a `LeaderSelector` with `Coordination._leader` as its
`lead`, which runs it with `run_while_leader`; this module holds that and what
the lifespan's argument checks share.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from .._backoff import Backoff
from .._checks import check_seconds
from ..recipes.leader_latch import LeadershipTerm
from ..zk.paths import validate_path

__all__ = (
    "MAX_BACKOFF",
    "LeaderFunc",
    "LeaderTask",
    "check_grace",
    "check_leader_tasks",
    "run_while_leader",
    "wants_term",
)

log = logging.getLogger("aiocoord.integrations.fastapi")

LeaderFunc = Callable[..., Awaitable[Any]]
MAX_BACKOFF = 30.0


def check_grace(grace: object) -> float:
    """`liveness_grace` as seconds: a finite number >= 0 (NaN would disable liveness)."""
    return check_seconds("liveness_grace", grace)


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


async def run_while_leader(
    task: LeaderTask, term: LeadershipTerm, with_term: bool, session: int | None
) -> None:
    """Run `task` for `term` (got on `session`): again after a backoff if it fails.

    Never returns: once the task returns by itself it idles until the term
    ends, which cancels it (a failure is logged, counted and retried with a
    backoff of 1 s doubling to `MAX_BACKOFF`).
    """
    backoff = Backoff(1.0, MAX_BACKOFF, jitter=0.0)
    while True:
        task.running, task.session, task.token = True, session, term.token
        task.starts += 1
        log.info("leader task %s started (token 0x%x)", task.path, term.token)
        try:
            await (task.func(term) if with_term else task.func())
        except Exception as exc:
            task.failures += 1
            task.last_error = f"{type(exc).__name__}: {exc}"
            log.exception("leader task %s failed; it starts again while still leader", task.path)
        else:
            break
        finally:
            task.running = False
        await backoff.failed()
    await anyio.sleep_forever()  # returned by itself: idle until the term ends
