"""The cron's part of ``aiocoord inspect``: per job its schedule, next firing, last outcome, leader.

Read through `aiocoord.recipes.cron.describe_cron`; a job record or a leader
node that does not decode is shown as invalid next to the others, never
fatal.  Times are shown in UTC (the job's time zone is shown with its
schedule).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..recipes.cron import CronJobView, CronView
from ..recipes.task_leadership import TaskLeadershipView

__all__ = ("cron_info", "render_cron", "worker_lines", "workers_info")

Info = dict[str, Any]


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


# --- text ------------------------------------------------------------------------------------


def _last(last: Info) -> str:
    status = last["status"]
    if status == "missed":
        return f"last: missed x{last['count']}, the latest at {last['scheduled_at']}"
    text = f"last: {status}, scheduled {last['scheduled_at']}"
    if last["worker"] is not None:
        text += f", by {last['worker']} ({last['version']})"
    if last["duration"] is not None:
        text += f", took {last['duration']:.3f}s"
    if last["attempt"] > 1:
        text += f", attempt {last['attempt']}"
    if last["error"]:
        text += f": {last['error']}"
    return text


def _leader(leader: Info | None) -> str:
    if leader is None:
        return "nobody leads"
    if "error" in leader:
        return f"invalid leader record: {leader['error']}"
    return f"-> {leader['worker']} ({leader['version']}), token 0x{leader['token']:x}"


def worker_lines(workers: list[Info], pad: str) -> list[str]:
    """Text lines for `workers_info`'s result (a cron's, or task leadership's, workers)."""
    lines: list[str] = []
    for w in workers:
        if "error" in w:
            lines.append(f"{pad}  worker {w['id']}: invalid record: {w['error']}")
        else:
            lines.append(
                f"{pad}  worker {w['id']:<20} version {w['version']:<10} {w['host']} pid {w['pid']}"
            )
    return lines


def render_cron(info: Info, pad: str, name: str) -> list[str]:
    """Text lines for `cron_info`'s result."""
    workers, jobs = info["workers"], info["jobs"]
    lines = [f"{pad}{name}  [cron] {len(workers)} workers, {len(jobs)} jobs"]
    lines += worker_lines(workers, pad)
    for job_name, job in jobs.items():
        if "error" in job:
            lines.append(f"{pad}  job {job_name}: invalid record: {job['error']}")
            continue
        if job["schedule"] is None:
            lines.append(f"{pad}  job {job_name:<20} (no record yet) {_leader(job['leader'])}")
            continue
        zone = f" [{job['timezone']}]" if job["timezone"] else ""
        lines.append(
            f"{pad}  job {job_name:<20} {job['schedule']}{zone}  next {job['next'] or '-'}  "
            f"{_leader(job['leader'])}"
        )
        run = job["running"]
        if run is not None:
            lines.append(
                f"{pad}    running: scheduled {run['scheduled_at']}, by {run['worker']} "
                f"({run['version']}) since {run['started']}, attempt {run['attempt']}"
            )
        if job["last"] is not None:
            lines.append(f"{pad}    {_last(job['last'])}")
    return lines
