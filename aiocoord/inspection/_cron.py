"""A cron as a plain dict: per job its schedule, next firing, last outcome, leader.

Read through `aiocoord.recipes.cron.describe_cron`; a job record or a leader
node that does not decode is shown as invalid next to the others, never
fatal.  Times are shown in UTC (the job's time zone is shown with its
schedule).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..recipes.cron import CronJobView, CronView
from ..recipes.task_leadership import TaskLeadershipView
from ._info import Info

__all__ = ("cron_info", "workers_info")


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat(timespec="seconds")


def workers_info(view: TaskLeadershipView) -> list[Info]:
    """Task leadership's workers (invalid records with their reason), by id."""
    workers: dict[str, Info] = {
        w.id: {
            "id": w.id,
            "version": w.version,
            "host": w.host,
            "pid": w.pid,
            "started": _iso(datetime.fromtimestamp(w.started, UTC)),
        }
        for w in view.workers
    }
    workers |= {name: {"id": name, "error": e.reason} for name, e in view.invalid_workers.items()}
    return [workers[name] for name in sorted(workers)]


def _job(job: CronJobView, leader_error: str | None) -> Info:
    run, last, lead = job.running, job.last, job.leader
    leader: Info | None = None
    if leader_error is not None:
        leader = {"error": leader_error}
    elif lead is not None:
        leader = {"worker": lead.worker, "version": lead.version, "token": lead.token}
    return {
        "schedule": job.schedule,
        "timezone": job.timezone,
        "next": _iso(job.next_at),
        "handled_until": _iso(job.handled_until),
        "running": None
        if run is None
        else {
            "scheduled_at": _iso(run.scheduled_at),
            "worker": run.worker,
            "version": run.version,
            "token": run.token,
            "started": _iso(run.started_at),
            "attempt": run.attempt,
        },
        "last": None
        if last is None
        else {
            "scheduled_at": _iso(last.scheduled_at),
            "status": last.status,
            "attempt": last.attempt,
            "worker": last.worker,
            "version": last.version,
            "started": _iso(last.started_at),
            "ended": _iso(last.ended_at),
            "duration": last.duration,
            "error": last.error,
            "count": last.count,
        },
        "leader": leader,
    }


def cron_info(view: CronView) -> Info:
    """The ``--json`` shape of a cron."""
    bad_leaders = {task: e.reason for task, e in view.tasks.invalid_leaders.items()}
    jobs: dict[str, Info] = {
        name: _job(job, bad_leaders.get(name)) for name, job in view.jobs.items()
    }
    jobs |= {name: {"error": e.reason} for name, e in view.invalid_jobs.items()}
    return {
        "kind": "cron",
        "workers": workers_info(view.tasks),
        "jobs": {name: jobs[name] for name in sorted(jobs)},
    }
