"""Version-aware task leadership: each task led by one worker of the newest version, spread evenly.

Many cron-like tasks, many workers, several versions alive at once during a
rolling upgrade.  Each task is led by exactly one worker, always one of the
newest version present (``prefer="oldest"``: the oldest), and the tasks are
spread over those workers by rendezvous hashing, so a worker that joins or
leaves moves only its share of them.

Node layout, under `root`::

    <root>/workers/<worker id>   EPHEMERAL  {"id", "version", "host", "pid", "started"}
    <root>/leaders/<task>        EPHEMERAL  {"id", "version"} of the worker leading the task

Parents are container nodes (re-created on demand if the server reaps them).
Creating ``<root>/leaders/<task>`` is the only way to lead a task, so two
workers never lead it at once; its czxid is the term's fencing token.

How it works: every worker watches the worker list (a child watch) and the
leader nodes (one persistent recursive watch) and computes the same choice
for every task (`_task_choice`).  The chosen worker creates the leader node as
soon as it is free; if another worker holds it, it waits for its deletion.  A
worker that leads a task it should no longer lead waits `settle` seconds (a
flapping worker does not bounce tasks), cancels its ``lead()`` bodies, waits
for them to finish (drain) and then deletes the node; the chosen worker,
woken by the deletion, creates it.  A worker acquires only with a current
worker list: the list's watch fires before any later leader event arrives,
so a lagging worker never grabs a task a newer worker should take.

Failure handling:

- SUSPENDED (and READ_ONLY) stops leading everything: ``lead()`` bodies are
  cancelled and raise ``LeadershipLost(reason="suspended")``; the nodes stay.
  With ``lose_on_suspend=False`` leadership is kept until LOST.  On
  RECONNECTED to the same session the worker list is re-read, held nodes are
  checked (by czxid) and leadership is granted again with the same token.
- LOST stops leading everything (``"session lost"``).  On the new session the
  worker registers again (deleting its own record left by the old session)
  and deletes the leader nodes it held in the old session if the server has
  not yet, as Curator does for protected nodes (CURATOR-498).
- A worker node with invalid data is ignored, with a `NodeDataError` logged
  and kept in `TaskLeadership.invalid_workers`; the others carry on.  A leader
  node with invalid data blocks its task (logged) until someone removes it.
- A worker id already registered by another live process: registration waits
  (logged) until that node goes away.
- Leaving the block cancels every body (``"closed"``), waits for them
  (bounded), then deletes the leader nodes and the worker node in one
  transaction, so the others see the tasks free and the worker gone at once.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from types import TracebackType

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectSendStream

from aiocoord.errors import (
    BadVersionError,
    ConfigError,
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    InvalidPathError,
    LeadershipLost,
    NodeDataError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from aiocoord.session import Coordinator
from aiocoord.zk import CreateMode, DeleteOp, EventType, Watch, WatchedEvent
from aiocoord.zk.paths import basename, join, parent, validate_path
from aiocoord.zk.states import ConnectionEvent, ConnectionState

from ._maven_version import maven_version_key
from ._task_choice import Action, Prefer, TaskState, VersionKey, assign, decide
from ._task_records import (
    Worker,
    check_name,
    decode_leader,
    decode_worker,
    encode_leader,
    encode_worker,
)

__all__ = ("TaskChange", "TaskLeadership", "TaskTerm", "Worker", "task_leadership")

log = logging.getLogger(__name__)

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
_RETRY_DELAY = 0.2  # after a request timed out while the connection looked fine


@dataclass(frozen=True, slots=True)
class TaskTerm:
    """One term of leadership of `task` by this worker; `token` is the fencing token.

    The token is the czxid of the leader node: a later leader of the same
    task always has a larger one, so a store that remembers the largest token
    it saw can refuse writes from an earlier leader.
    """

    task: str
    token: int
    worker_id: str
    version: str


@dataclass(frozen=True, slots=True)
class TaskChange:
    """Who leads `task` now, as seen by this worker: `leader` is a worker id or None."""

    task: str
    leader: str | None
    version: str | None = None
    token: int | None = None


@dataclass(frozen=True, slots=True)
class _Held:
    czxid: int
    session: int
    version: int


class _Body:
    """One running ``lead()`` body: its cancel scope and why it was cancelled."""

    __slots__ = ("reason", "scope")

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.reason: str | None = None


class _Slot:
    """Everything one worker knows and runs for one task."""

    def __init__(self, task: str, path: str) -> None:
        self.task = task
        self.path = path
        self.desired: str | None = None
        self.desired_at = time.monotonic()
        self.held: _Held | None = None
        self.stale: int | None = None  # czxid of our node from an earlier session
        self.granted = False
        self.term: TaskTerm | None = None
        self.verify = False
        self.deleting = False
        self.events = 0  # leader-node events seen on the path
        self.deletions = 0
        self.blocked_at: int | None = None
        self.holder: str | None = None
        self.stopping: str | None = None
        self.bad_czxid: int | None = None
        self.bodies: set[_Body] = set()
        self.done = anyio.Event()
        self._wake = anyio.Event()
        self._granted_changed = anyio.Event()
        self._body_exited = anyio.Event()

    def poke(self) -> None:
        """Wake the task's loop: something it decides on changed."""
        self._wake.set()
        self._wake = anyio.Event()

    def notify_grant(self) -> None:
        self._granted_changed.set()
        self._granted_changed = anyio.Event()

    def remove_body(self, body: _Body) -> None:
        self.bodies.discard(body)
        self._body_exited.set()
        self._body_exited = anyio.Event()

    async def drained(self) -> None:
        """Wait until no ``lead()`` body of this task runs."""
        while self.bodies:
            await self._body_exited.wait()


