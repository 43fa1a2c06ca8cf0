"""What the demo shows live: task leadership as ZooKeeper sees it, followed by a recursive watch.

`Follower` keeps ``leaders`` (task -> (worker, version, token)) and ``workers``
(id -> version) in step with ``<root>/tasks`` and prints every hand-over as the
server applied it, with how long the task had no leader.  `settled` says when
the leaders are exactly those the recipe's rendezvous choice names.
"""

from __future__ import annotations

import contextlib
import time

import anyio
import anyio.abc

from ...errors import NodeDataError, NoNodeError
from ...recipes.task_leadership import choose_leaders, read_task_leader, read_task_worker
from ...session import Coordinator
from ...zk.paths import join
from ...zk.types import EventType
from .view import View

__all__ = ("NEW", "OLD", "Follower")

OLD, NEW = "1.0", "1.1"


class Follower:
    """The demo's live view of ``<root>/tasks``."""

    def __init__(self, root: str, tasks: list[str], view: View) -> None:
        self.root = root
        self.tasks = tasks
        self.view = view
        self.leaders: dict[str, tuple[str, str, int] | None] = dict.fromkeys(tasks)
        self.workers: dict[str, str] = {}
        self.unled_since: dict[str, float] = {}
        self.last: dict[str, str] = {}  # the last leader seen of each task, for hand-over lines
        self.handovers = 0
        self.quiet = True  # no hand-over lines while the first leaders are chosen
        self.changed = anyio.Event()
        self.progress_label: str | None = None  # while set, hand-overs update a progress bar

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def follow(self, coord: Coordinator, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Keep `leaders` and `workers` in step with ZooKeeper and print the hand-overs."""
        base = join(self.root, "tasks")
        async with coord.client.watch(base, recursive=True) as pw:
            await self._reload(coord)
            task_status.started()
            async for event in pw.events:
                if event.type is EventType.SESSION_LOST:
                    await self._reload(coord)
                    continue
                rel = event.path[len(base) + 1 :].split("/")
                if len(rel) != 2:
                    continue
                kind, name = rel
                if kind == "leaders" and name in self.leaders:
                    await self._leader_event(coord, name, event.type)
                elif kind == "workers":
                    await self._worker_event(coord, name, event.type)
                self._notify()

    async def _reload(self, coord: Coordinator) -> None:
        for task in self.tasks:
            self.leaders[task] = await self.read_leader(coord, task)
        self.workers.clear()
        with contextlib.suppress(NoNodeError):
            for name in await coord.client.children(join(self.root, "tasks", "workers")):
                await self._worker_event(coord, name, EventType.CREATED)
        self._notify()

    async def read_leader(self, coord: Coordinator, task: str) -> tuple[str, str, int] | None:
        try:
            lead = await read_task_leader(coord, join(self.root, "tasks"), task)
        except NodeDataError:
            return None
        return None if lead is None else (lead.worker, lead.version, lead.token)

    def settled(self, workers: list[str]) -> bool:
        """Exactly `workers` are registered and each task is led by the worker the
        recipe's rendezvous choice names for it."""
        if set(self.workers) != set(workers):
            return False
        want = choose_leaders(self.tasks, self.workers)
        return all((v := self.leaders[t]) is not None and v[0] == want[t] for t in self.tasks)

    async def _leader_event(self, coord: Coordinator, task: str, etype: EventType) -> None:
        if etype is EventType.DELETED:
            self.leaders[task] = None
            self.unled_since[task] = time.monotonic()
            return
        if etype is not EventType.CREATED:
            return
        now = await self.read_leader(coord, task)
        self.leaders[task] = now
        gap = time.monotonic() - self.unled_since.pop(task, time.monotonic())
        if now is None:
            return
        if self.quiet:
            self.last[task] = f"{now[0]} ({now[1]})"
            return
        self.handovers += 1
        before = self.last.get(task)
        self.last[task] = f"{now[0]} ({now[1]})"
        self.view.say(
            f"  {task}: {before or 'nobody'} -> {self.last[task]}, token 0x{now[2]:x}, "
            f"{gap:.2f}s without a leader"
        )
        self._progress()

    async def _worker_event(self, coord: Coordinator, name: str, etype: EventType) -> None:
        if etype is EventType.DELETED:
            version = self.workers.pop(name, None)
            if version is not None and not self.quiet:
                self.view.say(f"  worker {name} ({version}) left the registry")
            return
        if etype is not EventType.CREATED:
            return
        try:
            worker = await read_task_worker(coord, join(self.root, "tasks"), name)
        except NodeDataError:
            return
        if worker is None:
            return
        version = self.workers[name] = worker.version
        if not self.quiet:
            self.view.say(f"  worker {name} ({version}) registered")

    def _progress(self) -> None:
        if self.progress_label is not None:
            on_new = sum(1 for v in self.leaders.values() if v is not None and v[1] == NEW)
            self.view.progress(self.progress_label, on_new, len(self.tasks))
