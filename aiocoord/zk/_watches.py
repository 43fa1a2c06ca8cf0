"""Watch bookkeeping by the server-side kind of watch.

The server keeps data, exist, child, persistent and persistent-recursive
watches apart; so does this registry, keyed by (kind, server path), so that
all of them are restored after a reconnect (aiozk dropped exist watches that
waited for a deletion).  One-shot watches fire once and are forgotten;
persistent ones stay until removed.  When the session is lost every one-shot
watch fires with `EventType.SESSION_LOST`, since the server forgot it.

A one-shot watch is held here only while it can still matter: strongly while
it has callbacks (they run when it fires, whoever still holds it), weakly
otherwise, so that a watch its owner dropped without firing or removing it
(a wait given up on a node that never changes, set again after every
reconnect) is forgotten with the owner's last reference instead of being
kept, and restored on every reconnect, until the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator

import anyio
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .types import EventType, WatchedEvent

__all__ = ("PersistentWatch", "Watch", "WatchKind", "WatchRegistry")

log = logging.getLogger(__name__)


class WatchKind(enum.Enum):
    DATA = "data"
    EXIST = "exist"
    CHILD = "child"
    PERSISTENT = "persistent"
    PERSISTENT_RECURSIVE = "persistent_recursive"

    # Members are singletons compared by identity: hash them so too (Enum's own
    # hash is a Python call, paid on every registry lookup of every notification).
    __hash__ = object.__hash__


def _call_safely(callback: Callable[[WatchedEvent], None], event: WatchedEvent, path: str) -> None:
    """Run a watch callback where the notification is read: its error is logged, not raised."""
    try:
        callback(event)
    except Exception:
        log.exception("watch callback %r on %s failed", callback, path)


class Watch:
    """A one-shot watch: `await watch.wait()` returns the event that fired it."""

    # A recipe keeps a watch or two per participant, most never waited on by a task:
    # slots, and the event to wake waiters is made only for the first one.
    __slots__ = ("__weakref__", "_callbacks", "_fired", "_kept_by", "event", "kind", "path")

    def __init__(self, kind: WatchKind, path: str) -> None:
        self.kind = kind
        self.path = path
        self.event: WatchedEvent | None = None
        self._fired: asyncio.Event | None = None
        self._callbacks: list[Callable[[WatchedEvent], None]] = []
        # The registry's set of watches kept for their callbacks, once registered there.
        self._kept_by: set[Watch] | None = None

    @property
    def fired(self) -> bool:
        return self.event is not None

    def add_callback(self, callback: Callable[[WatchedEvent], None]) -> None:
        """Call `callback(event)` when the watch fires, before any waiter wakes.

        It runs synchronously where the notification is delivered (no task to
        wake), so it must be quick and must not await; an exception it raises
        is logged and dropped.  A watch that has already fired calls it at once.
        """
        if self.event is not None:
            _call_safely(callback, self.event, self.path)
        else:
            self._callbacks.append(callback)
            if self._kept_by is not None:
                self._kept_by.add(self)  # held for the callback, even once its owner lets go

    def _registered(self, kept: set[Watch]) -> None:
        self._kept_by = kept
        if self._callbacks:
            kept.add(self)

    def _unregistered(self) -> None:
        if self._kept_by is not None:
            self._kept_by.discard(self)
            self._kept_by = None

    def _fire(self, event: WatchedEvent) -> None:
        if self.event is None:
            self.event = event
            self._unregistered()
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                _call_safely(callback, event, self.path)
            if self._fired is not None:
                self._fired.set()

    async def wait(self) -> WatchedEvent:
        """Wait until the watch fires; returns the event (SESSION_LOST if the session ended)."""
        if self.event is None:
            if self._fired is None:
                self._fired = asyncio.Event()
            await self._fired.wait()
        else:
            await anyio.lowlevel.checkpoint()
        assert self.event is not None
        return self.event

    def __repr__(self) -> str:
        return f"<Watch {self.kind.value} {self.path} {'fired' if self.fired else 'armed'}>"


class PersistentWatch:
    """A persistent (optionally recursive) watch's event stream."""

    def __init__(self, path: str, recursive: bool) -> None:
        self.path = path
        self.recursive = recursive
        send: MemoryObjectSendStream[WatchedEvent]
        receive: MemoryObjectReceiveStream[WatchedEvent]
        send, receive = anyio.create_memory_object_stream[WatchedEvent](math.inf)
        self._send = send
        self.events = receive
        self._callback: Callable[[WatchedEvent], None] | None = None

    @property
    def kind(self) -> WatchKind:
        return WatchKind.PERSISTENT_RECURSIVE if self.recursive else WatchKind.PERSISTENT

    def set_callback(self, callback: Callable[[WatchedEvent], None]) -> None:
        """Hand every event to `callback(event)` where its notification is read, not to `events`.

        Events already waiting in `events` go to it first, so the order is
        kept; `events` then only ends when the watch does.  As for
        `Watch.add_callback`: quick, no awaiting, an exception is logged and dropped.
        """
        while True:
            try:
                event = self.events.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            _call_safely(callback, event, self.path)
        self._callback = callback

    def _deliver(self, event: WatchedEvent) -> None:
        if self._callback is not None:
            _call_safely(self._callback, event, self.path)
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(event)

    def _close(self) -> None:
        self._send.close()


