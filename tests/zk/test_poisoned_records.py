"""One poisoned record among good ones touches only its own item, on a real server.

Regressions for records whose numbers or nesting once escaped the decoders as
`OverflowError` / `RecursionError` / `ValueError`: a worker node with
``"started": 10**400`` stopped task leadership on every worker, a poisoned
pending job crashed the scheduler's assigner over and over, and a lock's
``last_run.at`` of 1e20 made `once_per` raise after it had taken the lock.  Now
the worker is ignored (and listed as invalid), the job fails with a
``NodeDataError`` result, and the lock reports `NodeDataError` before writing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import pytest

import aiocoord
from aiocoord import (
    CasLock,
    Coordinator,
    JobFailed,
    NodeDataError,
    Worker,
    cas_lock,
    once_per,
    task_leadership,
)
from aiocoord.scheduler import Scheduler
from aiocoord.scheduler._layout import JobsLayout
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode
from aiocoord.zk.paths import join
from tests.zk.test_bad_input import unchanged

pytestmark = pytest.mark.anyio

HUGE = "1" + "0" * 400  # float() of it overflows
DEEP = "[" * 100_000 + "]" * 100_000  # json.loads of it overflows the stack


@pytest.fixture
async def raw(zk_server: ZooKeeperServer) -> AsyncIterator[Coordinator]:
    """A coordinator on the whole tree, writing what a foreign client would."""
    async with aiocoord.connect(zk_server.connect_string, session_timeout=4.0) as coord:
        yield coord


def _record(fields: dict[str, object], **poison: str) -> bytes:
    """`fields` as JSON, with each `poison` field's value spliced in as raw JSON text."""
    body = [f"{json.dumps(k)}:{json.dumps(v)}" for k, v in fields.items() if k not in poison]
    body += [f"{json.dumps(k)}:{text}" for k, text in poison.items()]
    return ("{" + ",".join(body) + "}").encode()


async def _echo(text: str) -> str:
    return text


async def test_a_poisoned_worker_record_is_ignored_by_task_leadership(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    workers = join(zk_chroot, "tasks", "workers")
    await raw.client.ensure_path(workers, mode=CreateMode.PERSISTENT)
    good = {"version": "9.0", "host": "h", "pid": 1, "started": 1}
    poisons = {
        "huge": {"started": HUGE},
        "far": {"started": "1e20"},  # no datetime holds it
        "deep": {"extra": DEEP},
        "nan": {"pid": "NaN"},
        "surrogate": {"host": '"\\udc80"'},
    }
    for name, poison in poisons.items():
        record = _record({"id": name, **good}, **poison)
        await raw.client.create(join(workers, name), record, mode=CreateMode.EPHEMERAL)
    me = Worker("1.0", id="me")
    with anyio.fail_after(20):
        async with task_leadership(
            coordinator, "/tasks", worker=me, tasks=["report"], settle=0.0
        ) as tl:
            async with tl.lead("report") as term:  # the newer, poisoned workers don't count
                assert term.worker_id == "me"
            assert sorted(tl.invalid_workers) == sorted(poisons)
            for name, error in tl.invalid_workers.items():
                assert error.path == join("/tasks", "workers", name)
            assert [w.id for w in await tl.workers()] == ["me"]


async def test_a_poisoned_job_fails_alone_and_the_assigner_carries_on(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    sched = Scheduler(coordinator, "/jobs")
    sched.job("echo")(_echo)
    root = join(zk_chroot, "jobs")
    for kind in ("jobs", "workers", "results"):
        await raw.client.ensure_path(join(root, kind), mode=CreateMode.PERSISTENT)
    job = {"v": 1, "name": "echo", "payload": {"text": "x"}, "submitted": 1}
    poisons = {
        "huge": _record(job, submitted=HUGE),
        "far": _record(job, submitted="-1e20"),
        "deep": _record(job, payload=DEEP),
        "inf": _record(job, payload='{"text": Infinity}'),
        "surrogate": _record(job, payload='{"text": "\\ud800"}'),
        "digits": _record(job, payload="9" * 5000),
    }
    layout = JobsLayout(root)
    for name, data in poisons.items():
        await raw.client.ensure_path(layout.job_bucket(name), mode=CreateMode.PERSISTENT)
        await raw.client.create(layout.job(name), data)
    bogus = {"v": 1, "id": "bogus", "capacity": 100, "jobs": ["echo"]}
    await raw.client.create(join(root, "workers", "bogus"), _record(bogus, jobs=DEEP))
    result = {"v": 1, "name": "echo", "worker": "w", "status": "done", "value": "x"}
    await raw.client.ensure_path(layout.result_bucket("poisoned"), mode=CreateMode.PERSISTENT)
    await raw.client.create(layout.result("poisoned"), _record(result, finished=HUGE))
    with anyio.fail_after(30):
        async with sched.worker(capacity=2) as worker:
            for name in poisons:
                with pytest.raises(JobFailed) as info:
                    await sched.result(name)
                assert info.value.type == "NodeDataError"
                assert await raw.client.exists(layout.job(name)) is None
            assert await sched.result(await sched.submit("echo", {"text": "ok"})) == "ok"
            assert worker.is_assigner
        with pytest.raises(NodeDataError) as bad:
            await sched.result("poisoned")
        assert bad.value.path == JobsLayout("/jobs").result("poisoned")


async def test_a_poisoned_lock_record_is_refused_before_acquiring(
    coordinator: Coordinator, raw: Coordinator, zk_chroot: str
) -> None:
    free = {"format": "aiocoord.cas-lock/1", "state": "free", "owner": "pod", "token": 3}
    run = '{"window": 0, "at": %s, "owner": "pod", "token": 3}'
    poisons = [
        _record(free, last_run=run % "1e20"),  # once_per converted it after taking the lock
        _record(free, last_run=run % HUGE),
        _record(free, lease_expires=HUGE),
        _record(free, token=HUGE * 10),
        _record(free, extra=DEEP),
        _record(free, format='"aiocoord.cas-lock/\u00b2"'),  # isdigit(), but no int()
    ]
    path = join(zk_chroot, "lock")
    await raw.client.create(path, b"", make_parents=True)
    for data in poisons:
        await raw.client.set(path, data)
        with anyio.fail_after(10):
            async with unchanged(raw, zk_chroot):
                lock = CasLock(coordinator, "/lock", owner="me", lease=5.0)
                for attempt in (lock.try_acquire, lock.acquire, lock.status):
                    with pytest.raises(NodeDataError) as info:
                        await attempt()
                    assert info.value.path == "/lock"
                with pytest.raises(NodeDataError):
                    async with once_per(coordinator, "/lock", 60.0, owner="me"):
                        pytest.fail("ran a window whose record is poisoned")
                with pytest.raises(NodeDataError):
                    async with cas_lock(coordinator, "/lock", owner="me", lease=5.0):
                        pytest.fail("held a lock whose record is poisoned")
