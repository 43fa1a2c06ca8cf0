"""The job scheduler and `jobs_router` while ZooKeeper is away, and ids never submitted.

The app's coordinator reaches ZooKeeper through a door the test closes; the
worker runs on a coordinator of its own, straight to the server, so that a
worker's queue exists while the app is cut off.  Times are bounds with
generous margins.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import httpx
import pytest
from fastapi import FastAPI

import aiocoord
from aiocoord import ConnectionLostError, ConnectionState
from aiocoord.integrations.fastapi import jobs_router, lifespan
from aiocoord.scheduler import JobStatus, Scheduler
from aiocoord.testing import ZooKeeperServer
from tests.helpers import Door, recording
from tests.zk.test_jobs_http import ROOT, Gate, register

pytestmark = pytest.mark.anyio

REQUEST_TIMEOUT = 3.0


@pytest.fixture
def door(zk_server: ZooKeeperServer) -> Iterator[Door]:
    d = Door(zk_server)
    try:
        yield d
    finally:
        d.close()


@dataclass
class App:
    http: httpx.AsyncClient
    coord: aiocoord.Coordinator
    sched: Scheduler
    job_id: str


@asynccontextmanager
async def cut_off(door: Door, zk_server: ZooKeeperServer, zk_chroot: str) -> AsyncIterator[App]:
    """An app whose ZooKeeper is away (SUSPENDED), with one job submitted before, and a worker."""
    coord = aiocoord.connect(
        door.connect_string,
        namespace=zk_chroot,
        session_timeout=20.0,
        request_timeout=REQUEST_TIMEOUT,
    )
    sched = Scheduler(coord, ROOT)
    gate = Gate()
    register(sched, gate)
    app = FastAPI(lifespan=lifespan(coord))
    app.include_router(jobs_router(sched))
    async with (
        aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as worker_coord,
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://app") as http,
    ):
        worker_sched = Scheduler(worker_coord, ROOT)
        register(worker_sched, gate)
        async with worker_sched.worker(capacity=2):
            job_id = await sched.submit("gated", {})
            await gate.started.wait()  # a worker's queue holds it: the listing reads queues
            try:
                async with recording(coord) as rec:
                    door.close()
                    await rec.wait_for(ConnectionState.SUSPENDED, timeout=15)
                yield App(http, coord, sched, job_id)
            finally:
                door.open()
                gate.open.set()
                with anyio.fail_after(15):
                    await coord.wait_connected()


async def test_listing_while_zookeeper_is_away_raises_connection_lost_not_a_group(
    door: Door, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """`sched.jobs()` raised ``ExceptionGroup('unhandled errors in a TaskGroup')``; HTTP 500."""
    with anyio.fail_after(60):
        async with cut_off(door, zk_server, zk_chroot) as app:
            for status in (None, JobStatus.RUNNING):
                with pytest.raises(ConnectionLostError):
                    async for _ in app.sched.jobs(status=status):
                        pass
            with pytest.raises(ConnectionLostError):
                await app.sched.info(app.job_id)
            for query in ("", "?status=running", "?status=failed"):
                answer = await app.http.get(f"/jobs{query}")
                assert answer.status_code == 503, (query, answer.text)
                assert answer.headers["retry-after"] == "1"


async def test_every_jobs_route_answers_503_at_once_while_the_session_is_away(
    door: Door, zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """Each route waited the whole request timeout before its 503, though SUSPENDED was known."""
    with anyio.fail_after(60):
        async with cut_off(door, zk_server, zk_chroot) as app:
            for method, url in [
                ("POST", "/jobs/add"),
                ("GET", f"/jobs/{app.job_id}"),
                ("GET", f"/jobs/{app.job_id}/result?wait=5"),
                ("DELETE", f"/jobs/{app.job_id}"),
                ("GET", "/jobs"),
            ]:
                body = {"a": 1} if method == "POST" else None
                started = time.monotonic()
                answer = await app.http.request(method, url, json=body)
                took = time.monotonic() - started
                assert answer.status_code == 503, (method, url, answer.text)
                assert took < 0.5, (method, url, took)
                assert answer.headers["retry-after"] == "1"
                assert "SUSPENDED" in answer.json()["detail"]
