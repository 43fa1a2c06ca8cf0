"""The job system against a real server: every status, cancellation in each state and in a race.

See `tests.zk._jobs_lab` for the set-up (an assigner-only desk worker, a
runner worker whose handlers wait on gates, a client that submits).
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime

import anyio
import pytest

import aiocoord
from aiocoord import JobCancelled, JobFailed, JobStatus, NoNodeError
from aiocoord.scheduler._records import decode_job, encode_job_record
from aiocoord.testing import ZooKeeperServer
from tests.helpers import bucketed_ids
from tests.zk._jobs_lab import LAYOUT, ROOT, Lab, fake_worker, lab

pytestmark = pytest.mark.anyio


async def test_a_job_goes_through_every_status(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot) as it:
            before = datetime.now(UTC)
            job_id = await it.client.submit("step", {"key": "a"}, job_id="a", delay=0.8)
            info = await it.client.info(job_id)
            assert info.status is JobStatus.SCHEDULED
            assert info.run_at is not None and info.run_at > before
            assert (info.attempts, info.worker, info.started_at, info.error) == (
                0,
                None,
                None,
                None,
            )
            # Due, but no worker has a handler for it yet: pending.
            await it.reaches(job_id, JobStatus.PENDING)
            assert it.started == []
            await it.run_worker()
            await it.until(lambda: it.started == ["a"])
            await it.reaches(job_id, JobStatus.RUNNING)
            running = await it.client.info(job_id)
            assert running.worker is not None and running.worker.startswith("runner-")
            assert running.attempts == 1 and running.started_at is not None
            it.gates["a"].set()
            assert await it.client.result(job_id) == "a"
            done = await it.client.info(job_id)
            assert done.status is JobStatus.DONE
            assert done.worker == running.worker and done.attempts == 1
            assert done.submitted_at is not None and done.finished_at is not None
            assert before <= done.submitted_at <= done.started_at <= done.finished_at  # type: ignore[operator]
            assert done.run_at == info.run_at
            # Failed: the handler raised.
            failed = await it.client.submit("boom", {"message": "no"})
            with pytest.raises(JobFailed, match="no"):
                await it.client.result(failed)
            bad = await it.client.info(failed)
            assert (bad.status, bad.error) == (JobStatus.FAILED, "ValueError: no")
            # Assigned: given to a worker that has not started it (a worker that never runs).
            await fake_worker(it.coord, "idle", frozenset({"held"}))
            it.client.job("held")(_held)
            held = await it.client.submit("held", {})
            await it.reaches(held, JobStatus.ASSIGNED)
            assert (await it.client.info(held)).worker == "idle"


async def _held() -> None:
    return None


async def test_cancel_in_each_state(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    with anyio.fail_after(40):
        async with lab(zk_server, zk_chroot) as it:
            # Pending (no worker for it yet) and scheduled: never run.
            pending = await it.client.submit("step", {"key": "p"}, job_id="p")
            scheduled = await it.client.submit("step", {"key": "s"}, job_id="s", delay=1.0)
            assert await it.client.status(scheduled) is JobStatus.SCHEDULED
            assert await it.client.cancel(pending) is JobStatus.CANCELLED
            assert await it.client.cancel(scheduled) is JobStatus.CANCELLED
            assert await it.client.cancel(pending) is JobStatus.CANCELLED  # idempotent
            for job_id in (pending, scheduled):
                with pytest.raises(JobCancelled) as info:
                    await it.client.result(job_id)
                assert info.value.job_id == job_id
                assert (await it.client.info(job_id)).status is JobStatus.CANCELLED
            # Assigned to a worker that never starts it.
            await fake_worker(it.coord, "idle", frozenset({"held"}))
            it.client.job("held")(_held)
            held = await it.client.submit("held", {}, job_id="h")
            await it.reaches(held, JobStatus.ASSIGNED)
            assert await it.client.cancel(held) is JobStatus.CANCELLED
            assert await it.coord.client.exists(LAYOUT.assignment("idle", held)) is None
            # Running: the handler is cancelled, the worker goes on.
            await it.run_worker()
            running = await it.client.submit("step", {"key": "r"}, job_id="r")
            await it.until(lambda: "r" in it.started)
            await it.reaches(running, JobStatus.RUNNING)
            assert await it.client.cancel(running) is JobStatus.CANCELLED
            await it.until(lambda: "r" in it.cancelled)
            with pytest.raises(JobCancelled):
                await it.client.result(running)
            # Finished: a no-op returning the final status.
            it.gates["d"].set()
            done = await it.client.submit("step", {"key": "d"}, job_id="d")
            assert await it.client.result(done) == "d"
            assert await it.client.cancel(done) is JobStatus.DONE
            assert await it.client.result(done) == "d"
            failed = await it.client.submit("boom", {"message": "x"})
            with pytest.raises(JobFailed):
                await it.client.result(failed)
            assert await it.client.cancel(failed) is JobStatus.FAILED
            with pytest.raises(NoNodeError):
                await it.client.cancel("never-submitted")
            # Give the scheduled one's time a chance to pass: it still never runs.
            with anyio.move_on_after(1.2):
                await it.until(lambda: "s" in it.started or "p" in it.started)
            assert sorted(it.started) == ["d", "r"]
            assert await _queued(it) == []


async def _queued(it: Lab) -> list[str]:
    """Job ids still in ``jobs/`` or a worker's queue."""
    client = it.coord.client
    found = await bucketed_ids(client, LAYOUT.jobs)
    for queue in await client.children(LAYOUT.assignments):
        found += await client.children(LAYOUT.queue(queue))
    return found


