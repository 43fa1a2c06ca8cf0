"""`jobs_router` end to end over a real ZooKeeper: the job scheduler's HTTP API.

The app is a client only (its lifespan connects the scheduler's coordinator;
it runs no worker), served in-process through httpx's ASGI transport; the
worker runs on a coordinator of its own, as another process would.  Bodies
are built from the app's ``/openapi.json``, as ``/docs`` builds its forms.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pydantic
import pytest
from fastapi import FastAPI

import aiocoord
from aiocoord.integrations.fastapi import jobs_router, lifespan
from aiocoord.scheduler import Scheduler
from aiocoord.scheduler._layout import JobsLayout
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually
from tests.zk.test_watch_removal import server_watches, settled

ROOT = "/jobs"


class Order(pydantic.BaseModel):
    sku: str
    quantity: int = pydantic.Field(gt=0)


class Gate:
    """Lets the test decide when the ``gated`` job finishes."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.open = anyio.Event()


def register(sched: Scheduler, gate: Gate) -> None:
    """The same jobs in the app and in the worker, as separate processes would have."""

    @sched.job("add")
    async def add(a: int, b: int = 0) -> int:
        """Add two numbers."""
        return a + b

    @sched.job("order.total")
    async def total(order: Order) -> dict[str, Any]:
        return {"sku": order.sku, "quantity": order.quantity}

    @sched.job("boom")
    async def boom(reason: str) -> None:
        raise RuntimeError(f"boom: {reason}")

    @sched.job("gated")
    async def gated() -> str:
        gate.started.set()
        await gate.open.wait()
        return "opened"


@dataclass
class Service:
    http: httpx.AsyncClient
    coord: aiocoord.Coordinator
    sched: Scheduler
    gate: Gate


@asynccontextmanager
async def service(
    zk_server: ZooKeeperServer, zk_chroot: str, *, worker: bool = True
) -> AsyncIterator[Service]:
    gate = Gate()
    hosts = zk_server.connect_string
    coord = aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0)
    sched = Scheduler(coord, ROOT)
    register(sched, gate)
    app = FastAPI(lifespan=lifespan(coord))
    app.include_router(jobs_router(sched))
    async with (
        aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as worker_coord,
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://app") as http,
    ):
        worker_sched = Scheduler(worker_coord, ROOT)
        register(worker_sched, gate)
        if worker:
            async with worker_sched.worker(capacity=4):
                yield Service(http, coord, sched, gate)
        else:
            yield Service(http, coord, sched, gate)


