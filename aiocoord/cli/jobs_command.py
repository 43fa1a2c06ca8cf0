"""``aiocoord jobs submit|info|result|cancel|retry|list``: a job scheduler from the command line.

Every command connects as ``inspect`` does (``--hosts``, else
``AIOCOORD_HOSTS``, else the embedded server) and works on the scheduler
rooted at ``--root``, as a client: it runs no worker.

``submit --handlers MODULE:FUNCTION`` registers the application's jobs
here first (``FUNCTION(sched)`` calls ``sched.job(...)``, as the workers'
code does), so the name and the payload are checked against the handlers'
hints before anything is written.  Without it the command has no handlers
of its own and checks what it can: the name must be one a live worker offers
(workers publish the names of their handlers; ``--force`` submits all the
same, for workers not started yet) and the payload a JSON object; the worker
validates the payload before running it, and one that does not fit fails
the job with pydantic's message naming the field, which ``submit --wait S``
prints at once.

Exit status: 0 done, 1 a failed operation (or a failed or cancelled job), 2
a bad command line, 3 a job not finished within ``--wait``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from ..errors import (
    ConnectionLostError,
    JobCancelled,
    JobFailed,
    NoNodeError,
)
from ._connect import add_connection_args, checked_path, settings_of, unreachable
from .zk import UserError

if TYPE_CHECKING:  # loaded when the command runs: `aiocoord --help` stays quick
    from ..scheduler import JobInfo, JobStatus, Scheduler
    from ..session import Coordinator

__all__ = ("NOT_FINISHED", "add_parser")

NOT_FINISHED = 3  # exit status: the job had not finished when the wait ended
MAX_WAIT = 3600.0
READ_BOUND = 10.0  # seconds to read a result that is already there

T = TypeVar("T")


def add_parser(sub: argparse._SubParsersAction[Any]) -> None:
    """Register the ``jobs`` subcommand and its actions on `sub`."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", required=True, help="the scheduler's root path, e.g. /app/jobs")
    add_connection_args(common)

    jobs = sub.add_parser(
        "jobs",
        help="submit jobs to a scheduler, follow, cancel and list them",
        description=(
            "Work with the job scheduler rooted at --root, as a client (no worker runs here). "
            "'submit' sends a JSON payload for a job name that a live worker offers; the "
            "worker validates it against its handler (see docs/cli.md)."
        ),
    )
    actions = jobs.add_subparsers(dest="action", required=True, metavar="ACTION")

    submit = actions.add_parser("submit", parents=[common], help="queue a job; prints its id")
    submit.add_argument("name", help="the job's name, as registered by the workers")
    submit.add_argument("payload", help="the payload as a JSON object, e.g. '{\"a\": 1}'")
    submit.add_argument("--id", default=None, help="the job id (the idempotence key)")
    when = submit.add_mutually_exclusive_group()
    when.add_argument("--delay", type=_delay, default=None, help="run no sooner than in S seconds")
    when.add_argument(
        "--run-at", default=None, help="run no sooner than this time (ISO 8601, with a zone)"
    )
    submit.add_argument(
        "--priority", type=int, default=0, help="higher runs first among due jobs (default 0)"
    )
    submit.add_argument(
        "--wait", type=float, default=None, help="then wait up to S seconds for the result"
    )
    submit.add_argument(
        "--handlers",
        default=None,
        metavar="MODULE:FUNCTION",
        help="register the jobs with FUNCTION(scheduler) first, to check the payload here",
    )
    submit.add_argument(
        "--force", action="store_true", help="submit even if no live worker offers NAME"
    )

    info = actions.add_parser("info", parents=[common], help="a job's status, attempts, times")
    info.add_argument("id", help="the job id")

    result = actions.add_parser("result", parents=[common], help="a job's result")
    result.add_argument("id", help="the job id")
    result.add_argument(
        "--wait", type=float, default=0.0, help="wait up to S seconds for it (default 0)"
    )

    cancel = actions.add_parser("cancel", parents=[common], help="cancel a job")
    cancel.add_argument("id", help="the job id")

    retry = actions.add_parser(
        "retry", parents=[common], help="run a failed or cancelled job again (attempts kept)"
    )
    retry.add_argument("id", help="the job id")

    listing = actions.add_parser("list", parents=[common], help="list jobs")
    listing.add_argument(
        "--status",
        type=_status_name,
        default=None,
        help="only jobs in this status (pending, running, failed, ...)",
    )
    listing.add_argument("--limit", type=int, default=100, help="at most N jobs (default 100)")
    listing.add_argument("--after", default=None, help="start after this job id")

    for action in (submit, info, result, cancel, retry, listing):
        action.set_defaults(func=run_jobs)