async def test_cancel_racing_completion_ends_in_one_status(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """The handler returns while the cancel is on its way: every reader sees one final status.

    The gate opens from at once to a few milliseconds into the cancel, so
    runs end either way (both are seen on a quiet machine); whichever wins,
    both readers, `result` and a second cancel agree, and nothing runs twice.
    """
    outcomes: list[JobStatus] = []
    with anyio.fail_after(90):
        async with lab(zk_server, zk_chroot) as it:
            await it.run_worker()
            async with aiocoord.connect(
                zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
            ) as other:
                reader = aiocoord.Scheduler(other, ROOT)
                it.register(reader)
                for i in range(25):
                    key = f"race-{i}"
                    job_id = await it.client.submit("step", {"key": key}, job_id=key)
                    await it.until(lambda key=key: key in it.started)  # type: ignore[misc]
                    answers: list[JobStatus] = []

                    async def cancel(
                        job_id: str = job_id, answers: list[JobStatus] = answers
                    ) -> None:
                        answers.append(await it.client.cancel(job_id))

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cancel)
                        # From at once to past the cancel's reads: either may come first.
                        await anyio.sleep((i % 9) * 0.0008)
                        it.gates[key].set()
                    seen = {await it.client.status(job_id), await reader.status(job_id)}
                    assert len(seen) == 1, (key, seen)
                    final = seen.pop()
                    assert final in (JobStatus.DONE, JobStatus.CANCELLED), final
                    assert answers == [final]
                    for sched in (it.client, reader):
                        if final is JobStatus.DONE:
                            assert await sched.result(job_id) == key
                        else:
                            with pytest.raises(JobCancelled):
                                await sched.result(job_id)
                    assert await it.client.cancel(job_id) is final  # and it stays so
                    outcomes.append(final)
            assert await _queued(it) == []
            assert len(outcomes) == 25
            assert it.started == [f"race-{i}" for i in range(25)]  # none ran twice


