"""Version-aware task leadership through a rolling upgrade.

Six cron-like tasks, each led by exactly one worker, always one of the newest
version present.  Two workers of 2.4.0 share the tasks; a worker of 2.5.0
joins and takes every task (each hand-over drains the old leader's body
before the new one starts, so no task ever has two leaders); when it leaves,
the tasks go back to the 2.4.0 workers.  Each worker has its own session, as
separate processes would.

    python examples/rolling_upgrade.py      # AIOCOORD_HOSTS, or the embedded ZooKeeper
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack

import aiocoord
from aiocoord.cli import local_zookeeper

ROOT = "/examples/upgrade"
TASKS = ["report", "cleanup", "billing", "digest", "backup", "sync"]


async def run_task(tl: aiocoord.TaskLeadership, task: str) -> None:
    """Run `task` whenever this worker leads it."""
    name = f"{tl.worker.id} ({tl.worker.version})"
    while True:
        try:
            async with tl.lead(task) as term:
                print(f"  {name} now runs {task} (token 0x{term.token:x})")
                await asyncio.Event().wait()  # the task's own loop; cancelled on hand-over
        except aiocoord.LeadershipLost as lost:
            print(f"  {name} stopped {task}: {lost.reason}")
        except RuntimeError:
            return  # the worker is leaving


async def worker(
    stack: AsyncExitStack, settings: aiocoord.Settings, wid: str, version: str
) -> aiocoord.TaskLeadership:
    coord = await stack.enter_async_context(aiocoord.connect(settings))
    me = aiocoord.Worker(version=version, id=wid)
    tl = await stack.enter_async_context(
        aiocoord.task_leadership(coord, ROOT, worker=me, tasks=TASKS, settle=0.2)
    )
    for task in TASKS:
        stack.push_async_callback(_cancel, asyncio.ensure_future(run_task(tl, task)))
    return tl


async def _cancel(task: asyncio.Future[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def settled(tl: aiocoord.TaskLeadership, done: Callable[[dict[str, str]], bool]) -> None:
    """Read the leaders from ZooKeeper until they satisfy `done`, then print them."""
    while not done(leaders := await tl.leaders()):  # noqa: ASYNC110 - the server is the judge
        await asyncio.sleep(0.05)
    by_worker: dict[str, list[str]] = {}
    for task, wid in sorted(leaders.items()):
        by_worker.setdefault(wid, []).append(task)
    print("leaders:", "; ".join(f"{w}: {', '.join(t)}" for w, t in sorted(by_worker.items())))


async def main(settings: aiocoord.Settings) -> None:
    async with asyncio.timeout(30), AsyncExitStack() as old:
        print("two workers of 2.4.0 start")
        a = await worker(old, settings, "a", "2.4.0")
        await worker(old, settings, "b", "2.4.0")
        await settled(a, lambda now: len(now) == 6 and set(now.values()) == {"a", "b"})

        print("a worker of 2.5.0 joins: every task moves to it")
        async with AsyncExitStack() as new:
            await worker(new, settings, "c", "2.5.0")
            await settled(a, lambda now: len(now) == 6 and set(now.values()) == {"c"})
            print("the 2.5.0 worker leaves (say, a failed canary): the tasks go back")
        await settled(a, lambda now: len(now) == 6 and set(now.values()) <= {"a", "b"})
    print("done: the tasks followed the newest version, one leader per task")


if __name__ == "__main__":
    with local_zookeeper() as settings:
        asyncio.run(main(settings))
