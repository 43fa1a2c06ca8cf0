"""A read-only look at a cron: each job's schedule, next firing, last outcome, leader.

For tools that watch a cluster rather than take part (``aiocoord inspect``,
dashboards, the FastAPI status route): `describe_cron` reads the cron's root
(task leadership's ``workers/`` and ``leaders/``, and each ``jobs/<job>``
record) and returns a `CronView`; `is_cron` tells from a listing of children
whether a node may be a cron's root.  Nothing here writes or watches, and
nothing here needs the jobs' code: the schedule and time zone come from each
job's record.  A record that does not decode is reported next to the others
(`NodeDataError`), never raised.

    view = await describe_cron(coord, "/app/cron")
    for job in view.jobs.values():
        job.schedule, job.next_at, job.last and job.last.status, job.leader and job.leader.worker
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from ...errors import ConfigError, NodeDataError, NoNodeError
from ...session import Coordinator
from ...zk import ZkClient
from ...zk.paths import join
from .._describe import client_of, read_children
from ..task_leadership import TaskLeader, TaskLeadershipView, describe_task_leadership
from ._firing import FiringOutcome, outcome_of
from ._record import JobRecord, decode
from ._schedule import resolve_timezone, schedule_from_text

__all__ = ("CronJobView", "CronRun", "CronView", "describe_cron", "is_cron", "read_cron_job")


@dataclass(frozen=True, slots=True)
class CronRun:
    """The firing a job's record says is running: its `scheduled_at`, who claimed it
    (`worker`, `version`, under `token`), when it started and which `attempt` it is.

    A claim whose runner is gone stays until the next leader records it interrupted."""

    scheduled_at: datetime
    worker: str
    version: str
    token: int
    started_at: datetime
    attempt: int
    catch_up: bool


@dataclass(frozen=True, slots=True)
class CronJobView:
    """One job of a cron, as its record and its leader node say.

    `schedule` and `timezone` are as the job's leader recorded them (None: no
    record yet, the job was never led); `next_at` is the first scheduled time
    after the last one handled (in the past when no worker got to it yet;
    None when the schedule never fires again or cannot be read here);
    `handled_until` is the last scheduled time claimed or given up; `running`
    the claimed firing (or None); `last` the newest outcome of its history;
    `leader` who leads the job now (None: nobody).  Times are aware datetimes
    in the job's time zone (UTC when it cannot be resolved here).
    """

    name: str
    schedule: str | None
    timezone: str | None
    next_at: datetime | None
    handled_until: datetime | None
    running: CronRun | None
    last: FiringOutcome | None
    leader: TaskLeader | None


@dataclass(frozen=True, slots=True)
class CronView:
    """A cron under `path`.

    `jobs` maps each job (with a record, or a leader node) to its
    `CronJobView`; records that do not decode are in `invalid_jobs` (by job
    name), leader nodes that do not decode in ``tasks.invalid_leaders``.  `tasks` is the
    task leadership underneath: the workers (with their versions) and the
    leader nodes, invalid ones included.
    """

    path: str
    jobs: Mapping[str, CronJobView]
    invalid_jobs: Mapping[str, NodeDataError]
    tasks: TaskLeadershipView

    @property
    def recognised(self) -> bool:
        """Whether ``jobs/`` holds cron records: at least one readable, or none at all.

        A root with ``workers``, ``leaders`` and a ``jobs`` node of something
        else (a scheduler rooted at ``<root>/jobs``, say) is task leadership
        with a neighbour, not a cron.
        """
        return not self.invalid_jobs or any(j.schedule is not None for j in self.jobs.values())


def is_cron(children: Iterable[str]) -> bool:
    """Whether a node with these children may be the root of a cron (see `CronView.recognised`)."""
    return {"workers", "leaders", "jobs"} <= set(children)


def _zone(name: str) -> tzinfo:
    try:
        return resolve_timezone(name or None)
    except ConfigError:  # a zone this machine does not know: show times in UTC
        return UTC


def _time(t: float, tz: tzinfo) -> datetime:
    return datetime.fromtimestamp(t, tz)


def _job_view(name: str, record: JobRecord | None, leader: TaskLeader | None) -> CronJobView:
    """The `CronJobView` of job `name` from its decoded record (None: no record yet)."""
    if record is None:
        return CronJobView(name, None, None, None, None, None, None, leader)
    tz = _zone(record.timezone)
    next_at: datetime | None = None
    try:
        after = schedule_from_text(record.schedule, tz).after(record.last)
        next_at = None if after is None else _time(after, tz)
    except ConfigError:  # written by a newer aiocoord, or by hand: the rest still shows
        pass
    except (OverflowError, ValueError):  # the next time is past year 9999: it never comes
        pass
    claim = record.claim
    running = None
    if claim is not None:
        running = CronRun(
            _time(claim.at, tz),
            claim.worker,
            claim.version,
            claim.token,
            _time(claim.started, tz),
            claim.attempt,
            claim.catch_up,
        )
    last = outcome_of(name, record.history[-1], tz) if record.history else None
    return CronJobView(
        name,
        record.schedule,
        record.timezone,
        next_at,
        _time(record.last, tz),
        running,
        last,
        leader,
    )


async def read_cron_job(
    target: Coordinator | ZkClient, root: str, name: str, *, leader: TaskLeader | None = None
) -> CronJobView | None:
    """Job `name` of the cron at `root` as its record says (None: no record).

    `leader` is given by a caller that read it already.  Raises
    `NodeDataError` if the record is not one this aiocoord reads.
    """
    path = join(root, "jobs", name)
    try:
        node = await client_of(target).get(path)
    except NoNodeError:
        return None
    return _job_view(name, decode(path, node.data), leader)


async def describe_cron(target: Coordinator | ZkClient, root: str) -> CronView:
    """Every job record, worker and leader node under `root` (one read per node, in turn).

    A missing `root` has none; nodes that vanish while read are left out.
    """
    client = client_of(target)
    tasks = await describe_task_leadership(client, root)
    jobs, invalid = await read_children(
        client,
        join(root, "jobs"),
        lambda name: read_cron_job(client, root, name, leader=tasks.leaders.get(name)),
    )
    # Led (or with a leader node that does not decode), but no record written yet.
    for name in [*tasks.leaders, *tasks.invalid_leaders]:
        if name not in jobs and name not in invalid:
            jobs[name] = _job_view(name, None, tasks.leaders.get(name))
    return CronView(root, dict(sorted(jobs.items())), invalid, tasks)
