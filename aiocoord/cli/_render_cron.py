"""The cron's part of ``aiocoord inspect`` as text: `aiocoord.inspection.cron_info`, rendered.

Times are as the dict holds them (UTC); the job's time zone is shown with its schedule.
"""

from __future__ import annotations

from ..inspection import Info

__all__ = ("render_cron", "worker_lines")


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