def example_of(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """A body for a request schema, as a person filling in ``/docs``'s form would write it."""
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    samples = {"integer": 2, "string": "sku-1", "number": 1.5, "boolean": True}
    return {
        name: samples[prop["type"]]
        for name, prop in schema["properties"].items()
        if name in schema.get("required", [])
    }


# --- submit through the schema, long-poll the result ------------------------------------------


@pytest.mark.anyio
async def test_submit_with_the_openapi_schema_and_wait_for_the_result(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot) as svc:
            spec = (await svc.http.get("/openapi.json")).json()
            components = spec["components"]["schemas"]
            for name in ("add", "order.total", "boom", "gated"):
                assert f"/jobs/{name}" in spec["paths"], name
            add = spec["paths"]["/jobs/add"]["post"]
            assert add["description"] == "Add two numbers."
            add_body = add["requestBody"]["content"]["application/json"]["schema"]
            add_schema = components[add_body["$ref"].rsplit("/", 1)[-1]]
            assert add_schema["required"] == ["a"]
            assert add_schema["properties"]["a"]["type"] == "integer"
            assert add_schema["properties"]["b"]["default"] == 0
            assert add_schema["additionalProperties"] is False
            order_body = spec["paths"]["/jobs/order.total"]["post"]["requestBody"]
            assert order_body["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Order"
            }
            query = {p["name"] for p in add["parameters"]}
            assert query == {"job_id", "delay", "run_at", "priority"}

            body = example_of(add_body, components)
            assert body == {"a": 2}
            sent = await svc.http.post("/jobs/add", json=body)
            assert sent.status_code == 202, sent.text
            job_id = sent.json()["id"]
            assert sent.headers["location"] == f"/jobs/{job_id}"
            assert sent.json() == {"id": job_id, "name": "add", "location": f"/jobs/{job_id}"}
            done = await svc.http.get(f"/jobs/{job_id}/result", params={"wait": 10})
            assert done.status_code == 200, done.text
            assert done.json() == {"id": job_id, "status": "done", "result": 2}

            info = (await svc.http.get(sent.headers["location"])).json()
            assert info["id"] == job_id and info["name"] == "add"
            assert info["status"] == "done" and info["attempts"] == 1
            assert info["worker"] and info["finished_at"] and info["error"] is None

            order = example_of(order_body["content"]["application/json"]["schema"], components)
            sent = await svc.http.post("/jobs/order.total", json=order)
            assert sent.status_code == 202, sent.text
            done = await svc.http.get(f"/jobs/{sent.json()['id']}/result", params={"wait": 10})
            assert done.json()["result"] == {"sku": "sku-1", "quantity": 2}


@pytest.mark.anyio
async def test_long_poll_answers_202_until_done_and_leaves_no_watch(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot) as svc:
            sent = await svc.http.post("/jobs/gated", json={}, params={"job_id": "g-1"})
            assert sent.status_code == 202
            await svc.gate.started.wait()
            waiting = await svc.http.get("/jobs/g-1/result", params={"wait": 0.3})
            assert waiting.status_code == 202
            assert waiting.json()["status"] == "running"
            assert waiting.headers["retry-after"] == "1"
            client = svc.coord.client
            await settled(client)
            result_path = client._session.server_path(JobsLayout(ROOT).result("g-1"))
            assert not client._session.watches.watched(result_path)
            assert result_path not in server_watches(zk_server, svc.coord.session_id)

            async with anyio.create_task_group() as tg:
                answers: list[httpx.Response] = []

                async def poll() -> None:
                    answers.append(await svc.http.get("/jobs/g-1/result", params={"wait": 20}))

                tg.start_soon(poll)

                async def polling() -> bool:
                    return client._session.watches.watched(result_path)

                await eventually(polling)  # the poll is waiting on the result: finish the job
                svc.gate.open.set()
            assert answers[0].status_code == 200
            assert answers[0].json()["result"] == "opened"


@pytest.mark.anyio
async def test_a_job_without_required_parameters_takes_no_body(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot) as svc:
            spec = (await svc.http.get("/openapi.json")).json()
            assert not spec["paths"]["/jobs/gated"]["post"]["requestBody"].get("required")
            sent = await svc.http.post("/jobs/gated", params={"job_id": "bare"})
            assert sent.status_code == 202, sent.text
            svc.gate.open.set()
            done = await svc.http.get("/jobs/bare/result", params={"wait": 10})
            assert done.status_code == 200 and done.json()["result"] == "opened", done.text
            refused = await svc.http.post("/jobs/gated", json={"extra": 1})
            assert refused.status_code == 422 and "extra" in refused.text


# --- errors: 422, 404, 409 ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_bad_payloads_and_arguments_answer_422_naming_the_field_and_write_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot, worker=False) as svc:
            cases: list[tuple[str, Any, dict[str, Any], list[Any]]] = [
                ("add", {"a": "two"}, {}, ["body", "a"]),
                ("add", {"b": 1}, {}, ["body", "a"]),
                ("add", {"a": 1, "c": 3}, {}, ["body", "c"]),
                ("add", [1, 2], {}, ["body"]),
                ("order.total", {"sku": "x", "quantity": 0}, {}, ["body", "quantity"]),
                ("add", {"a": 1}, {"delay": -1}, ["query", "delay"]),
                ("add", {"a": 1}, {"delay": "nan"}, ["query", "delay"]),
                (
                    "add",
                    {"a": 1},
                    {"delay": 1, "run_at": "2030-01-01T00:00:00Z"},
                    ["query", "delay"],
                ),
                ("add", {"a": 1}, {"job_id": "/bad id"}, ["query", "job_id"]),
            ]
            for name, body, params, loc in cases:
                answer = await svc.http.post(f"/jobs/{name}", json=body, params=params)
                assert answer.status_code == 422, (name, body, params, answer.text)
                errors = answer.json()["detail"]
                assert any(e["loc"][: len(loc)] == loc for e in errors), (body, params, errors)
            listing = (await svc.http.get("/jobs")).json()
            assert listing == {"jobs": [], "next": None}


@pytest.mark.anyio
async def test_unknown_names_and_ids_answer_404(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot, worker=False) as svc:
            unknown = await svc.http.post("/jobs/resize", json={"a": 1})
            assert unknown.status_code == 404
            assert "'resize'" in unknown.json()["detail"]
            assert "'add'" in unknown.json()["detail"]  # names the registered ones
            for method, path in (
                ("GET", "/jobs/nope"),
                ("GET", "/jobs/nope/result"),
                ("DELETE", "/jobs/nope"),
            ):
                answer = await svc.http.request(method, path)
                assert answer.status_code == 404, (method, path, answer.text)
                assert "nope" in answer.json()["detail"]
            too_long = await svc.http.get("/jobs/nope/result", params={"wait": 61})
            assert too_long.status_code == 422

            @svc.sched.job("late")
            async def late(n: int) -> int:
                return n

            # Registered after the router was built: accepted, checked by the scheduler.
            assert "/jobs/late" not in (await svc.http.get("/openapi.json")).json()["paths"]
            accepted = await svc.http.post("/jobs/late", json={"n": 1})
            assert accepted.status_code == 202, accepted.text
            refused = await svc.http.post("/jobs/late", json={"n": "one"})
            assert refused.status_code == 422
            assert refused.json()["detail"][0]["loc"] == ["body"]
            assert "payload for job 'late' is invalid" in refused.json()["detail"][0]["msg"]


@pytest.mark.anyio
async def test_an_unreadable_result_answers_500_naming_the_node_for_that_job_only(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot) as svc:
            ids: list[str] = []
            for a in (1, 2):
                posted = await svc.http.post("/jobs/add", json={"a": a})
                assert posted.status_code == 202, posted.text
                ids.append(posted.json()["id"])
            for job_id in ids:
                done = await svc.http.get(f"/jobs/{job_id}/result", params={"wait": 20})
                assert done.status_code == 200, done.text
            bad, good = ids
            path = JobsLayout(ROOT).result(bad)
            await svc.coord.client.set(path, b"\xffnot a result")
            for route in (f"/jobs/{bad}", f"/jobs/{bad}/result"):
                answer = await svc.http.get(route)
                assert answer.status_code == 500, (route, answer.text)
                detail = answer.json()["detail"]
                assert detail["error"] == "unreadable"
                assert detail["path"] == path
                assert isinstance(detail["reason"], str) and detail["reason"]
            # The other job is untouched by its neighbour's corrupt node.
            assert (await svc.http.get(f"/jobs/{good}")).json()["status"] == "done"
            assert (await svc.http.get(f"/jobs/{good}/result")).json()["result"] == 2


@pytest.mark.anyio
async def test_the_scheduler_hands_out_each_registered_handler() -> None:
    sched = Scheduler(aiocoord.connect("127.0.0.1:1"), ROOT)  # never connected: nothing is read
    register(sched, Gate())
    assert {name: sched.handler(name).__name__ for name in sched.job_names} == {
        "add": "add",
        "order.total": "total",
        "boom": "boom",
        "gated": "gated",
    }
    with pytest.raises(KeyError):
        sched.handler("nope")


@pytest.mark.anyio
async def test_same_id_same_payload_is_idempotent_a_different_one_is_409(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot, worker=False) as svc:
            params: dict[str, str | int] = {"job_id": "once", "delay": 60}
            first = await svc.http.post("/jobs/add", json={"a": 1}, params=params)
            again = await svc.http.post("/jobs/add", json={"a": 1}, params=params)
            assert first.status_code == again.status_code == 202
            assert first.json()["id"] == again.json()["id"] == "once"
            other = await svc.http.post("/jobs/add", json={"a": 2}, params=params)
            assert other.status_code == 409, other.text
            assert other.json()["detail"]["id"] == "once"
            renamed = await svc.http.post("/jobs/boom", json={"reason": "x"}, params=params)
            assert renamed.status_code == 409, renamed.text


@pytest.mark.anyio
async def test_failed_and_cancelled_jobs_answer_409_with_the_error(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot) as svc:
            sent = await svc.http.post(
                "/jobs/boom", json={"reason": "disk"}, params={"job_id": "b"}
            )
            assert sent.status_code == 202
            failed = await svc.http.get("/jobs/b/result", params={"wait": 10})
            assert failed.status_code == 409
            assert failed.json() == {
                "id": "b",
                "status": "failed",
                "type": "RuntimeError",
                "message": "boom: disk",
            }
            assert (await svc.http.get("/jobs/b")).json()["status"] == "failed"

            later = await svc.http.post("/jobs/add", json={"a": 1}, params={"delay": 60})
            job_id = later.json()["id"]
            assert (await svc.http.get(f"/jobs/{job_id}")).json()["status"] == "scheduled"
            cancelled = await svc.http.delete(f"/jobs/{job_id}")
            assert cancelled.status_code == 200
            assert cancelled.json() == {"id": job_id, "status": "cancelled"}
            again = await svc.http.delete(f"/jobs/{job_id}")  # idempotent
            assert again.json() == {"id": job_id, "status": "cancelled"}
            outcome = await svc.http.get(f"/jobs/{job_id}/result", params={"wait": 5})
            assert outcome.status_code == 409
            assert outcome.json()["status"] == "cancelled"
            assert outcome.json()["type"] == "JobCancelled"
            finished = await svc.http.delete("/jobs/b")  # already finished: its status
            assert finished.json() == {"id": "b", "status": "failed"}


# --- listing -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_listing_pages_through_every_job_once(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot, worker=False) as svc:
            ids = [f"j{i}" for i in range(5)]
            for job_id in ids:
                sent = await svc.http.post(
                    "/jobs/add", json={"a": 1}, params={"job_id": job_id, "delay": 60}
                )
                assert sent.status_code == 202
            await svc.http.delete("/jobs/j3")
            seen: list[str] = []
            pages = 0
            after: str | None = None
            while True:
                params: dict[str, Any] = {"limit": 2}
                if after is not None:
                    params["after"] = after
                page = (await svc.http.get("/jobs", params=params)).json()
                pages += 1
                seen += [job["id"] for job in page["jobs"]]
                assert len(page["jobs"]) <= 2
                after = page["next"]
                if after is None:
                    break
            assert seen == ids
            assert pages == 3
            scheduled = (await svc.http.get("/jobs", params={"status": "scheduled"})).json()
            assert [j["id"] for j in scheduled["jobs"]] == ["j0", "j1", "j2", "j4"]
            cancelled = (await svc.http.get("/jobs", params={"status": "cancelled"})).json()
            assert [j["id"] for j in cancelled["jobs"]] == ["j3"]
            bad = await svc.http.get("/jobs", params={"status": "lost"})
            assert bad.status_code == 422
            assert (await svc.http.get("/jobs", params={"limit": 0})).status_code == 422
            bad_after = await svc.http.get("/jobs", params={"after": "/x"})
            assert bad_after.status_code == 422
            assert bad_after.json()["detail"][0]["loc"] == ["query", "after"]


# --- without the lifespan ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_scheduler_whose_coordinator_is_not_running_answers_503(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    coord = aiocoord.connect(zk_server.connect_string, namespace=zk_chroot)
    sched = Scheduler(coord, ROOT)
    register(sched, Gate())
    app = FastAPI()  # no lifespan: nothing connects the coordinator
    app.include_router(jobs_router(sched, prefix="/api/jobs"))
    with anyio.fail_after(10):
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app), base_url="http://app"
        ) as http:
            answer = await http.post("/api/jobs/add", json={"a": 1})
            assert answer.status_code == 503
            assert "lifespan(coord)" in answer.json()["detail"]
            assert answer.headers["retry-after"] == "1"
            assert (await http.get("/api/jobs/x")).status_code == 503


