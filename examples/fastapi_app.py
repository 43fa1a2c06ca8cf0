"""A FastAPI service: a cron on one instance only, health and status routes, jobs over HTTP.

Every instance accepts jobs (``POST /jobs/report``, typed in ``/docs``) and
answers for them; the jobs run on worker processes, here one in-process.

Serve it (every instance, every ``uvicorn --workers N`` process, is a participant)::

    AIOCOORD_HOSTS=127.0.0.1:2181 uvicorn examples.fastapi_app:app --workers 4

or run this file to watch two instances side by side, in-process::

    python examples/fastapi_app.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI

import aiocoord
from aiocoord.cli import local_zookeeper
from aiocoord.integrations.fastapi import (
    coordinator,
    jobs_router,
    lifespan,
    require_leader,
    router,
)

CRON = "/examples/api/cron-leader"
JOBS = "/examples/api/jobs"


def register_jobs(sched: aiocoord.Scheduler) -> None:
    """The same jobs in the app (to validate and type them) and in the workers (to run them)."""

    @sched.job("report", timeout=10.0)
    async def report(region: str, days: int = 7) -> dict[str, Any]:
        """Build a sales report for a region."""
        return {"region": region, "days": days, "orders": 42 * days}


async def refresh_cache(term: aiocoord.LeadershipTerm) -> None:
    """The cron: runs only on the leader; cancelled if leadership is lost."""
    while True:
        print(f"  cron tick on the leader (token 0x{term.token:x})")
        await asyncio.sleep(0.5)


def create_app(settings: aiocoord.Settings | None = None, **options: Any) -> FastAPI:
    """The app; `settings` None reads AIOCOORD_* (as under uvicorn)."""
    coord = aiocoord.connect(settings)  # connected by the app's lifespan, not here
    sched = aiocoord.Scheduler(coord, JOBS)
    register_jobs(sched)
    app = FastAPI(lifespan=lifespan(coord, leader_tasks={CRON: refresh_cache}, **options))
    app.include_router(router)  # /coordination/health, /health/ready, /status
    app.include_router(jobs_router(sched))  # POST /jobs/report, GET /jobs/{id}, ...

    @app.post("/admin/rebuild", dependencies=[Depends(require_leader(CRON))])
    async def rebuild(
        coord: Annotated[aiocoord.Coordinator, Depends(coordinator)],
    ) -> dict[str, str]:
        stat = await coord.client.exists(CRON)  # anything that needs the coordinator
        return {"rebuilt": "yes", "latch_version": str(stat.cversion if stat else None)}

    return app


app = create_app()


async def main(settings: aiocoord.Settings) -> None:
    """Two instances of the app in this process: only one runs the cron; both take jobs."""
    async with asyncio.timeout(30):
        pod_a = create_app(settings, participant_id="pod-a")
        pod_b = create_app(settings, participant_id="pod-b")
        worker_coord = aiocoord.connect(settings)  # a worker process's own session
        worker = aiocoord.Scheduler(worker_coord, JOBS)
        register_jobs(worker)
        async with (
            worker_coord,
            worker.worker(capacity=4),
            pod_a.router.lifespan_context(pod_a),
            pod_b.router.lifespan_context(pod_b),
            httpx.AsyncClient(transport=httpx.ASGITransport(pod_a), base_url="http://a") as a,
            httpx.AsyncClient(transport=httpx.ASGITransport(pod_b), base_url="http://b") as b,
        ):
            await asyncio.sleep(1.2)  # a few cron ticks, all on the leader
            status = (await a.get("/coordination/status")).json()
            latch = status["latches"][0]
            # Redacted by default (no hosts, ids or tokens): lifespan(status_detail=True) adds them.
            print(
                f"leader of {CRON}: {latch['leader']}; participants: {latch['participant_count']}"
            )
            for name, client in (("pod-a", a), ("pod-b", b)):
                answer = await client.post("/admin/rebuild")
                print(f"POST /admin/rebuild on {name}: {answer.status_code} {answer.json()}")
            health = await b.get("/coordination/health/ready")
            print(f"GET /coordination/health/ready on pod-b: {health.status_code} {health.json()}")

            sent = await b.post("/jobs/report", json={"region": "eu"})
            print(
                f"POST /jobs/report on pod-b: {sent.status_code}, Location {sent.headers['location']}"
            )
            done = await a.get(f"{sent.headers['location']}/result", params={"wait": 10})
            print(
                f"GET {sent.headers['location']}/result on pod-a: {done.status_code} {done.json()}"
            )
            bad = await a.post("/jobs/report", json={"region": "eu", "days": "a week"})
            errors = [(e["loc"], e["msg"]) for e in bad.json()["detail"]]
            print(f"POST /jobs/report with a bad payload: {bad.status_code} {errors}")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