async def test_a_job_cancelled_while_scheduled_stays_cancelled_after_its_time(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    with anyio.fail_after(20):
        async with lab(zk_server, zk_chroot) as it:
            await it.run_worker()
            it.gates["late"].set()
            it.gates["marker"].set()
            late = await it.client.submit("step", {"key": "late"}, delay=0.5)
            marker = await it.client.submit("step", {"key": "marker"}, delay=0.7)
            assert await it.client.cancel(late) is JobStatus.CANCELLED
            started = time.monotonic()
            assert await it.client.result(marker) == "marker"
            assert time.monotonic() - started >= 0.4  # the delay held it back
            assert it.started == ["marker"]


async def test_describe_and_inspect_show_the_new_statuses(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    from aiocoord.cli.jobs import render_scheduler
    from aiocoord.inspection import scheduler_info
    from aiocoord.scheduler import describe_scheduler

    with anyio.fail_after(20):
        async with lab(zk_server, zk_chroot) as it:
            await it.run_worker()
            later = await it.client.submit("step", {"key": "later"}, job_id="later", delay=60)
            running = await it.client.submit("step", {"key": "r"}, job_id="r")
            gone = await it.client.submit("step", {"key": "c"}, job_id="c", delay=60)
            assert await it.client.cancel(gone) is JobStatus.CANCELLED
            await it.reaches(running, JobStatus.RUNNING)
            view = await describe_scheduler(it.coord, ROOT)
            assert [(j.id, j.status) for j in view.pending] == [(later, JobStatus.SCHEDULED)]
            assert view.running == frozenset({running})
            assert (view.results.cancelled, view.results.failed, view.results.done) == (1, 0, 0)
            info = await scheduler_info(it.coord, ROOT)
            assert info["pending"] == [{"id": later, "name": "step", "status": "scheduled"}]
            assert info["running"] == [running]
            assert info["results"]["cancelled"] == 1
            text = "\n".join(render_scheduler(info, "", ROOT))
            assert "0 pending, 1 scheduled, 1 assigned (1 running)" in text
            assert "cancelled 1" in text
            it.gates["r"].set()


async def test_a_dead_workers_jobs_go_back_to_pending_or_fail_as_poison(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """ASSIGNED -> PENDING when its worker dies; RUNNING counts a delivery, up to poison."""
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot) as it:
            it.client.job("held")(_held)
            it.client.job("fragile", max_deliveries=2)(_held)
            zk = it.coord.client
            for round_ in range(2):
                worker = f"doomed-{round_}"
                await fake_worker(it.coord, worker, frozenset({"held", "fragile"}))
                if round_ == 0:
                    waiting = await it.client.submit("held", {}, job_id="waiting")
                    fragile = await it.client.submit("fragile", {}, job_id="fragile")
                await it.reaches(waiting, JobStatus.ASSIGNED)
                await it.reaches(fragile, JobStatus.ASSIGNED)
                # The fake worker starts `fragile` (as a worker marks it RUNNING), then dies.
                path = LAYOUT.assignment(worker, fragile)
                job = decode_job(path, (await zk.get(path)).data)
                started = replace(job, attempts=job.attempts + 1, started=time.time())
                await zk.set(path, encode_job_record(started))
                assert await it.client.status(fragile) is JobStatus.RUNNING
                await zk.delete(LAYOUT.worker(worker))  # its ephemeral node: it died
                await it.reaches(waiting, JobStatus.PENDING)
                if round_ == 0:
                    await it.reaches(fragile, JobStatus.PENDING)  # one delivery of two
                    assert (await it.client.info(fragile)).attempts == 1
            with pytest.raises(JobFailed) as failed:
                await it.client.result(fragile)
            assert failed.value.type == "PoisonJob"
            info = await it.client.info(fragile)
            assert (info.status, info.attempts) == (JobStatus.FAILED, 2)
            assert info.error is not None and "max_deliveries=2" in info.error
            assert await it.client.status(waiting) is JobStatus.PENDING  # never started: no count
            assert await it.client.cancel(waiting) is JobStatus.CANCELLED


async def test_cancel_of_a_running_job_submitted_again_cancels_the_run(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    # The same id submitted again while it runs waits in jobs/ (the idempotent retry of a
    # submit): cancelling the job must still cancel the run, not only that waiting copy.
    with anyio.fail_after(30):
        async with lab(zk_server, zk_chroot) as it:
            await it.run_worker()
            job_id = await it.client.submit("step", {"key": "x"}, job_id="x")
            await it.until(lambda: "x" in it.started)
            await it.reaches(job_id, JobStatus.RUNNING)
            assert await it.client.submit("step", {"key": "x"}, job_id="x") == "x"
            assert await it.coord.client.exists(LAYOUT.job("x")) is not None
            assert await it.client.cancel(job_id) is JobStatus.CANCELLED
            await it.until(lambda: "x" in it.cancelled, timeout=5.0)
            with pytest.raises(JobCancelled):
                await it.client.result(job_id)
            assert (await it.client.info(job_id)).status is JobStatus.CANCELLED
            await it.until(lambda: it.started == ["x"])
            assert await _queued(it) == []