def test_bad_router_arguments_fail_at_once() -> None:
    with pytest.raises(TypeError, match=r"sched must be an aiocoord\.Scheduler"):
        jobs_router(object())  # type: ignore[arg-type]
    coord = aiocoord.connect("127.0.0.1:2181")
    with pytest.raises(ValueError, match="max_wait"):
        jobs_router(Scheduler(coord, ROOT), max_wait=float("inf"))
    with pytest.raises(TypeError, match="lifespan\\(coord\\)"):
        lifespan(coord, session_timeout=5.0)


def test_bad_prefix_and_tags_name_the_argument() -> None:
    sched = Scheduler(aiocoord.connect("127.0.0.1:2181"), ROOT)
    for prefix in ("jobs", "/jobs/", "", "/"):
        with pytest.raises(ValueError, match="prefix"):
            jobs_router(sched, prefix=prefix)
    with pytest.raises(TypeError, match="prefix"):
        jobs_router(sched, prefix=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tags"):
        jobs_router(sched, tags="jobs")
    assert jobs_router(sched, prefix="/api/v1/jobs", tags=["work"]).tags == ["work"]


@pytest.mark.anyio
async def test_a_422_does_not_echo_a_huge_body_back(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """FastAPI's 422 echoed each refused input whole: a 20 MB body came back as 20 MB."""
    with anyio.fail_after(30):
        async with service(zk_server, zk_chroot, worker=False) as svc:
            huge = "x" * 5_000_000
            for body in ({"a": huge}, {"order": {"sku": huge}}, {"a": 1, "c": huge}):
                name = "order.total" if "order" in body else "add"
                answer = await svc.http.post(f"/jobs/{name}", json=body)
                assert answer.status_code == 422, answer.text[:300]
                assert len(answer.content) < 5_000, len(answer.content)
                [error, *_] = answer.json()["detail"]
                assert error["loc"][0] == "body" and error["msg"]


# --- retry, server-sent events, priority ---------------------------------------------------------


@pytest.mark.anyio
async def test_retry_and_the_event_stream_over_http(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with service(zk_server, zk_chroot) as svc:
            sent = await svc.http.post("/jobs/boom", json={"reason": "x"}, params={"priority": 3})
            assert sent.status_code == 202, sent.text
            job_id = sent.json()["id"]
            failed = await svc.http.get(f"/jobs/{job_id}/result", params={"wait": 10})
            assert failed.status_code == 409 and failed.json()["status"] == "failed"
            again = await svc.http.post(f"/jobs/{job_id}/retry")
            assert again.status_code == 202, again.text
            assert again.json()["id"] == job_id
            failed = await svc.http.get(f"/jobs/{job_id}/result", params={"wait": 10})
            assert failed.status_code == 409
            assert (await svc.http.get(f"/jobs/{job_id}")).json()["attempts"] == 2
            done = await svc.http.post("/jobs/add", json={"a": 1, "b": 2})
            done_id = done.json()["id"]
            assert (await svc.http.get(f"/jobs/{done_id}/result", params={"wait": 10})).json()[
                "result"
            ] == 3
            refused = await svc.http.post(f"/jobs/{done_id}/retry")
            assert refused.status_code == 409 and "DONE" in refused.json()["detail"]["reason"]
            assert (await svc.http.post("/jobs/nope/retry")).status_code == 404
            assert (await svc.http.get("/jobs/nope/events")).status_code == 404

            # The stream of a gated job: each status, ending with the final one.
            gated = (await svc.http.post("/jobs/gated")).json()["id"]
            answers: list[httpx.Response] = []

            async def follow() -> None:
                answers.append(await svc.http.get(f"/jobs/{gated}/events"))

            async with anyio.create_task_group() as tg:
                tg.start_soon(follow)
                await svc.gate.started.wait()
                svc.gate.open.set()
            (answer,) = answers
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            events = [block for block in answer.text.split("\n\n") if block.strip()]
            statuses = []
            for block in events:
                kind, data = block.split("\n")
                assert kind == "event: status"
                view = json.loads(data.removeprefix("data: "))
                assert view["id"] == gated
                statuses.append(view["status"])
            assert statuses[-1] == "done"
            assert len(statuses) == len(set(statuses))
