"""The machinery behind `TaskLeadership`: registration, the worker list, leader events.

These background tasks run in the recipe's task group:

- the one loss rule (`_loss.LossWatch`), followed where the session reports
  a state: SUSPENDED and READ_ONLY (by policy) and LOST revoke leadership
  there, before any task runs;
- the connection follower: LOST and a new session turn our leader nodes into
  stale ones to delete;
- the worker node, a `PersistentNode` (created on entering, again after a
  lost session or a deletion, its own node of an ended session replaced at
  once); it tells the control loop each time the node it holds changes;
- the control loop: once the worker node is there in the current session,
  reads the worker list with a child watch, recomputes the choice, and marks
  the session usable once both are done;
- the leader watch (`LeaderWatch`): one persistent recursive watch on
  ``<root>/leaders`` that routes each event to its task (and to `changes()`
  subscribers), dropped while this worker has no use for it;
- the write batcher's task (`WriteBatcher.run`), which hosts the recovery
  of failed batches (the batches themselves go out from loop callbacks);
- one loop per task (`TaskSlot.run`).

The engine owns the set of tasks (`add_task`, `remove_task`); each task's
state is its `TaskSlot`'s, changed only by the slot's own methods.

The worker list is "current" while its child watch has not fired.  ZooKeeper
delivers a session's notifications in zxid order, so a worker that sees a
leader node deleted has already seen (as a fired watch) every worker-list
change that came before it, and acquires only once it has read the new list.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterable

import anyio
import anyio.abc

from aiocoord.errors import (
    ConnectionLostError,
    NodeDataError,
    NoNodeError,
)
from aiocoord.session import Coordinator
from aiocoord.zk import EventType, Watch, WatchedEvent, ZkClient
from aiocoord.zk.paths import join
from aiocoord.zk.states import ConnectionEvent, ConnectionState

from .._change_signal import ChangeSignal
from .._loss import LossPolicy, LossWatch
from .._queue import read_nodes
from ..membership import PersistentNode
from ._changes import ChangeFeed
from ._choice import Prefer, VersionKey, assign
from ._leader_watch import LeaderWatch
from ._leave import leave
from ._records import (
    Worker,
    decode_worker,
    encode_leader,
    encode_worker,
    read_leader,
)
from ._slot import RETRY_DELAY, TaskSlot
from ._state import clock
from ._writes import WriteBatcher

__all__ = ("TaskEngine",)

log = logging.getLogger("aiocoord.recipes.task_leadership")

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as one of `waits` returns."""
    async with anyio.create_task_group() as tg:

        async def one(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(one, wait)


class TaskEngine:
    """Shared state of one worker's task leadership; the `Engine` its task slots run in."""

    def __init__(
        self,
        coord: Coordinator,
        root: str,
        worker: Worker,
        tasks: Iterable[str],
        *,
        prefer: Prefer,
        version_key: VersionKey,
        settle: float,
        lose_on_suspend: bool | None,
    ) -> None:
        self.coord = coord
        self.root = root
        self.worker = worker
        self._prefer: Prefer = prefer
        self._version_key = version_key
        self.settle = settle
        self.workers_path = join(root, "workers")
        self.leaders_path = join(root, "leaders")
        self.my_path = join(self.workers_path, worker.id)
        self._record = encode_worker(worker)
        self.leader_record = encode_leader(worker)  # what our leader nodes hold
        self.slots: dict[str, TaskSlot] = {
            t: TaskSlot(t, join(self.leaders_path, t)) for t in tasks
        }
        self.view: dict[str, Worker] = {}
        self.invalid: dict[str, NodeDataError] = {}
        self._view_watch: Watch | None = None  # the worker list's watch: fired = list stale
        self._versions: frozenset[str] = frozenset()
        self._node: PersistentNode | None = None  # our worker node, made by `start`
        self.usable_in: int | None = None  # session in which we may act (registered, list read)
        self._conn_changed = ChangeSignal()
        self.writes = WriteBatcher(coord.client)
        self._leader_watch = LeaderWatch(
            coord,
            self.leaders_path,
            route=self._on_leader_event,
            needed=self._needs_leader_events,
            look_again=self._look_again,
        )
        self.feed = ChangeFeed(self.review_watch)
        self._tg: anyio.abc.TaskGroup | None = None
        self._closing = False
        # The one loss rule, applied where the session reports a state (no task hop); the
        # connection follower does the rest of what a state change means, a task later.
        policy = LossPolicy.of(lose_on_suspend)
        self._loss = LossWatch(
            policy, None, self.revoke_all, closed="session lost", follow_owner=True
        )

    # --- what a slot needs (`_slot.Engine`) ---------------------------------------------------

    @property
    def client(self) -> ZkClient:
        return self.coord.client

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def session_id(self) -> int | None:
        return self.coord.client.session.session_id

    @property
    def registered(self) -> int | None:
        """The session our worker node belongs to, as last seen (None: not there)."""
        stat = self._node.stat if self._node is not None else None
        return stat.ephemeral_owner if stat is not None else None

    def usable(self) -> bool:
        session = self.coord.client.session.session_id
        return (
            session is not None
            and self.usable_in == session
            and self.registered == session
            and self.coord.state in _CONNECTED
        )

    def view_current(self) -> bool:
        return self._view_watch is not None and not self._view_watch.fired

    def watching(self) -> bool:
        return self._leader_watch.live

    def review_watch(self) -> None:
        """Something the leader watch depends on changed: let it look again."""
        self._leader_watch.review()

    def _needs_leader_events(self) -> bool:
        """Whether the leader watch must stay: anything but a settled worker with nothing to do.

        Leading (granted) needs it to notice a deleted node; being chosen needs it
        to learn when the node is free; `changes()` readers need every event.  A
        node we hold but no longer lead (bodies cancelled) needs nothing: it is
        deleted with its version.  While not usable (starting, disconnected) it
        stays, so that reconnections work as before.
        """
        if not self.usable() or self._closing or self.feed.subscribed:
            return True
        me = self.worker.id
        return any(slot.granted or slot.desired == me for slot in self.slots.values())

    # --- lifecycle -------------------------------------------------------------------------

    def check_open(self, what: str) -> None:
        """Raise `RuntimeError` naming `what` unless started and not closing."""
        if self._tg is None or self._closing:
            raise RuntimeError(f"{what} needs an entered TaskLeadership that is not closed")

    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """Start everything in `tg`; return once registered with the worker list read.

        Rides out connection trouble for one request timeout, then raises
        `ConnectionLostError` saying how long it waited and why.
        """
        self._tg = tg
        client = self.client
        deadline = client.session.deadline()
        self._node = PersistentNode(
            self.coord, self.my_path, data=self._record, on_change=self._on_registration
        )
        with anyio.CancelScope(deadline=deadline.at) as scope:
            await tg.start(self._leader_watch.run)  # first, so that no leader event is missed
            await tg.start(self.writes.run)
            self._loss.session = client.session
            self._loss.follow(client.session.follow_states)
            tg.start_soon(self._follow_connection)
            await self._node.start()
            await tg.start(self._control)
        if scope.cancelled_caught:
            client.session.ensure_open()
            raise client.session.unreachable(
                deadline, f"task leadership of {self.root}: could not register"
            )
        for slot in self.slots.values():
            tg.start_soon(slot.run, self)

    def begin_close(self) -> None:
        """Stop leading everything now; waiting ``lead()`` calls give up."""
        self._closing = True
        for slot in self.slots.values():
            slot.revoke("closed", self.worker.id)
            slot.notify_grant()
        self.feed.close()

    def revoke_all(self, reason: str) -> None:
        for slot in self.slots.values():
            slot.revoke(reason, self.worker.id)

    async def cleanup(self) -> None:
        """Delete our leader nodes and worker node in one transaction, after the bodies drained.

        Then nobody waits for a task's loop any longer (`add_task`, `remove_task`).
        """
        self._loss.drop()
        try:
            await self._leave()
        finally:
            for slot in self.slots.values():
                slot.close()

    async def _leave(self) -> None:
        slots = list(self.slots.values())
        paths = (self.leaders_path, self.my_path)
        await leave(self.coord, slots, self._node, self.worker.id, self.root, *paths)

    # --- connection ------------------------------------------------------------------------

    async def _follow_connection(self) -> None:
        async for event in self.coord.connection_events():
            self._on_connection(event)
        self.usable_in = None
        self.revoke_all("session lost")  # the coordinator closed under us

    def _on_connection(self, event: ConnectionEvent) -> None:
        state = event.state
        if state not in _CONNECTED:
            self.usable_in = None  # leadership itself was revoked where the state was reported
        session = self.coord.client.session.session_id
        for slot in self.slots.values():
            if state is ConnectionState.LOST or event.new_session:
                slot.forget_session(session)
            slot.poke()
        self._conn_changed.fire()
        self.review_watch()

    # --- registration and the worker list ----------------------------------------------------

    async def _control(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Once registered, read the worker list, keep it current; mark the session usable.

        The worker node (`PersistentNode`) wakes this loop whenever the node
        it holds changes (`_on_registration`), as a connection change does.
        """
        started = False
        while True:
            changed = self._conn_changed.event()
            session = self.coord.client.session.session_id
            if self.coord.state in _CONNECTED and session is not None:
                try:
                    if self.registered == session:
                        names, watch = await self.client.children_watch(self.workers_path)
                        if self.worker.id in names:
                            await self._load_workers(names, watch)
                            if self.usable_in != session:
                                await self._look_again(usable_in=session, changed=changed)
                            if not started:
                                task_status.started()
                                started = True
                            await _first_of(watch.wait, changed.wait)
                            continue
                        # Gone since: the worker node is made again, and says so.
                except NoNodeError:
                    pass
                except ConnectionLostError as exc:
                    log.debug("task leadership of %s: %s", self.root, exc)
            with anyio.move_on_after(RETRY_DELAY if self.coord.state in _CONNECTED else math.inf):
                await changed.wait()

    def _on_registration(self) -> None:
        """The worker node we hold changed (made, gone, made again): look at the list again."""
        session = self.registered
        if session is not None:
            log.info(
                "worker %s (version %s) registered at %s (session 0x%x)",
                self.worker.id,
                self.worker.version,
                self.my_path,
                session,
            )
        else:
            log.info("worker node %s is gone; registering again", self.my_path)
        self._conn_changed.fire()

    async def _load_workers(self, names: list[str], watch: Watch) -> None:
        """Read every worker record, ignore invalid ones, and recompute the choice."""
        read = await read_nodes(self.client, self.workers_path, names)
        nodes = {name: node.data for name, node in read}
        view: dict[str, Worker] = {}
        invalid: dict[str, NodeDataError] = {}
        for name in sorted(nodes):
            try:
                view[name] = self.decode_worker(name, nodes[name])
            except NodeDataError as exc:
                invalid[name] = exc
                if name not in self.invalid:
                    log.warning("ignoring worker %s: %s", name, exc)
        self.view, self.invalid, self._view_watch = view, invalid, watch
        self.recompute()

    def decode_worker(self, name: str, data: bytes) -> Worker:
        return decode_worker(join(self.workers_path, name), name, data, self._version_key)

    def recompute(self) -> None:
        """Apply the choice to every task; a task whose choice changed restarts its settle delay."""
        versions = {worker_id: w.version for worker_id, w in self.view.items()}
        choice = assign(self.slots, versions, prefer=self._prefer, version_key=self._version_key)
        if choice.versions != self._versions:
            self._versions = choice.versions
            log.info(
                "%s: tasks go to version %s (%d of %d workers)",
                self.root,
                "/".join(sorted(choice.versions)) or "-",
                len(choice.candidates),
                len(versions),
            )
            if choice.cyclic:
                log.warning(
                    "%s: no %s version among %s (Maven's order has a cycle there); "
                    "the documented fallback chose %s",
                    self.root,
                    self._prefer,
                    sorted(set(versions.values())),
                    sorted(choice.versions),
                )
        now = clock()
        moved = False
        for slot in self.slots.values():
            if slot.choose(choice.leaders.get(slot.task), now):
                moved = True
        self.review_watch()
        if moved and self._tg is not None:
            self._tg.start_soon(self._poke_after_settle, now + self.settle)

    async def _poke_after_settle(self, deadline: float) -> None:
        """Hand over every task whose settle delay ends at `deadline`, all in one pass.

        Each task also has a timer of its own (a fallback, 50 ms later): timers
        that end at one moment may fire a millisecond apart, and the tasks would
        then hand over in bits, each bit waiting for the previous ones to finish.
        """
        await anyio.sleep_until(deadline)
        me = self.worker.id
        for slot in self.slots.values():
            if (slot.held is not None or slot.granted) and slot.desired != me:
                slot.advance(self)  # the ones the delay held back
        self._leader_watch.mute()

    async def _look_again(
        self, *, usable_in: int | None = None, changed: asyncio.Event | None = None
    ) -> None:
        """Leader events may have been missed: read which leader nodes exist; every task looks again.

        After a (re)connection (`usable_in`: the session), which then makes the
        session usable unless it or the connection changed (`changed`)
        meanwhile, and when the leader watch is back after a pause.  Tasks
        whose node exists wait for an event on it instead of trying a create
        that would fail (a newcomer would otherwise send one failing write per
        task); see `TaskSlot.look_again`.
        """
        seen = {task: slot.events for task, slot in self.slots.items()}
        try:
            taken = set(await self.client.children(self.leaders_path))
        except NoNodeError:
            taken = set()
        if usable_in is not None:
            if self.coord.client.session.session_id != usable_in or (
                changed is not None and changed.is_set()
            ):
                return
            self.usable_in = usable_in
        session = self.coord.client.session.session_id
        for task, slot in self.slots.items():
            slot.look_again(session, taken=task in taken, seen=seen.get(task))
        self.feed.publish((None, None))
        if usable_in is not None:
            self.review_watch()

    # --- leader events ---------------------------------------------------------------------

    def _on_leader_event(self, event: WatchedEvent) -> None:
        head, _, task = event.path.rpartition("/")
        if head != self.leaders_path or event.type is EventType.SESSION_LOST:
            return
        slot = self.slots.get(task)
        if slot is not None:
            slot.on_event(event.type, self)
            if self.feed.subscribed:
                self.feed.publish((task, event.type))

    # --- tasks at run time -----------------------------------------------------------------

    async def add_task(self, name: str) -> None:
        """Take part in leading task `name` (see `TaskLeadership.add_task`)."""
        self.check_open("add_task()")
        slot = self.slots.get(name)
        if slot is not None:
            if slot.stopping is None:
                return
            await slot.done.wait()  # being removed: let that finish first
            self.check_open("add_task()")  # the recipe may have closed meanwhile
        slot = self.slots[name] = TaskSlot(name, join(self.leaders_path, name))
        self.recompute()
        assert self._tg is not None
        self._tg.start_soon(slot.run, self)
        self.feed.publish((name, None))

    async def remove_task(self, name: str) -> None:
        """Stop leading task `name` and forget it (see `TaskLeadership.remove_task`)."""
        slot = self.slots.get(name)
        if slot is None:
            return
        slot.stop("task removed")
        await slot.done.wait()
        if self.slots.get(name) is slot:
            del self.slots[name]

    # --- reads -----------------------------------------------------------------------------

    async def read_all(self, base: str) -> dict[str, bytes]:
        """Data of every child of `base`, read concurrently; {} if `base` does not exist."""
        try:
            names = await self.client.children(base)
        except NoNodeError:
            return {}
        return {name: node.data for name, node in await read_nodes(self.client, base, names)}

    async def read_leader(self, task: str) -> tuple[str, str, int] | None:
        """(worker id, version, czxid) of the task's leader, or None (no leader, invalid data)."""
        while True:
            try:
                return await read_leader(self.client, join(self.leaders_path, task))
            except ConnectionLostError:
                await self.coord.client.session.wait_connected()
