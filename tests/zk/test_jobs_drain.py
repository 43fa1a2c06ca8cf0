"""Leaving a worker with a job running: the default drain fits a Kubernetes grace period, and
the drain says what it waits for."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

import anyio
import pytest

import aiocoord
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer

DOCS = Path(__file__).parents[2] / "docs"


def test_the_default_drain_timeout_stays_under_kubernetes_grace_period_and_is_documented() -> None:
    """It was 30 s, Kubernetes' default grace period itself: pods were SIGKILLed mid-drain."""
    default = inspect.signature(Scheduler.worker).parameters["drain_timeout"].default
    assert default <= 25.0
    operations = (DOCS / "operations.md").read_text()
    assert "terminationGracePeriodSeconds" in operations
    assert f"`drain_timeout` (**{default:g} s** by default)" in operations


@pytest.mark.anyio
async def test_a_drain_logs_the_jobs_it_waits_for(
    zk_server: ZooKeeperServer, zk_chroot: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aiocoord")
    started = anyio.Event()
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            sched = Scheduler(coord, "/jobs")

            @sched.job("slow")
            async def slow() -> None:
                started.set()
                await anyio.sleep(0.5)

            async with sched.worker(worker_id="w-1", drain_timeout=5.0):
                job_id = await sched.submit("slow", {})
                await started.wait()
            assert await sched.result(job_id) is None  # finished within the drain
    said = [r for r in caplog.records if "draining" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "waiting up to 5s for 1 running job(s)" in said[0].getMessage()
    assert job_id in said[0].getMessage()