async def _first_of(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return as soon as one of `waits` returns."""
    async with anyio.create_task_group() as tg:

        async def one(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            tg.cancel_scope.cancel()

        for wait in waits:
            tg.start_soon(one, wait)


class TaskLeadership:
    """This worker's part in leading a set of tasks; see the module docs for the protocol.

    Use it as ``async with``: entering blocks until the worker is registered
    and has read the worker list (bound it with `anyio.fail_after`); leaving
    stops leading, waits for ``lead()`` bodies (bounded) and deletes this
    worker's nodes.  Tasks are led in the background; ``lead(task)`` runs code
    only while this worker leads the task.
    """

    def __init__(
        self,
        coord: Coordinator,
        root: str,
        *,
        worker: Worker,
        tasks: Iterable[str],
        prefer: Prefer = "newest",
        version_key: VersionKey | None = None,
        settle: float = 1.0,
        lose_on_suspend: bool = True,
    ) -> None:
        if not isinstance(coord, Coordinator):
            raise TypeError(f"coord must be an aiocoord.Coordinator, not {type(coord).__name__}")
        try:
            self._root = validate_path(root)
        except InvalidPathError as exc:
            raise ConfigError("root", f"{root!r} is not a valid path: {exc.reason}") from None
        if not isinstance(worker, Worker):
            raise TypeError(f"worker must be an aiocoord.Worker, not {type(worker).__name__}")
        if isinstance(tasks, str | bytes) or not isinstance(tasks, Iterable):
            raise TypeError("tasks must be an iterable of task names, not a single string")
        if prefer not in ("newest", "oldest"):
            raise ConfigError("prefer", f"must be 'newest' or 'oldest', not {prefer!r}")
        if version_key is None:
            version_key = maven_version_key
        elif not callable(version_key):
            raise TypeError(f"version_key must be callable, not {type(version_key).__name__}")
        try:
            version_key(worker.version)
        except Exception as exc:
            raise ConfigError(
                "version", f"{worker.version!r} is refused by version_key: {exc}"
            ) from exc
        if (
            not isinstance(settle, int | float)
            or isinstance(settle, bool)
            or not 0 <= settle < math.inf
        ):
            raise ConfigError("settle", f"must be a finite number of seconds >= 0, not {settle!r}")
        self.coord = coord
        self._client = coord.client
        self._worker = worker
        self._prefer: Prefer = prefer
        self._version_key = version_key
        self._settle = float(settle)
        self._lose_on_suspend = bool(lose_on_suspend)
        self._workers_path = join(self._root, "workers")
        self._leaders_path = join(self._root, "leaders")
        self._my_path = join(self._workers_path, worker.id)
        self._record = encode_worker(worker)
        self._leader_record = encode_leader(worker)
        self._slots: dict[str, _Slot] = {}
        for task in tasks:
            name = check_name("tasks", task)
            self._slots.setdefault(name, _Slot(name, join(self._leaders_path, name)))
        self._view: dict[str, Worker] = {}
        self._invalid: dict[str, NodeDataError] = {}
        self._view_watch: Watch | None = None  # the worker list's watch: fired = list stale
        self._versions: frozenset[str] = frozenset()
        self._registered: int | None = None  # session our worker node belongs to
        self._usable: int | None = None  # session in which we may act (registered, list read)
        self._conn_changed = anyio.Event()
        self._subscribers: set[MemoryObjectSendStream[tuple[str | None, EventType | None]]] = set()
        self._tg: anyio.abc.TaskGroup | None = None
        self._entered = False
        self._closing = False
        self._closed = False

    # --- public state ----------------------------------------------------------------------

    @property
    def worker(self) -> Worker:
        return self._worker

    @property
    def root(self) -> str:
        return self._root

    @property
    def tasks(self) -> tuple[str, ...]:
        """This worker's tasks (those being removed excluded)."""
        return tuple(t for t, s in self._slots.items() if s.stopping is None)

    @property
    def leading(self) -> frozenset[str]:
        """The tasks this worker leads now (local, no I/O)."""
        return frozenset(t for t, s in self._slots.items() if s.granted)

    @property
    def invalid_workers(self) -> dict[str, NodeDataError]:
        """Worker nodes ignored for invalid data, by node name, as of the last read."""
        return dict(self._invalid)

    def is_leader(self, task: str) -> bool:
        """True while this worker leads `task` (local and cheap; False for unknown tasks)."""
        if not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        slot = self._slots.get(task)
        return slot is not None and slot.granted

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> TaskLeadership:
        if self._entered:
            raise RuntimeError("a TaskLeadership can be entered only once")
        self._entered = True
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        try:
            await tg.start(self._watch_leaders)
            tg.start_soon(self._follow_connection)
            await tg.start(self._control)
            for slot in self._slots.values():
                tg.start_soon(self._run_slot, slot)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._shutdown(None, None, None)
            raise
        log.info(
            "worker %s (version %s) joined %s with %d tasks",
            self._worker.id,
            self._worker.version,
            self._root,
            len(self._slots),
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._shutdown(exc_type, exc, tb)

    async def _shutdown(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        """Stop leading, wait for ``lead()`` bodies (bounded), delete this worker's nodes."""
        if self._closed:
            return None
        self._closing = True
        for slot in self._slots.values():
            self._revoke(slot, "closed")
            slot.notify_grant()  # waiting lead() calls raise LeadershipLost("closed")
        tg, self._tg = self._tg, None
        swallowed: bool | None = None
        try:
            if tg is not None:
                tg.cancel_scope.cancel()
                # Pass the block's exception on, so the group's scope absorbs its own cancellation.
                swallowed = await tg.__aexit__(exc_type, exc, tb)
        finally:
            self._closed = True
            for send in list(self._subscribers):
                send.close()
            self._subscribers.clear()
            with anyio.CancelScope(shield=True):
                await self._cleanup()
            for slot in self._slots.values():
                slot.done.set()
        return swallowed

    async def _cleanup(self) -> None:
        """Delete our leader nodes and worker node in one transaction, after the bodies drained."""
        bound = max(self.coord.session_timeout, 1.0)
        with anyio.move_on_after(bound) as scope:
            for slot in self._slots.values():
                await slot.drained()
        if scope.cancelled_caught:
            log.warning("lead() bodies of %s did not finish within %.1fs", self._root, bound)
        session = self.coord.session_id
        if session is None or self._registered != session or self.coord.closed:
            return  # nothing of ours can be left: the session is gone (or closes with the coordinator)
        if self.coord.state not in _CONNECTED or self.coord.connected_address is None:
            # Disconnected (or the coordinator's own tasks were cancelled with ours): the
            # nodes go with the session; waiting for a connection here would only delay exit.
            log.info("worker %s left %s without deleting its nodes", self._worker.id, self._root)
            return
        with anyio.move_on_after(self._client.request_timeout()):
            try:
                ours = await self._client.ephemerals(self._leaders_path)
                paths = [p for p in ours if parent(p) == self._leaders_path]
                paths.append(self._my_path)
                try:
                    await self._client.multi([DeleteOp(p) for p in paths])
                except TransactionFailed:
                    for path in paths:  # one is gone already: delete what is left, one by one
                        with suppress(NoNodeError):
                            await self._client.delete(path)
            except CoordError as exc:
                log.warning("could not delete the nodes of worker %s: %s", self._worker.id, exc)
        log.info("worker %s left %s", self._worker.id, self._root)

    # --- background: connection, worker list, leader events ---------------------------------

    async def _follow_connection(self) -> None:
        async for event in self.coord.connection_events():
            self._on_connection(event)
        self._usable = None
        self._revoke_all("session lost")  # the coordinator closed under us

    def _on_connection(self, event: ConnectionEvent) -> None:
        state = event.state
        if state not in _CONNECTED:
            self._usable = None
            if state is ConnectionState.LOST:
                self._revoke_all("session lost")
            elif self._lose_on_suspend:
                self._revoke_all("suspended")
        if state is ConnectionState.LOST or event.new_session:
            for slot in self._slots.values():
                self._forget_session(slot)
        self._conn_changed.set()
        self._conn_changed = anyio.Event()
        for slot in self._slots.values():
            slot.poke()

    def _forget_session(self, slot: _Slot) -> None:
        """Our node of an ended session is not ours to lead with: delete it if it lingers."""
        held = slot.held
        if held is not None and held.session != self.coord.session_id:
            slot.held = None
            slot.stale = held.czxid
            slot.verify = False

    async def _control(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Register, read the worker list, keep it current; mark the session usable."""
        started = False
        while True:
            changed = self._conn_changed
            session = self.coord.session_id
            if self.coord.state in _CONNECTED and session is not None:
                try:
                    if self._registered != session:
                        await self._register(session)
                    names, watch = await self._client.children_watch(self._workers_path)
                    if self._worker.id not in names:
                        log.warning("worker node %s vanished; registering again", self._my_path)
                        self._registered = None
                        continue
                    await self._load_workers(names, watch)
                    if self.coord.session_id == session and not changed.is_set():
                        self._set_usable(session)
                    if not started:
                        task_status.started()
                        started = True
                    await _first_of(watch.wait, changed.wait)
                    continue
                except NoNodeError:
                    self._registered = None
                    continue
                except ConnectionLostError as exc:
                    log.debug("task leadership of %s: %s", self._root, exc)
            with anyio.move_on_after(_RETRY_DELAY if self.coord.state in _CONNECTED else math.inf):
                await changed.wait()

    async def _register(self, session: int) -> None:
        """Create our worker node; replace our own record of an older session; wait out a twin."""
        warned = False
        while True:
            try:
                created = await self._client.create(
                    self._my_path, self._record, mode=CreateMode.EPHEMERAL, make_parents=True
                )
            except NodeExistsError:
                try:
                    node = await self._client.get(self._my_path)
                except NoNodeError:
                    continue
                if node.stat.ephemeral_owner == session:
                    self._registered = session
                    return
                if node.data == self._record:  # ours, from a session that ended
                    with suppress(NoNodeError, BadVersionError):
                        await self._client.delete(self._my_path, version=node.stat.version)
                    continue
                if not warned:
                    log.warning(
                        "worker id %s is registered by another session (0x%x); waiting for it to go",
                        self._worker.id,
                        node.stat.ephemeral_owner,
                    )
                    warned = True
                stat, watch = await self._client.exists_watch(self._my_path)
                if stat is not None and stat.czxid == node.stat.czxid:
                    await watch.wait()
                continue
            self._registered = created.stat.ephemeral_owner
            log.info(
                "worker %s registered at %s (session 0x%x)",
                self._worker.id,
                self._my_path,
                self._registered,
            )
            return

    async def _load_workers(self, names: list[str], watch: Watch) -> None:
        """Read every worker record, ignore invalid ones, and recompute the choice."""
        nodes = await self._get_many(self._workers_path, names)
        view: dict[str, Worker] = {}
        invalid: dict[str, NodeDataError] = {}
        for name in sorted(nodes):
            path = join(self._workers_path, name)
            try:
                view[name] = decode_worker(path, name, nodes[name], self._version_key)
            except NodeDataError as exc:
                invalid[name] = exc
                if name not in self._invalid:
                    log.warning("ignoring worker %s: %s", name, exc)
        self._view, self._invalid, self._view_watch = view, invalid, watch
        self._recompute()

    def _recompute(self) -> None:
        versions = {worker_id: w.version for worker_id, w in self._view.items()}
        choice = assign(self._slots, versions, prefer=self._prefer, version_key=self._version_key)
        if choice.versions != self._versions:
            self._versions = choice.versions
            log.info(
                "%s: tasks go to version %s (%d of %d workers)%s",
                self._root,
                "/".join(sorted(choice.versions)) or "-",
                len(choice.candidates),
                len(versions),
                "",
            )
            if choice.cyclic:
                log.warning(
                    "%s: the versions present %s have no %s one under the version order "
                    "(a cycle); chose %s by the documented fallback",
                    self._root,
                    sorted(set(versions.values())),
                    self._prefer,
                    sorted(choice.versions),
                )
        now = time.monotonic()
        for slot in self._slots.values():
            desired = choice.leaders.get(slot.task)
            if desired != slot.desired:
                slot.desired, slot.desired_at = desired, now
            slot.poke()

    def _set_usable(self, session: int) -> None:
        if self._usable == session:
            return
        self._usable = session
        for slot in self._slots.values():
            # Leader events may have been missed while disconnected: check held nodes,
            # and let blocked tasks try again.
            self._forget_session(slot)
            slot.verify = slot.held is not None
            slot.blocked_at = None
            slot.poke()
        for send in list(self._subscribers):
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait((None, None))

    async def _watch_leaders(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """One persistent recursive watch on the leader nodes: wakes the tasks it concerns."""
        started = False
        while True:
            try:
                async with self._client.watch(self._leaders_path, recursive=True) as pw:
                    if not started:
                        task_status.started()
                        started = True
                    async for event in pw.events:
                        self._on_leader_event(event)
                return  # the coordinator closed
            except ConnectionLostError as exc:
                log.debug("watching %s: %s", self._leaders_path, exc)
                await self.coord.wait_connected()
                await anyio.sleep(_RETRY_DELAY)

    def _on_leader_event(self, event: WatchedEvent) -> None:
        if event.type is EventType.SESSION_LOST or parent(event.path) != self._leaders_path:
            return
        slot = self._slots.get(basename(event.path))
        if slot is None:
            return
        slot.events += 1
        if event.type is EventType.DELETED:
            slot.deletions += 1
            if slot.held is not None and not slot.deleting:
                slot.verify = True  # maybe our node, maybe an older one: check its czxid
        slot.poke()
        for send in list(self._subscribers):
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait((slot.task, event.type))

    # --- the per-task loop -----------------------------------------------------------------

    def _state(self, slot: _Slot) -> TaskState:
        session = self.coord.session_id
        return TaskState(
            usable=session is not None
            and self._usable == session
            and self._registered == session
            and self.coord.state in _CONNECTED,
            view_current=self._view_watch is not None and not self._view_watch.fired,
            desired=slot.desired == self._worker.id,
            desired_for=time.monotonic() - slot.desired_at,
            held=slot.held is not None,
            granted=slot.granted,
            stale=slot.stale is not None,
            verify=slot.verify,
            blocked=slot.blocked_at == slot.events,
            stopping=slot.stopping is not None or self._closing,
        )

    async def _run_slot(self, slot: _Slot) -> None:
        try:
            while True:
                wake = slot._wake
                self._forget_session(slot)
                decision = decide(self._state(slot), settle=self._settle)
                action = decision.action
                if action is Action.EXIT:
                    return
                if action in (Action.IDLE, Action.WAIT):
                    delay = decision.delay if decision.delay is not None else math.inf
                    with anyio.move_on_after(delay):
                        await wake.wait()
                    continue
                try:
                    await self._perform(slot, action)
                except ConnectionLostError as exc:  # outcome unknown: decide again when it settles
                    log.debug("task %s: %s failed: %s", slot.task, action.value, exc)
                    with anyio.move_on_after(_RETRY_DELAY):
                        await wake.wait()
        except CoordinatorClosedError:
            return
        finally:
            slot.done.set()

    async def _perform(self, slot: _Slot, action: Action) -> None:
        if action is Action.ACQUIRE:
            await self._acquire(slot)
        elif action is Action.GRANT:
            await slot.drained()  # the bodies of an earlier term finish first
            if slot.held is not None and not slot.granted and slot.desired == self._worker.id:
                self._grant(slot, slot.held)
        elif action is Action.REVOKE:
            reason = slot.stopping or ("closed" if self._closing else None)
            self._revoke(slot, reason or ("handed over" if slot.held else "node deleted"))
            await slot.drained()
        elif action is Action.DELETE:
            await self._delete(slot)
        elif action is Action.VERIFY:
            await self._verify(slot)
        elif action is Action.DROP_STALE:
            await self._drop_stale(slot)

    def _grant(self, slot: _Slot, held: _Held) -> None:
        slot.granted = True
        slot.holder = self._worker.id
        slot.term = TaskTerm(slot.task, held.czxid, self._worker.id, self._worker.version)
        slot.notify_grant()
        log.info("worker %s leads task %s (token 0x%x)", self._worker.id, slot.task, held.czxid)

    def _revoke(self, slot: _Slot, reason: str) -> None:
        if not slot.granted:
            return
        slot.granted = False
        slot.term = None
        for body in slot.bodies:
            if body.reason is None:
                body.reason = reason
                body.scope.cancel()
        slot.notify_grant()
        log.info("worker %s stopped leading task %s: %s", self._worker.id, slot.task, reason)

    def _revoke_all(self, reason: str) -> None:
        for slot in self._slots.values():
            self._revoke(slot, reason)

    async def _acquire(self, slot: _Slot) -> None:
        events, deletions = slot.events, slot.deletions
        try:
            created = await self._client.create(
                slot.path, self._leader_record, mode=CreateMode.EPHEMERAL, make_parents=True
            )
        except NodeExistsError:
            await self._inspect(slot, events)
            return
        held = _Held(created.stat.czxid, created.stat.ephemeral_owner, created.stat.version)
        slot.held = held
        slot.holder = self._worker.id
        slot.verify = slot.deletions != deletions  # a deletion seen meanwhile: of which node?
        self._forget_session(slot)

    async def _inspect(self, slot: _Slot, events: int) -> None:
        """The node exists: learn whose it is; adopt ours, delete our stale one, or wait."""
        try:
            node = await self._client.get(slot.path)
        except NoNodeError:
            return  # gone already: try again
        try:
            holder, _version = decode_leader(slot.path, node.data)
        except NodeDataError as exc:
            if slot.bad_czxid != node.stat.czxid:
                slot.bad_czxid = node.stat.czxid
                log.warning("task %s is blocked: %s", slot.task, exc)
            slot.holder = None
            slot.blocked_at = events
            return
        if holder == self._worker.id:
            if node.stat.ephemeral_owner == self.coord.session_id:
                # Our create went through although its answer was lost.
                slot.held = _Held(node.stat.czxid, node.stat.ephemeral_owner, node.stat.version)
                return
            with suppress(NoNodeError, BadVersionError):
                await self._client.delete(slot.path, version=node.stat.version)
            return
        slot.holder = holder
        slot.blocked_at = events

    async def _delete(self, slot: _Slot) -> None:
        """Hand the task over: its bodies have drained; delete our node (the only way to free it)."""
        await slot.drained()
        held = slot.held
        if held is None or slot.granted:
            return
        slot.deleting = True
        try:
            try:
                await self._client.delete(slot.path, version=held.version)
            except BadVersionError:  # someone wrote to our node: delete it if it is still ours
                stat = await self._client.exists(slot.path)
                if stat is not None and stat.czxid == held.czxid:
                    await self._client.delete(slot.path, version=stat.version)
        except NoNodeError:
            pass
        finally:
            slot.deleting = False
        if slot.held is held:
            slot.held = None
            slot.verify = False
            log.info("worker %s released task %s", self._worker.id, slot.task)

    async def _verify(self, slot: _Slot) -> None:
        held = slot.held
        if held is None:
            return
        slot.verify = False
        stat = await self._client.exists(slot.path)
        if slot.held is held and (stat is None or stat.czxid != held.czxid):
            log.warning("the leader node of task %s was deleted by someone else", slot.task)
            slot.held = None

    async def _drop_stale(self, slot: _Slot) -> None:
        czxid = slot.stale
        stat = await self._client.exists(slot.path)
        if stat is not None and stat.czxid == czxid:
            with suppress(NoNodeError, BadVersionError):
                await self._client.delete(slot.path, version=stat.version)
            log.info("deleted the leader node of task %s left by an ended session", slot.task)
        if slot.stale == czxid:
            slot.stale = None

    # --- lead() ----------------------------------------------------------------------------

    @asynccontextmanager
    async def lead(self, task: str) -> AsyncIterator[TaskTerm]:
        """Run the block while this worker leads `task`; yields the `TaskTerm`.

        Entering waits until this worker leads the task (bound it with
        `anyio.fail_after`).  The block runs in a cancel scope that is
        cancelled when leadership ends: hand-over to another worker, SUSPENDED
        (by default) or LOST, the node deleted by someone else, the task
        removed, or the recipe closed.  Once the block has exited, that raises
        ``LeadershipLost(path, reason)`` with `reason` one of ``"handed over"``,
        ``"suspended"``, ``"session lost"``, ``"node deleted"``,
        ``"task removed"``, ``"closed"``; a block that ends by itself while
        still leader raises nothing, and the task stays led.  Waiting for a
        task that gets removed, or a recipe that closes, raises
        `LeadershipLost` too.  Raises `ValueError` for a task this worker does
        not have (or no longer has) and `RuntimeError` once the recipe is
        closed, so a ``while True: try: async with tl.lead(t)`` loop ends.
        """
        if not isinstance(task, str):
            raise TypeError(f"task must be a str, not {type(task).__name__}")
        if not self._entered or self._closing:
            raise RuntimeError("lead() needs an entered TaskLeadership that is not closed")
        await anyio.lowlevel.checkpoint()
        slot = self._slots.get(task)
        if slot is None:
            raise ValueError(f"task {task!r} is not one of this worker's tasks (add_task() it)")
        while True:
            changed = slot._granted_changed
            if self._closing:
                raise LeadershipLost(slot.path, "closed")
            if slot.stopping is not None:
                raise LeadershipLost(slot.path, slot.stopping)
            if slot.granted and slot.term is not None:
                term = slot.term
                break
            await changed.wait()
        body = _Body()
        slot.bodies.add(body)
        try:
            with body.scope:
                yield term
        finally:
            slot.remove_body(body)
        if body.reason is not None:
            raise LeadershipLost(slot.path, body.reason)

    # --- reads -----------------------------------------------------------------------------

    async def _read_all(self, base: str) -> dict[str, bytes]:
        """Data of every child of `base` (read concurrently); {} if `base` does not exist."""
        try:
            names = await self._client.children(base)
        except NoNodeError:
            return {}
        return await self._get_many(base, names)

    async def _get_many(self, base: str, names: Iterable[str]) -> dict[str, bytes]:
        """Data of the children `names` of `base`, read concurrently; vanished ones left out.

        The first error other than `NoNodeError` is raised as it is (not in a group).
        """
        out: dict[str, bytes] = {}
        errors: list[CoordError] = []

        async def read(name: str) -> None:
            try:
                out[name] = (await self._client.get(join(base, name))).data
            except NoNodeError:
                pass
            except CoordError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(read, name)
        if errors:
            raise errors[0]
        return out

    async def leaders(self) -> dict[str, str]:
        """``{task: worker id}`` for every task led now, read from ZooKeeper.

        Covers every leader node under `root`, also of tasks this worker does
        not have; a node with invalid data is left out (and logged).
        """
        out: dict[str, str] = {}
        for task, data in sorted((await self._read_all(self._leaders_path)).items()):
            try:
                out[task], _ = decode_leader(join(self._leaders_path, task), data)
            except NodeDataError as exc:
                log.warning("%s", exc)
        return out

    async def workers(self) -> list[Worker]:
        """The live workers with valid records, read from ZooKeeper, by id.

        Invalid records are left out; `invalid_workers` lists them.
        """
        out: list[Worker] = []
        for name, data in sorted((await self._read_all(self._workers_path)).items()):
            with suppress(NodeDataError):
                out.append(
                    decode_worker(join(self._workers_path, name), name, data, self._version_key)
                )
        return out

    async def _read_change(self, task: str) -> TaskChange:
        path = join(self._leaders_path, task)
        while True:
            try:
                node = await self._client.get(path)
            except NoNodeError:
                return TaskChange(task, None)
            except ConnectionLostError:
                await self.coord.wait_connected()
                continue
            try:
                holder, version = decode_leader(path, node.data)
            except NodeDataError:
                return TaskChange(task, None)
            return TaskChange(task, holder, version, node.stat.czxid)

    async def changes(self) -> AsyncIterator[TaskChange]:
        """Who leads each of this worker's tasks: first the current leader of each, then changes.

        An async iterator of `TaskChange`, one per change of a task's leader as
        this worker sees it (a leader that comes and goes between two reads may
        be skipped).  Read on demand: no cost without subscribers.  Ends when
        the recipe closes.
        """
        if not self._entered or self._closing:
            raise RuntimeError("changes() needs an entered, open TaskLeadership")
        send, receive = anyio.create_memory_object_stream[tuple[str | None, EventType | None]](
            math.inf
        )
        self._subscribers.add(send)
        known: dict[str, TaskChange] = {}
        pending = set(self._slots)
        try:
            with receive:
                while True:
                    for task in sorted(pending):
                        if task in self._slots:
                            change = await self._read_change(task)
                            if known.get(task) != change:
                                known[task] = change
                                yield change
                    pending.clear()
                    try:
                        batch = [await receive.receive()]
                    except anyio.EndOfStream:
                        return
                    while True:
                        try:
                            batch.append(receive.receive_nowait())
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                    for name, etype in batch:
                        if name is None:
                            pending.update(self._slots)
                        elif etype is EventType.DELETED:
                            pending.discard(name)
                            if known.get(name, TaskChange(name, None)).leader is not None:
                                known[name] = TaskChange(name, None)
                                yield known[name]
                        else:
                            pending.add(name)
        finally:
            self._subscribers.discard(send)
            send.close()

    # --- tasks at run time -----------------------------------------------------------------

    async def add_task(self, task: str) -> None:
        """Start taking part in leading `task` (no-op if this worker already has it).

        All workers of a version should have the same tasks: the choice does
        not know which tasks a worker has, and a task whose chosen worker lacks
        it stays unled.
        """
        name = check_name("task", task)
        if self._tg is None:
            raise RuntimeError("enter the TaskLeadership (async with) before add_task()")
        slot = self._slots.get(name)
        if slot is not None:
            if slot.stopping is None:
                return
            await slot.done.wait()
        slot = _Slot(name, join(self._leaders_path, name))
        self._slots[name] = slot
        self._recompute()
        self._tg.start_soon(self._run_slot, slot)
        for send in list(self._subscribers):
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait((name, None))

    async def remove_task(self, task: str) -> None:
        """Stop leading `task`: cancel its bodies (``"task removed"``), let them drain, free it.

        Returns once this worker's leader node of the task is deleted (waiting
        for the connection if need be; bound it with `anyio.fail_after`).
        No-op for a task this worker does not have.
        """
        name = check_name("task", task)
        slot = self._slots.get(name)
        if slot is None:
            return
        if slot.stopping is None:
            slot.stopping = "task removed"
            slot.notify_grant()
            slot.poke()
        await slot.done.wait()
        if self._slots.get(name) is slot:
            del self._slots[name]

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("usable" if self._usable else "waiting")
        return (
            f"<TaskLeadership {self._root} worker={self._worker.id} "
            f"version={self._worker.version} leading={len(self.leading)}/{len(self._slots)} "
            f"{state}>"
        )


def task_leadership(
    coord: Coordinator,
    root: str,
    *,
    worker: Worker,
    tasks: Iterable[str],
    prefer: Prefer = "newest",
    version_key: VersionKey | None = None,
    settle: float = 1.0,
    lose_on_suspend: bool = True,
) -> TaskLeadership:
    """A `TaskLeadership` to use as ``async with task_leadership(...) as tl``.

    `worker` says who this process is (`Worker(version=...)`); `tasks` names
    the tasks (node names: no ``/``).  `prefer` picks the newest (default) or
    the oldest version's workers; `version_key` orders versions (default
    `maven_version_key`, Maven `ComparableVersion`; e.g. `packaging.version.Version`
    for PEP 440).  `settle` is how long (seconds) a leader waits after the choice
    moved a task away before it hands the task over.  Bad arguments raise
    `TypeError` or `ConfigError` (a `ValueError`) naming them.
    """
    return TaskLeadership(
        coord,
        root,
        worker=worker,
        tasks=tasks,
        prefer=prefer,
        version_key=version_key,
        settle=settle,
        lose_on_suspend=lose_on_suspend,
    )