def _alive(refs: list[weakref.ref[Watch]] | tuple[()]) -> Iterator[Watch]:
    """The watches still held by someone among `refs`."""
    for ref in refs:
        watch = ref()
        if watch is not None:
            yield watch


_EVENT_TYPES: dict[int, EventType] = {int(t): t for t in EventType}
_FIRES: dict[int, tuple[WatchKind, ...]] = {
    EventType.CREATED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.DATA_CHANGED: (WatchKind.DATA, WatchKind.EXIST),
    EventType.DELETED: (WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD),
    EventType.CHILDREN_CHANGED: (WatchKind.CHILD,),
}


_SWEEP_EVERY = 1024  # registrations between sweeps of keys whose watches were all dropped


class WatchRegistry:
    """Live watches by (kind, server path); routes notifications to them."""

    def __init__(self) -> None:
        # One-shot watches, weakly (see the module docstring); a dropped one leaves a dead
        # reference, pruned when its key is registered again or by the next sweep.
        self._one_shot: dict[tuple[WatchKind, str], list[weakref.ref[Watch]]] = defaultdict(list)
        self._kept: set[Watch] = set()  # the one-shot watches held for their callbacks
        self._until_sweep = _SWEEP_EVERY
        self._persistent: dict[tuple[WatchKind, str], list[PersistentWatch]] = defaultdict(list)
        # Server paths with a live recursive watch, each with the prefix of the paths below it.
        self._recursive: dict[str, str] = {}
        # Server paths with a one-shot watch request in flight: the server may hold its watch
        # before the reply registers it here, so a removeWatches now would take it away.
        self._arming: dict[str, int] = {}

    def watched(self, server_path: str) -> bool:
        """Whether any live watch (of any kind, or a request setting one) is on `server_path`."""
        return server_path in self._arming or any(
            any(_alive(self._one_shot.get((kind, server_path), ())))
            or self._persistent.get((kind, server_path))
            for kind in WatchKind
        )

    def counts(self) -> dict[str, int]:
        """How many watches are held: ``one_shot`` (live `Watch` objects), ``kept`` (of those,
        held for their callbacks), ``persistent``, and ``keys`` (one-shot (kind, path) entries)."""
        return {
            "one_shot": sum(1 for refs in self._one_shot.values() for _ in _alive(refs)),
            "kept": len(self._kept),
            "persistent": sum(len(watches) for watches in self._persistent.values()),
            "keys": len(self._one_shot),
        }

    def arm(self, server_path: str) -> None:
        """A request that sets a one-shot watch on `server_path` is about to be sent."""
        self._arming[server_path] = self._arming.get(server_path, 0) + 1

    def disarm(self, server_path: str) -> None:
        """That request is answered (its watch registered, if any) or given up."""
        left = self._arming.get(server_path, 0) - 1
        if left > 0:
            self._arming[server_path] = left
        else:
            self._arming.pop(server_path, None)

    def add(self, watch: Watch, server_path: str) -> None:
        refs = self._one_shot[(watch.kind, server_path)]
        refs[:] = [ref for ref in refs if ref() is not None]  # the ones dropped since
        refs.append(weakref.ref(watch))
        watch._registered(self._kept)
        self._until_sweep -= 1
        if self._until_sweep <= 0:
            self._sweep()

    def _sweep(self) -> None:
        """Forget the keys whose watches were all dropped (each path watched once, say)."""
        one_shot = self._one_shot
        for key in [key for key, refs in one_shot.items() if not any(_alive(refs))]:
            del one_shot[key]
        self._until_sweep = max(_SWEEP_EVERY, len(one_shot))

    def discard(self, watch: Watch, server_path: str) -> bool:
        """Unregister a one-shot watch that has not fired (it never will); False if not here."""
        key = (watch.kind, server_path)
        refs = self._one_shot.get(key)
        if refs is None:
            return False
        left = [ref for ref in refs if (w := ref()) is not None and w is not watch]
        found = len(left) < sum(1 for _ in _alive(refs))
        if left:
            refs[:] = left
        else:
            del self._one_shot[key]
        if found:
            watch._unregistered()
        return found

    def add_persistent(self, watch: PersistentWatch, server_path: str) -> bool:
        """Register; True when this is the first such watch on the path (send addWatch)."""
        key = (watch.kind, server_path)
        first = not self._persistent.get(key)
        self._persistent[key].append(watch)
        if watch.recursive:
            self._recursive[server_path] = server_path.rstrip("/") + "/"
        return first

    def remove_persistent(self, watch: PersistentWatch, server_path: str) -> bool:
        """Unregister; True when it was the last such watch on the path (send removeWatches)."""
        key = (watch.kind, server_path)
        watches = self._persistent.get(key, [])
        if watch in watches:
            watches.remove(watch)
        watch._close()
        if not watches:
            self._persistent.pop(key, None)
            if watch.recursive:
                self._recursive.pop(server_path, None)
            return True
        return False

    def dispatch(self, type_: int, server_path: str, client_path: str) -> None:
        """Deliver one server notification to every watch it fires."""
        etype = _EVENT_TYPES.get(type_)
        if etype is None or etype is EventType.SESSION_LOST:
            return  # watch-removed notifications and unknown types carry nothing for us
        event = WatchedEvent(etype, client_path)
        one_shot = self._one_shot
        if one_shot:
            for kind in _FIRES[etype]:
                for watch in list(_alive(one_shot.pop((kind, server_path), ()))):
                    watch._fire(event)
        persistent = self._persistent
        if not persistent:
            return
        for pwatch in persistent.get((WatchKind.PERSISTENT, server_path), ()):
            pwatch._deliver(event)
        if self._recursive and etype is not EventType.CHILDREN_CHANGED:
            # A recursive watch sees events on its path and below (never children-changed).
            for base, below in self._recursive.items():
                if server_path.startswith(below) or server_path == base:
                    for pwatch in persistent.get((WatchKind.PERSISTENT_RECURSIVE, base), ()):
                        pwatch._deliver(event)

    def persistent_keys(self) -> list[tuple[WatchKind, str]]:
        """(kind, server path) of every live persistent watch."""
        return [key for key, watches in self._persistent.items() if watches]

    def session_lost(self) -> None:
        """The session ended: fire every one-shot watch with SESSION_LOST, tell persistent ones.

        Returns the persistent (kind, server path) pairs to add again on the new session.
        """
        one_shot, self._one_shot = self._one_shot, defaultdict(list)
        for watch in [w for refs in one_shot.values() for w in _alive(refs)]:
            watch._fire(WatchedEvent(EventType.SESSION_LOST, watch.path))
        for pwatches in self._persistent.values():
            for pwatch in pwatches:
                pwatch._deliver(WatchedEvent(EventType.SESSION_LOST, pwatch.path))

    def snapshot(self) -> dict[WatchKind, list[str]]:
        """Server paths of every live watch by kind, for SetWatches2 after a reconnect."""
        out: dict[WatchKind, list[str]] = {kind: [] for kind in WatchKind}
        for (kind, path), refs in self._one_shot.items():
            if any(not w.fired for w in _alive(refs)):
                out[kind].append(path)
        for (kind, path), pwatches in self._persistent.items():
            if pwatches:
                out[kind].append(path)
        return out

    def close(self) -> None:
        """Coordinator closed: wake every waiter with SESSION_LOST and end persistent streams."""
        self.session_lost()
        for pwatches in self._persistent.values():
            for pwatch in pwatches:
                pwatch._close()
        self._persistent.clear()
        self._recursive.clear()
