"""Cluster-wide cron against a real server: firing and history, missed firings, bad input.

The exactly-once scenario across a rolling upgrade and a session expiry has
its own file (tests/zk/test_cron_exactly_once.py).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import ConfigError, Coordinator, Cron, Firing, Worker
from aiocoord.recipes.cron import FiringOutcome
from aiocoord.testing import ZooKeeperServer
from tests.helpers import eventually

pytestmark = pytest.mark.anyio

ROOT = "/app/cron"


class Seen:
    """What the jobs' functions saw, and a way to wait for a condition on it."""

    def __init__(self) -> None:
        self.firings: list[Firing] = []
        self._changed = anyio.Event()

    def add(self, firing: Firing) -> None:
        self.firings.append(firing)
        self._changed.set()
        self._changed = anyio.Event()

    async def add_async(self, firing: Firing) -> None:
        self.add(firing)

    def of(self, job: str) -> list[Firing]:
        return [f for f in self.firings if f.job == job]

    async def until(self, check: Callable[[], bool], timeout: float = 10.0) -> None:
        with anyio.fail_after(timeout):
            while not check():
                await self._changed.wait()


def covered(history: list[FiringOutcome], step: float) -> list[tuple[float, str]]:
    """Every scheduled time the history stands for, in order, with its status.

    A "missed" entry stands for `count` times ending at its own; an interrupted
    firing run again appears twice (its two attempts).
    """
    out: list[tuple[float, str]] = []
    for entry in history:
        t = entry.scheduled_at.timestamp()
        for i in range(entry.count - 1, -1, -1):
            out.append((round(t - i * step, 6), entry.status))
    return out


def consecutive(times: list[float], step: float) -> bool:
    return all(math.isclose(b - a, step, abs_tol=1e-6) for a, b in itertools.pairwise(times))


async def test_jobs_fire_on_time_and_their_outcomes_are_kept(coordinator: Coordinator) -> None:
    seen = Seen()
    cron = Cron(
        coordinator, ROOT, worker=Worker("1.0", id="w1"), timezone="Europe/Berlin", history=5
    )

    @cron.job(every=timedelta(seconds=0.25))
    async def quick(firing: Firing) -> None:
        seen.add(firing)

    @cron.job("* * * * * *", name="each-second")
    async def second(firing: Firing) -> None:
        seen.add(firing)
        raise RuntimeError(f"boom at {firing.scheduled_at:%S}")

    assert cron.jobs == ("quick", "each-second")
    with anyio.fail_after(20):
        async with cron:
            assert "<Cron /app/cron worker=w1 jobs=2" in repr(cron)
            await seen.until(
                lambda: len(seen.of("quick")) >= 8 and len(seen.of("each-second")) >= 2
            )
            assert cron.leading == {"quick", "each-second"}
        assert cron.leading == frozenset()
        quick_history = await cron.history("quick")
        failed = await cron.history("each-second")
    firings = seen.of("quick")
    times = [f.scheduled_at.timestamp() for f in firings]
    assert consecutive(times, 0.25) and all(t * 4 == int(t * 4) for t in times)
    first = firings[0]
    assert str(first.scheduled_at.tzinfo) == "Europe/Berlin"
    assert first.attempt == 1 and not first.catch_up and first.token > 0
    assert len(quick_history) == 5  # bounded
    assert [h.scheduled_at for h in quick_history] == [f.scheduled_at for f in firings][-5:]
    for outcome in quick_history:
        assert (outcome.status, outcome.worker, outcome.version) == ("ok", "w1", "1.0")
        assert outcome.token == first.token and outcome.duration is not None
        assert outcome.started_at is not None and outcome.started_at >= outcome.scheduled_at
    assert failed and all(h.status == "failed" for h in failed)
    assert failed[-1].error is not None and failed[-1].error.startswith("RuntimeError: boom at")
    assert await cron.history("never-registered") == []


