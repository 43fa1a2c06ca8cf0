"""Timeouts, retries with backoff, listing with pagination, and bad input, against a real server."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from datetime import datetime, timedelta

import anyio
import pytest

from aiocoord import Backoff, JobConflict, JobFailed, JobStatus, NoNodeError, Scheduler
from aiocoord.testing import ZooKeeperServer
from tests.helpers import bucketed_ids
from tests.zk._jobs_lab import LAYOUT, lab

pytestmark = pytest.mark.anyio

starts: defaultdict[str, list[float]] = defaultdict(list)  # key -> when each attempt began


@pytest.fixture(autouse=True)
def _fresh_starts() -> None:
    starts.clear()


def _register(sched: Scheduler) -> None:
    @sched.job("slow-once", timeout=0.3, retries=2, backoff=Backoff(initial=0.1, jitter=0.0))
    async def slow_once(key: str) -> str:
        starts[key].append(time.monotonic())
        if len(starts[key]) == 1:
            await anyio.sleep(30)  # past the timeout: cancelled, retried
        return f"{key} on attempt {len(starts[key])}"

    @sched.job(
        "flaky",
        retries=3,
        backoff=Backoff(initial=0.3, maximum=0.6, factor=2.0, jitter=0.0),
        retry_on=ConnectionError,
    )
    async def flaky(key: str, fail: int, other: bool = False) -> int:
        starts[key].append(time.monotonic())
        attempt = len(starts[key])
        if other:
            raise ValueError(f"not retried ({attempt})")
        if attempt <= fail:
            raise ConnectionError(f"attempt {attempt} failed")
        return attempt


async def test_a_timeout_is_a_failed_attempt_that_is_retried(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot, _register) as it:
            await it.run_worker()
            job_id = await it.client.submit("slow-once", {"key": "t1"})
            assert await it.client.result(job_id) == "t1 on attempt 2"
            info = await it.client.info(job_id)
            assert (info.status, info.attempts, info.error) == (JobStatus.DONE, 2, None)
            first, second = starts["t1"]
            assert second - first >= 0.3 + 0.1 - 0.05  # the timeout, then the backoff


async def test_retries_exhausted_fail_with_the_last_error(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot, _register) as it:
            await it.run_worker()
            job_id = await it.client.submit("flaky", {"key": "x", "fail": 10})
            with pytest.raises(JobFailed) as failed:
                await it.client.result(job_id)
            assert (failed.value.type, failed.value.message) == (
                "ConnectionError",
                "attempt 4 failed",
            )
            info = await it.client.info(job_id)
            assert (info.status, info.attempts) == (JobStatus.FAILED, 4)  # 1 + retries
            assert info.error == "ConnectionError: attempt 4 failed"
            # An error retry_on does not name fails at once.
            other = await it.client.submit("flaky", {"key": "y", "fail": 0, "other": True})
            with pytest.raises(JobFailed, match=r"not retried \(1\)"):
                await it.client.result(other)
            assert (await it.client.info(other)).attempts == 1
            assert len(starts["y"]) == 1


async def test_backoff_spaces_the_retries(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot, _register) as it:
            await it.run_worker()
            job_id = await it.client.submit("flaky", {"key": "b", "fail": 3})
            seen: list[JobStatus] = []
            async with anyio.create_task_group() as tg:

                async def watch() -> None:  # the job waits out each backoff as SCHEDULED
                    while True:
                        status = await it.client.status(job_id)
                        if not seen or seen[-1] is not status:
                            seen.append(status)
                        await anyio.sleep(0.02)

                tg.start_soon(watch)
                assert await it.client.result(job_id) == 4
                tg.cancel_scope.cancel()
            gaps = [b - a for a, b in zip(starts["b"], starts["b"][1:], strict=False)]
            # 0.3, 0.6, then capped at 0.6; no jitter.  Bounded above loosely (a loaded host).
            for gap, wanted in zip(gaps, [0.3, 0.6, 0.6], strict=True):
                assert wanted - 0.05 <= gap <= wanted + 1.5, gaps
            assert JobStatus.SCHEDULED in seen, seen


async def test_listing_pages_through_jobs_by_status(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(40):
        async with lab(zk_server, zk_chroot) as it:
            await it.run_worker()
            done, failed = [], []
            for i in range(12):
                it.gates[f"d{i:02}"].set()
                done.append(await it.client.submit("step", {"key": f"d{i:02}"}, job_id=f"d{i:02}"))
            for i in range(7):
                failed.append(await it.client.submit("boom", {"message": "m"}, job_id=f"f{i:02}"))
            running = await it.client.submit("step", {"key": "r"}, job_id="r")
            later = await it.client.submit("step", {"key": "s"}, job_id="s", delay=60)
            for job_id in done:
                await it.client.result(job_id)
            for job_id in failed:
                with pytest.raises(JobFailed):
                    await it.client.result(job_id)
            await it.reaches(running, JobStatus.RUNNING)
            everything = [info.id async for info in it.client.jobs()]
            assert everything == sorted([*done, *failed, running, later])
            pages: list[list[str]] = []
            after: str | None = None
            while True:
                page = [info.id async for info in it.client.jobs(limit=5, after=after)]
                if not page:
                    break
                pages.append(page)
                after = page[-1]
            assert [len(p) for p in pages] == [5, 5, 5, 5, 1]
            assert [i for p in pages for i in p] == everything
            got = [info async for info in it.client.jobs(status=JobStatus.FAILED, limit=4)]
            assert [i.id for i in got] == failed[:4]
            assert all(i.status is JobStatus.FAILED and i.error == "ValueError: m" for i in got)
            rest = [i.id async for i in it.client.jobs(JobStatus.FAILED, after=got[-1].id)]
            assert rest == failed[4:]
            assert [i.id async for i in it.client.jobs(JobStatus.RUNNING)] == [running]
            assert [i.id async for i in it.client.jobs(JobStatus.SCHEDULED)] == [later]
            assert [i.id async for i in it.client.jobs(JobStatus.CANCELLED)] == []
            with pytest.raises(ValueError, match="limit"):
                it.client.jobs(limit=0)
            with pytest.raises(ValueError, match="after"):
                it.client.jobs(after="a/b")
            with pytest.raises(TypeError, match="status"):
                it.client.jobs(status="failed")  # type: ignore[arg-type]
            it.gates["r"].set()


async def _ratio(x: float) -> float:
    return x


async def test_bad_input_is_refused_and_writes_nothing(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with lab(zk_server, zk_chroot) as it:
            sched = it.client
            sched.job("ratio")(_ratio)
            bad: list[tuple[object, type[Exception], str]] = [
                (lambda: sched.submit("nope", {}), ValueError, "name: no job 'nope'"),
                (lambda: sched.submit("step", {"key": 3.5}), ValueError, "key"),
                (lambda: sched.submit("step", {"kee": "a"}), ValueError, "kee"),
                (lambda: sched.submit("step", {"key": "a"}, delay=-1), ValueError, "delay"),
                (lambda: sched.submit("step", {"key": "a"}, delay=math.nan), ValueError, "delay"),
                (lambda: sched.submit("step", {"key": "a"}, delay=math.inf), ValueError, "delay"),
                (
                    lambda: sched.submit("step", {"key": "a"}, delay="1"),  # type: ignore[arg-type]
                    TypeError,
                    "delay",
                ),
                (
                    lambda: sched.submit("step", {"key": "a"}, run_at=datetime(2030, 1, 1)),
                    ValueError,
                    "run_at",
                ),
                (
                    lambda: sched.submit(
                        "step", {"key": "a"}, delay=1, run_at=datetime.now().astimezone()
                    ),
                    ValueError,
                    "delay and run_at",
                ),
                (lambda: sched.submit("step", {"key": "a"}, job_id="a/b"), ValueError, "job_id"),
                (lambda: sched.submit("ratio", {"x": math.nan}), ValueError, "^payload: "),
            ]
            for call, error, match in bad:
                with pytest.raises(error, match=match):
                    await call()  # type: ignore[operator]
            for kwargs, match in [
                ({"timeout": -1.0}, "timeout"),
                ({"timeout": math.nan}, "timeout"),
                ({"retries": -1}, "retries"),
                ({"max_deliveries": 0}, "max_deliveries"),
                ({"backoff": 1.0}, "backoff"),
            ]:
                with pytest.raises((TypeError, ValueError), match=match):
                    sched.job("other", **kwargs)  # type: ignore[arg-type]
            assert "other" not in sched.job_names
            schema = sched.payload_schema("step")
            assert schema["properties"]["key"]["type"] == "string"
            assert schema["required"] == ["key"]
            assert sched.result_schema("boom")["type"] == "integer"
            with pytest.raises(KeyError):
                sched.payload_schema("nope")
            assert await bucketed_ids(it.coord.client, LAYOUT.jobs) == []
            assert await bucketed_ids(it.coord.client, LAYOUT.results) == []
            # The same id with another payload is a conflict; with the same one, a no-op.
            when = datetime.now().astimezone() + timedelta(minutes=5)
            await sched.submit("step", {"key": "a"}, job_id="same", run_at=when)
            assert await sched.submit("step", {"key": "a"}, job_id="same") == "same"
            with pytest.raises(JobConflict, match="same") as conflict:
                await sched.submit("step", {"key": "b"}, job_id="same")
            assert isinstance(conflict.value, ValueError)
            with pytest.raises(JobConflict):
                await sched.submit("boom", {"message": "a"}, job_id="same")
            assert await bucketed_ids(it.coord.client, LAYOUT.jobs) == ["same"]
            assert (await sched.info("same")).status is JobStatus.SCHEDULED
            with pytest.raises(NoNodeError):
                await sched.info("unknown")