def run_jobs(args: argparse.Namespace) -> int:
    """Run one ``jobs`` action; returns the exit status."""
    from ._run import run_async

    root = checked_path(args.root, "--root")
    wait = getattr(args, "wait", None)
    if wait is not None and not (math.isfinite(wait) and 0 <= wait <= MAX_WAIT):
        raise UserError(f"--wait must be a number of seconds from 0 to {MAX_WAIT:g}")
    settings = settings_of(args)

    async def run() -> int:
        from .. import connect
        from ..scheduler import Scheduler

        coord = connect(settings, connect_timeout=args.timeout)
        try:
            await coord.start()
        except ConnectionLostError:  # no session: a failed start leaves nothing to close
            raise unreachable(settings, args.timeout) from None
        try:
            return await _ACTIONS[args.action](coord, Scheduler(coord, root), args)
        finally:
            await coord.aclose()

    return run_async(run, args.loop)


# --- the actions ---------------------------------------------------------------------------------

Action = Callable[["Coordinator", "Scheduler", argparse.Namespace], Awaitable[int]]


async def _submit(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
    except json.JSONDecodeError as exc:
        raise UserError(f"the payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise UserError(
            f"the payload must be a JSON object of the job's parameters, not {args.payload!r}"
        )
    if args.handlers is not None:
        try:
            _load_handlers(args.handlers)(sched)
        except (TypeError, ValueError) as exc:  # what sched.job() raises for a bad job
            raise UserError(f"--handlers {args.handlers}: {exc}") from None
    elif not args.force:
        await _check_offered(coord, sched.root, args.name)
    when: dict[str, Any] = {}
    if args.delay is not None:
        when["delay"] = args.delay
    if args.run_at is not None:
        try:
            when["run_at"] = datetime.fromisoformat(args.run_at)
        except ValueError:
            raise UserError(f"--run-at {args.run_at!r} is not an ISO 8601 time") from None
    if args.priority:
        when["priority"] = args.priority
    if args.handlers is None:
        try:
            sched.job(args.name)(_unchecked())
        except ValueError as exc:
            raise UserError(str(exc)) from None
    try:
        job_id = await sched.submit(args.name, payload, job_id=args.id, **when)
    except (ValueError, TypeError) as exc:  # JobConflict is a ValueError
        raise UserError(_one_line(str(exc))) from None
    if args.wait is None:
        print(json.dumps({"id": job_id}) if args.json else job_id)
        return 0
    if not args.json:
        print(job_id, flush=True)  # the id first: the wait may end before the job does
    return await _wait_result(sched, job_id, args.wait, args.json)


async def _check_offered(coord: Coordinator, root: str, name: str) -> None:
    """`UserError` unless a live worker of the scheduler at `root` has a handler for `name`."""
    from ..scheduler import describe_scheduler

    try:
        view = await describe_scheduler(coord, root, max_reads=0)
    except NoNodeError:
        raise UserError(f"no scheduler at {root} (no worker has run there)") from None
    offered = sorted({job for worker in view.workers for job in worker.jobs})
    if name not in offered:
        raise UserError(
            f"no live worker of {root} offers a job named {name!r} "
            f"(offered: {', '.join(offered) or 'none'}); --force submits it all the same"
        )


async def _info(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    info = await _known(args.id, sched.info(args.id))
    _print_info(info, args.json)
    return 0


async def _result(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    info = await _known(args.id, sched.info(args.id))  # an unknown id would wait forever
    # A finished job's result is there to read: only bound the reading.
    wait = max(args.wait, READ_BOUND) if info.status.final else args.wait
    return await _wait_result(sched, args.id, wait, args.json)


async def _wait_result(sched: Scheduler, job_id: str, wait: float, as_json: bool) -> int:
    try:
        with anyio.move_on_after(wait):
            value = _jsonable(await sched.result(job_id))
            done = {"id": job_id, "status": "done", "result": value}
            print(json.dumps(done if as_json else value))
            return 0
    except (JobFailed, JobCancelled) as exc:
        status = "cancelled" if isinstance(exc, JobCancelled) else "failed"
        if as_json:
            failed = {"id": job_id, "status": status, "type": exc.type, "message": exc.message}
            print(json.dumps(failed))
            return 1
        raise UserError(_one_line(str(exc))) from None
    info = await _known(job_id, sched.info(job_id))
    if as_json:
        print(json.dumps(_info_dict(info)))
    else:
        print(f"job {job_id} not finished after {wait:g}s: {_status(info.status)}")
    return NOT_FINISHED


async def _cancel(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    status = await _known(args.id, sched.cancel(args.id))
    print(json.dumps({"id": args.id, "status": _status(status)}) if args.json else _status(status))
    return 0


async def _retry(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    await _known(args.id, sched.retry(args.id))  # a DONE job, or one not finished: refused
    info = await _known(args.id, sched.info(args.id))
    _print_info(info, args.json)
    return 0


def _delay(text: str) -> float:
    """``--delay``, checked by argparse: a bad one is a bad command line (exit status 2)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {text!r}")
    return value


def _status_name(text: str) -> str:
    """``--status``, checked by argparse (exit status 2): a `JobStatus` value."""
    from ..scheduler import JobStatus

    names = [s.value for s in JobStatus]
    if text.lower() not in names:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(names)}")
    return text.lower()


async def _list(coord: Coordinator, sched: Scheduler, args: argparse.Namespace) -> int:
    from ..scheduler import JobStatus

    status = None if args.status is None else JobStatus(args.status)
    if args.limit < 1:
        raise UserError("--limit must be 1 or more")
    try:
        listing = sched.jobs(status=status, limit=args.limit, after=args.after)
    except (TypeError, ValueError) as exc:  # `after` is no job id
        raise UserError(f"--{exc}") from None
    found = [info async for info in listing]
    if args.json:
        print(json.dumps([_info_dict(i) for i in found], indent=2))
        return 0
    for info in found:
        print(f"{info.id:<34} {info.name:<20} {_status(info.status):<10} attempts {info.attempts}")
    return 0


_ACTIONS: dict[str, Action] = {
    "submit": _submit,
    "info": _info,
    "result": _result,
    "cancel": _cancel,
    "retry": _retry,
    "list": _list,
}


# --- helpers -------------------------------------------------------------------------------------


async def _known(job_id: str, call: Awaitable[T]) -> T:
    try:
        return await call
    except NoNodeError:
        raise UserError(f"no job {job_id!r} (never submitted, or its result expired)") from None
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _load_handlers(spec: str) -> Callable[[Scheduler], object]:
    """The function named ``MODULE:FUNCTION``, imported as uvicorn imports an app."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UserError(f"--handlers {spec!r}: give MODULE:FUNCTION, e.g. myapp.jobs:register")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's modules, as `python -m` would find them
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"--handlers {spec!r}: cannot import {module_name}: {exc}") from None
    found = getattr(module, attr, None)
    if not callable(found):
        raise UserError(f"--handlers {spec!r}: {module_name} has no function {attr!r}")
    func: Callable[[Scheduler], object] = found
    return func


def _unchecked() -> Callable[..., Awaitable[Any]]:
    """A stand-in handler whose payload is any JSON object, passed on as it is.

    The workers, which have the real handlers, validate it; this one never runs.
    """
    import pydantic

    class AnyPayload(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="allow")

    async def unchecked(payload: Any) -> Any:
        raise NotImplementedError("the command line runs no jobs")

    unchecked.__annotations__["payload"] = AnyPayload  # the object: a local class has no name
    return unchecked


def _one_line(text: str) -> str:
    """A multi-line message (pydantic's) as one line, as the command's errors are."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _status(status: JobStatus) -> str:
    return status.value


def _jsonable(value: Any) -> Any:
    import pydantic

    return pydantic.TypeAdapter(Any).dump_python(value, mode="json")


def _info_dict(info: JobInfo) -> dict[str, Any]:
    data = {f.name: getattr(info, f.name) for f in fields(info)}
    data["status"] = _status(info.status)
    jsonable: dict[str, Any] = _jsonable(data)
    return jsonable


def _print_info(info: JobInfo, as_json: bool) -> None:
    data = _info_dict(info)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    for key, value in data.items():
        if value is not None:
            print(f"{key + ':':<14} {value}")