async def test_missed_firings_follow_each_policy(
    zk_server: ZooKeeperServer, zk_chroot: str
) -> None:
    step = 0.5
    seen = Seen()

    def make(worker: str) -> Cron:
        cron = Cron(coord, ROOT, worker=Worker("1.0", id=worker), grace=1.0, history=100)
        for missed in ("skip", "run_once", "run_all"):

            async def job(firing: Firing) -> None:
                seen.add(firing)

            cron.job(every=step, name=missed, missed=missed, max_catch_up=2)(job)
        return cron

    with anyio.fail_after(40):
        async with aiocoord.connect(
            zk_server.connect_string, namespace=zk_chroot, session_timeout=4.0
        ) as coord:
            async with make("before"):
                await seen.until(lambda: all(len(seen.of(j)) >= 2 for j in ("skip", "run_all")))
            stopped = len(seen.firings)
            await anyio.sleep(4.2)  # nobody runs the jobs for 8 firings; 6 of them past the grace
            restart = time.time()
            async with make("after") as cron:
                await seen.until(
                    lambda: all(
                        any(f.scheduled_at.timestamp() > restart + 1 for f in seen.of(j))
                        for j in ("skip", "run_once", "run_all")
                    ),
                    timeout=15,
                )
                histories = {j: await cron.history(j) for j in ("skip", "run_once", "run_all")}
    assert len(seen.firings) > stopped
    for job, history in histories.items():
        times = covered(history, step)
        assert consecutive([t for t, _ in times], step), (job, times)  # each time exactly once
        statuses = [s for _, s in times]
        catch_ups = [h for h in history if h.catch_up]
        missed = [h for h in history if h.status == "missed"]
        assert "failed" not in statuses
        # Leaving the first cron may cut one firing between its claim and its run:
        # that one is recorded interrupted, and no other.
        assert statuses.count("interrupted") <= 1, statuses
        assert all(t < restart for t, s in times if s == "interrupted"), times
        # Lateness is judged when the leader gets to a time: one that was inside the
        # grace at the restart may be past it once the backlog before it has run.
        first = missed[0]
        i = history.index(first)
        if job == "skip":
            assert not catch_ups and first.count >= 5
            assert sum(m.count for m in missed) >= 6
        elif job == "run_once":
            assert first.count >= 4 and history[i + 1] == catch_ups[0]
            assert len(catch_ups) <= 2
        else:
            # The same lateness may record a time or two more missed (a loaded machine)
            # before the catch-ups, but never one between them.
            k = history.index(catch_ups[0])
            assert history[i:k] == missed and sum(m.count for m in missed) >= 3, history[i:k]
            assert history[k : k + 2] == catch_ups[:2]
            j = history.index(catch_ups[-1])
            assert history[k : j + 1] == catch_ups  # the catch-ups run one after another
        assert [f for f in seen.of(job) if f.catch_up] == [
            f for f in seen.of(job) if f.scheduled_at in {c.scheduled_at for c in catch_ups}
        ]


async def _noop(firing: Firing) -> None:
    pass


BAD_JOBS: list[tuple[dict[str, Any], type[Exception], str | None]] = [
    ({"expression": "61 * * * *"}, ConfigError, "expression"),
    ({"expression": "every day"}, ConfigError, "expression"),
    ({"expression": "0 0 30 2 *"}, ConfigError, "expression"),
    ({"every": 0}, ConfigError, "every"),
    ({"every": -5.0}, ConfigError, "every"),
    ({"every": math.nan}, ConfigError, "every"),
    ({"every": timedelta(seconds=-1)}, ConfigError, "every"),
    ({}, TypeError, None),
    ({"expression": "* * * * *", "every": 30}, TypeError, None),
    ({"every": 30, "missed": "later"}, ConfigError, "missed"),
    ({"every": 30, "jitter": -1.0}, ConfigError, "jitter"),
    ({"every": 30, "jitter": math.inf}, ConfigError, "jitter"),
    ({"every": 30, "max_catch_up": 0}, ConfigError, "max_catch_up"),
    ({"every": 30, "grace": math.nan}, ConfigError, "grace"),
    ({"every": 30, "retry_interrupted": "yes"}, TypeError, None),
    ({"every": 30, "name": "a/b"}, ConfigError, "name"),
    ({"every": 30, "name": ""}, ConfigError, "name"),
]


