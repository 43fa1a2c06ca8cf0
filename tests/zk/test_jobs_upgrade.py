"""Jobs and outcomes written in the flat layout of before buckets are found and run.

Before buckets a pending job was ``<root>/jobs/<id>`` and an outcome
``<root>/results/<id>``.  A new assigner moves them into their buckets when
its term begins, and moves any flat job an older client submits during the
term (a rolling upgrade); a corrupt flat node stays where it is.
"""

from __future__ import annotations

import uuid

import anyio
import pytest

import aiocoord
from aiocoord.scheduler._ops import ensure_layout
from aiocoord.scheduler._records import ResultRecord, encode_job, encode_result
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually
from tests.zk._jobs_lab import LAYOUT, lab

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


def flat_id() -> str:
    return uuid.uuid4().hex  # the ids of before buckets


async def test_flat_jobs_and_results_are_moved_and_run(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    before, done, corrupt = flat_id(), flat_id(), flat_id()
    async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
        await ensure_layout(coord.client, LAYOUT)
        # What a scheduler of before buckets left: a pending job, an outcome, a corrupt node.
        await coord.client.create(f"{LAYOUT.jobs}/{before}", encode_job("step", {"key": "old"}))
        record = ResultRecord("step", True, value="earlier", worker="gone")
        await coord.client.create(f"{LAYOUT.results}/{done}", encode_result(record))
        await coord.client.create(f"{LAYOUT.jobs}/{corrupt}", b"\x80 not a job")

    async with lab(zk_server, zk_chroot) as it:
        await it.run_worker()
        with anyio.fail_after(30):
            it.gates["old"].set()
            assert await it.client.result(before) == "old"
            assert await it.client.result(done) == "earlier"
            # Submitted flat by an older client while this assigner's term lasts.
            during = flat_id()
            it.gates["during"].set()
            data = encode_job("step", {"key": "during"})
            await it.coord.client.create(f"{LAYOUT.jobs}/{during}", data)
            assert await it.client.result(during) == "during"
            # The corrupt node is left where it was; nothing flat remains besides it.
            flat = [name for name in await it.coord.client.children(LAYOUT.jobs) if "." not in name]
            assert flat == [corrupt]
            results = await it.coord.client.children(LAYOUT.results)
            assert all(len(name) == 2 for name in results)


async def test_a_flat_outcome_written_during_the_term_is_moved(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    """An older worker writes ``results/<id>`` while this assigner leads: it lands in its bucket.

    The assigner watches ``results/`` itself, not the results in their buckets:
    a flat outcome changes that folder's children, and a listing finds it.
    """
    async with lab(zk_server, zk_chroot) as it:
        await it.run_worker()
        with anyio.fail_after(30):
            job_id = flat_id()
            record = ResultRecord("step", True, value="late", worker="older")
            await it.coord.client.create(f"{LAYOUT.results}/{job_id}", encode_result(record))
            assert await it.client.result(job_id, not_submitted_yet=True) == "late"

            async def moved() -> bool:
                return all(len(n) == 2 for n in await it.coord.client.children(LAYOUT.results))

            await eventually(moved)
            assert await it.coord.client.exists(LAYOUT.result(job_id)) is not None
