"""What tools see of a cron and a mutex on a real server: describe, inspect, outcomes, metrics.

Each view is checked against what the recipe itself says (the cron's outcome
stream and history, the mutex's holder token), and corrupt nodes are shown as
invalid next to the others, never raised.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

import aiocoord
from aiocoord import Coordinator, Cron, Firing, Worker
from aiocoord.cli.inspect import render
from aiocoord.inspection import inspect_path
from aiocoord.metrics import Metrics
from aiocoord.recipes.cron import FiringOutcome, describe_cron, is_cron, read_cron_job
from aiocoord.recipes.cron._record import JobRecord, encode
from aiocoord.recipes.mutex import describe_mutex, is_mutex
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

ROOT = "/app/cron"
STEP = 0.25


def _walk(info: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {info["path"]: info}
    for child in info.get("children", []):
        found |= _walk(child)
    return found


async def _until_seen(
    outcomes: AsyncIterator[FiringOutcome], seen: list[FiringOutcome], enough: Counter[str]
) -> None:
    """Read `outcomes` into `seen` until it holds `enough` of each (job/status)."""
    with anyio.fail_after(15):
        async for outcome in outcomes:
            seen.append(outcome)
            got = Counter(f"{o.job}/{o.status}" for o in seen)
            if all(got[key] >= n for key, n in enough.items()):
                return


def _cron(coord: Coordinator) -> Cron:
    cron = Cron(coord, ROOT, worker=Worker("1.0", id="w1"), grace=3.0)

    @cron.job(every=timedelta(seconds=STEP))
    async def tick(firing: Firing) -> None:
        pass

    @cron.job(every=timedelta(seconds=STEP))
    async def boom(firing: Firing) -> None:
        raise ValueError("bad")

    @cron.job(every=timedelta(seconds=1))
    async def late(firing: Firing) -> None:
        pass

    return cron


async def _late_record(coord: Coordinator) -> None:
    """Job `late` last handled ten seconds ago: its first leader gives six or seven times up
    (those more than `grace`, 3 s, late)."""
    record = JobRecord(last=time.time() - 10.0, schedule="every 0:00:01", timezone="UTC")
    await coord.client.create(f"{ROOT}/jobs/late", encode(record), make_parents=True)


async def test_outcomes_stream_and_metrics_count_firings_failures_and_misses(
    coordinator: Coordinator,
) -> None:
    await _late_record(coordinator)
    cron = _cron(coordinator)
    metrics = Metrics(CollectorRegistry())
    outcomes = cron.outcomes()  # subscribed now, before anything fires
    seen: list[FiringOutcome] = []
    async with metrics.watch_cron(cron):
        async with cron:
            enough = Counter({"tick/ok": 3, "boom/failed": 2, "late/ok": 1})
            await _until_seen(outcomes, seen, enough)
        with anyio.fail_after(5):
            seen += [o async for o in outcomes]  # the rest; the stream ends with the cron
        await anyio.wait_all_tasks_blocked()  # the watcher has read what we read

        def sample(name: str, **labels: str) -> float:
            value = metrics.registry.get_sample_value(name, {"path": ROOT, **labels})
            return 0.0 if value is None else value

        counts = Counter(f"{o.job}/{o.status}" for o in seen)
        misses = Counter[str]()
        for o in seen:
            if o.status == "missed":
                misses[o.job] += o.count
        for job in ("tick", "boom", "late"):
            for outcome in ("ok", "failed", "interrupted"):
                got = sample("aiocoord_cron_firings_total", job=job, outcome=outcome)
                assert got == counts[f"{job}/{outcome}"], (job, outcome)
            ended = counts[f"{job}/ok"] + counts[f"{job}/failed"]
            assert sample("aiocoord_cron_firing_duration_seconds_count", job=job) == ended
            assert sample("aiocoord_cron_missed_total", job=job) == misses[job]
        assert counts["boom/ok"] == 0 and counts["boom/failed"] >= 2
        # Ten seconds behind, one firing a second, 3 s of grace: most were given up.
        assert misses["late"] >= 5
        failed = next(o for o in seen if o.status == "failed")
        assert failed.error == "ValueError: bad" and failed.worker == "w1"
        assert failed.duration is not None and failed.duration >= 0
    # The history says the same as the stream.
    history = {(o.job, o.scheduled_at, o.status) for o in await cron.history("tick")}
    assert {(o.job, o.scheduled_at, o.status) for o in seen if o.job == "tick"} <= history


async def test_inspect_shows_each_job_and_corrupt_records_as_invalid(
    coordinator: Coordinator,
) -> None:
    coord = coordinator
    await _late_record(coord)
    await coord.client.create(f"{ROOT}/jobs/broken", b"not json {")
    await coord.client.create(f"{ROOT}/jobs/future", b'{"format":"aiocoord.cron/9","last":1}')
    cron = _cron(coord)
    outcomes = cron.outcomes()
    seen: list[FiringOutcome] = []
    async with cron:
        await _until_seen(outcomes, seen, Counter({"tick/ok": 1, "boom/failed": 1}))
        info = await inspect_path(coord, "/app")
        view = await describe_cron(coord, ROOT)
        leader = view.tasks.leaders["tick"]
        text = "\n".join(render(info))
    node = _walk(info)[ROOT]
    assert node["kind"] == "cron"
    assert [(w["id"], w["version"]) for w in node["workers"]] == [("w1", "1.0")]
    jobs = node["jobs"]
    assert sorted(jobs) == ["boom", "broken", "future", "late", "tick"]
    tick = jobs["tick"]
    assert tick["schedule"] == "every 0:00:00.250000" and tick["timezone"] == "UTC"
    assert tick["leader"] == {"worker": "w1", "version": "1.0", "token": leader.token}
    assert tick["last"]["status"] == "ok" and tick["last"]["worker"] == "w1"
    job = view.jobs["tick"]
    assert job.next_at is not None and job.handled_until is not None
    assert (job.next_at - job.handled_until).total_seconds() == pytest.approx(STEP)
    assert tick["next"] == job.next_at.isoformat(timespec="seconds")
    assert jobs["boom"]["last"]["status"] == "failed"
    assert jobs["boom"]["last"]["error"] == "ValueError: bad"
    assert jobs["broken"]["error"] == view.invalid_jobs["broken"].reason
    assert "newer" in jobs["future"]["error"]
    assert set(view.invalid_jobs) == {"broken", "future"} and view.recognised
    assert "[cron] 1 workers, 5 jobs" in text
    assert "job tick" in text and "every 0:00:00.250000 [UTC]" in text and "-> w1 (1.0)" in text
    assert "last: failed" in text and "ValueError: bad" in text
    assert "job broken: invalid record" in text and "job future: invalid record" in text
    # Closed: the records stay, nobody leads.
    after = await read_cron_job(coord, ROOT, "tick")
    assert after is not None and after.leader is None and after.last is not None


async def test_a_task_leadership_root_with_a_scheduler_under_jobs_is_not_a_cron(
    coordinator: Coordinator,
) -> None:
    client = coordinator.client
    for path in ("/app2/workers", "/app2/leaders", "/app2/jobs/jobs", "/app2/jobs/assignments"):
        await client.create(path, b"", make_parents=True)
    assert is_cron(await client.children("/app2"))
    assert not (await describe_cron(coordinator, "/app2")).recognised
    info = await inspect_path(coordinator, "/app2")
    assert info["kind"] == "task_leadership"


async def test_a_corrupt_leader_node_is_shown_next_to_the_job(coordinator: Coordinator) -> None:
    client = coordinator.client
    await _late_record(coordinator)
    await client.create(f"{ROOT}/workers", b"")
    await client.create(f"{ROOT}/leaders/ghost", b"\xff\xfe", make_parents=True)
    await client.create(f"{ROOT}/workers/w9", b"{}")
    info = await inspect_path(coordinator, ROOT)
    assert info["kind"] == "cron"
    assert info["jobs"]["late"]["leader"] is None and info["jobs"]["late"]["last"] is None
    ghost = info["jobs"]["ghost"]
    assert ghost["schedule"] is None and "error" in ghost["leader"]
    assert info["workers"][0]["id"] == "w9" and "error" in info["workers"][0]
    text = "\n".join(render(info))
    assert "job late" in text and "nobody leads" in text
    assert "job ghost" in text and "invalid leader record" in text
    assert "worker w9: invalid record" in text


def test_recognisers() -> None:
    assert is_cron(["jobs", "leaders", "workers", "extra"])
    assert not is_cron(["leaders", "workers"])
    assert is_mutex(["_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-0000000003"])
    assert is_mutex(["x-lock-0000000001"])
    assert not is_mutex([])
    assert not is_mutex(["x-lock-0000000001", "config"])
    assert not is_mutex(["x-latch-0000000001"])


async def test_inspect_and_describe_a_mutex_holder_waiters_and_a_corrupt_node(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    hosts = zk_server.connect_string
    async with (
        aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as one,
        aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as two,
        aiocoord.mutex(one, "/app/lock", participant_id="pod-1") as held,
        anyio.create_task_group() as tg,
    ):
        waiter = aiocoord.Mutex(two, "/app/lock", participant_id="pod-2")
        tg.start_soon(waiter.acquire)
        with anyio.fail_after(10):
            while True:
                names, watch = await one.client.children_watch("/app/lock")
                if len(names) == 2:
                    one.client.remove_watch(watch)
                    break
                await watch.wait()
        await one.client.create(
            "/app/lock/x-lock-", b"\xff\xfe", mode=CreateMode.EPHEMERAL_SEQUENTIAL
        )
        sids = [one.session_id, two.session_id, one.session_id]
        token = held.token
        view = await describe_mutex(two, "/app/lock")
        info = await inspect_path(one, "/app")
        assert (await describe_mutex(one, "/app/none")).holder is None
        tg.cancel_scope.cancel()
    assert view.holder is not None and view.holder.id == "pod-1"
    assert view.holder_token == token
    assert [c.id for c in view.waiters] == ["pod-2", None]
    assert view.waiters[1].invalid is not None and "UTF-8" in view.waiters[1].invalid
    assert [c.session for c in view.contenders] == sids
    node = _walk(info)["/app/lock"]
    assert node["kind"] == "mutex" and node["holder"] == "pod-1" and node["token"] == token
    assert [c["id"] for c in node["contenders"]] == ["pod-1", "pod-2", None]
    assert "UTF-8" in node["contenders"][2]["error"]
    text = "\n".join(render(node))
    assert "[mutex] held by pod-1" in text and "2 waiting" in text and "invalid id" in text


async def test_a_record_whose_next_firing_is_past_year_9999_shows_no_next_time(
    coordinator: Coordinator,
) -> None:
    # Valid records (times inside what a record holds) whose next time is beyond what a
    # datetime holds: that job shows no next firing; the other jobs and inspect still show.
    late = 253_370_764_800.0 - 300 * 86400  # early in 9998: no 29 February before 10000
    leap = JobRecord(last=late, schedule="0 0 29 2 *", timezone="UTC")
    yearly = JobRecord(last=253_391_760_000.0, schedule="every 365 days, 0:00:00", timezone="UTC")
    client = coordinator.client
    await client.create(f"{ROOT}/jobs/leap", encode(leap), make_parents=True)
    await client.create(f"{ROOT}/jobs/yearly", encode(yearly))
    await _late_record(coordinator)
    await client.create(f"{ROOT}/workers", b"")
    await client.create(f"{ROOT}/leaders", b"")
    with anyio.fail_after(10):
        view = await describe_cron(coordinator, ROOT)
        info = await inspect_path(coordinator, ROOT)
    assert sorted(view.jobs) == ["late", "leap", "yearly"]
    assert view.jobs["leap"].next_at is None and view.jobs["yearly"].next_at is None
    assert view.jobs["leap"].handled_until is not None
    assert view.jobs["late"].next_at is not None
    assert info["jobs"]["leap"]["next"] is None and info["jobs"]["late"]["next"] is not None
    assert "job leap" in "\n".join(render(info))


async def test_inspect_recognises_a_cron_whose_workers_have_all_stopped(
    coordinator: Coordinator,
) -> None:
    """Once the last worker left, ``inspect`` showed a plain node and its records as raw JSON."""
    coord = coordinator
    cron = _cron(coord)
    outcomes = cron.outcomes()
    async with cron:
        await _until_seen(outcomes, [], Counter({"tick/ok": 1}))

    async def reaped() -> bool:  # the empty containers go; the job records stay
        children = await coord.client.children(ROOT)
        return "jobs" in children and "workers" not in children

    await eventually(reaped, timeout=20, every=0.2)
    with anyio.fail_after(10):
        info = await inspect_path(coord, "/app", depth=3)
    found = _walk(info)
    assert found[ROOT]["kind"] == "cron", found[ROOT]
    assert found[ROOT]["jobs"]["tick"]["schedule"] == "every 0:00:00.250000"
    lines = render(info)
    assert any(line.strip().startswith("job tick") and "next" in line for line in lines), lines
    # A scheduler's `jobs` and a plain node with an empty `jobs` child are no cron.
    await coord.client.create("/other/jobs", make_parents=True)
    assert (await inspect_path(coord, "/other"))["kind"] == "node"
