"""A cron claim is a compare-and-set: of two leaders racing for one scheduled time, one wins.

docs/cron.md: "only one write can succeed on a version".  Two leaders at
once happen for a moment in every hand-over (a frozen leader waking up with
a record it read before its term ended).  Both read the job's record at one
version, both plan to claim the same due time, both write: exactly one
write may land, and only its firing may run.
"""

from __future__ import annotations

import time
from datetime import UTC

import anyio
import pytest

from aiocoord import Coordinator, Worker
from aiocoord.recipes.cron._plan import Me, Options, Write, plan
from aiocoord.recipes.cron._record import JobRecord, decode, encode
from aiocoord.recipes.cron._runner import Job, JobRunner
from aiocoord.recipes.cron._schedule import Every
from aiocoord.zk import Stat

pytestmark = pytest.mark.anyio


async def _nothing(firing: object) -> None:
    pass


def _runner(coord: Coordinator, path: str, worker: str) -> JobRunner:
    job = Job("tick", _nothing, Every(1.0), Options())
    return JobRunner(
        job,
        client=coord.client,
        path=path,
        tz=UTC,
        tz_name="UTC",
        tl=None,  # type: ignore[arg-type]  # only the record's reads and writes are used
        worker=Worker(version="1.0", id=worker),
        io_timeout=coord.session_timeout,
    )


async def test_two_leaders_claiming_one_scheduled_time_only_one_claim_lands(
    coordinator: Coordinator,
) -> None:
    path = "/cron/jobs/tick"
    now = time.time()
    await coordinator.client.create(
        path,
        encode(JobRecord(last=now - 1.5, schedule=Every(1.0).text, token=1)),
        make_parents=True,
    )
    node = await coordinator.client.get(path)
    record = decode(path, node.data)
    runners = {
        token: _runner(coordinator, path, f"w{token}") for token in (100, 200)
    }  # the old leader (100, woken up) and the new one (200)
    steps = {}
    for token in runners:
        step = plan(record, Every(1.0), now, Options(), Me(f"w{token}", "1.0", token))
        assert isinstance(step, Write) and step.run is not None
        steps[token] = step
    assert steps[100].run.at == steps[200].run.at  # type: ignore[union-attr]

    landed: dict[int, Stat | None] = {}

    async def claim(token: int) -> None:
        landed[token] = await runners[token]._cas(steps[token].record, node.stat.version)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for token in runners:
                tg.start_soon(claim, token)
    winners = [token for token, stat in landed.items() if stat is not None]
    assert len(winners) == 1, f"claims that landed on version {node.stat.version}: {winners}"
    after = decode(path, (await coordinator.client.get(path)).data)
    assert after.claim is not None and after.claim.token == winners[0]