@pytest.mark.parametrize(("kwargs", "error", "field"), BAD_JOBS)
async def test_bad_input_is_refused_and_nothing_is_written(
    coordinator: Coordinator, kwargs: dict[str, Any], error: type[Exception], field: str | None
) -> None:
    cron = Cron(coordinator, ROOT, worker=Worker("1.0"))
    with pytest.raises(error) as info:
        cron.job(**kwargs)(_noop)
    if field is not None:
        assert isinstance(info.value, ConfigError) and info.value.field == field
        assert field in str(info.value)
    assert cron.jobs == ()
    assert await coordinator.client.exists(ROOT) is None


async def test_bad_cron_arguments_and_duplicates(coordinator: Coordinator) -> None:
    worker = Worker("1.0")
    with pytest.raises(ConfigError) as info:
        Cron(coordinator, ROOT, worker=worker, timezone="Mars/Olympus_Mons")
    assert info.value.field == "timezone"
    for kwargs, field in (({"history": -1}, "history"), ({"grace": -1.0}, "grace")):
        with pytest.raises(ConfigError) as info:
            Cron(coordinator, ROOT, worker=worker, **kwargs)
        assert info.value.field == field
    with pytest.raises(aiocoord.InvalidPathError):
        Cron(coordinator, "no-slash", worker=worker)
    with pytest.raises(TypeError):
        Cron(coordinator, ROOT, worker="w1")  # type: ignore[arg-type]
    cron = Cron(coordinator, ROOT, worker=worker)
    cron.job(every=30, name="report")(_noop)
    with pytest.raises(ConfigError) as info:
        cron.job("0 * * * *", name="report")(_noop)
    assert info.value.field == "name" and "already" in str(info.value)

    def not_async(firing: Firing) -> None:
        pass

    with pytest.raises(TypeError):
        cron.job(every=30)(not_async)  # type: ignore[type-var]
    assert cron.jobs == ("report",)
    assert await coordinator.client.exists(ROOT) is None
    with anyio.fail_after(10):
        await cron.start()
        with pytest.raises(RuntimeError):
            cron.job(every=30, name="late")
        with pytest.raises(RuntimeError):
            await cron.start()
        await cron.aclose()
        await cron.aclose()


async def test_a_corrupt_record_stops_only_its_job(coordinator: Coordinator) -> None:
    seen = Seen()
    bad = f"{ROOT}/jobs/broken"
    await coordinator.client.create(bad, b'{"not": "a cron record"}', make_parents=True)
    cron = Cron(coordinator, ROOT, worker=Worker("1.0"))
    for name in ("broken", "fine"):
        cron.job(every=0.2, name=name)(seen.add_async)
    with anyio.fail_after(15):
        async with cron:
            await seen.until(lambda: len(seen.of("fine")) >= 3)
            assert seen.of("broken") == []
            assert (await coordinator.client.get(bad)).data == b'{"not": "a cron record"}'
            with pytest.raises(aiocoord.NodeDataError):
                await cron.history("broken")
            await coordinator.client.delete(bad)  # repaired: the job starts afresh
            await seen.until(lambda: len(seen.of("broken")) >= 2)


async def test_left_from_another_task(coordinator: Coordinator) -> None:
    seen = Seen()
    cron = Cron(coordinator, ROOT, worker=Worker("1.0"))
    cron.job(every=0.2, name="tick")(seen.add_async)
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            started = anyio.Event()

            async def enter() -> None:
                await cron.__aenter__()
                started.set()

            tg.start_soon(enter)
            await started.wait()
        await seen.until(lambda: len(seen.of("tick")) >= 2)
        await cron.__aexit__(None, None, None)
    assert "closed" in repr(cron)
    assert await eventually_empty(coordinator)


async def eventually_empty(coord: Coordinator) -> bool:
    async def gone() -> bool:
        return await coord.client.exists(f"{ROOT}/workers/{'x'}") is None and not (
            await coord.client.children(f"{ROOT}/leaders")
        )

    await eventually(gone)
    return True
