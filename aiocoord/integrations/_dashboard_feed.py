"""`DashboardFeed`: the one ZooKeeper watcher behind a dashboard, shared by every viewer.

One persistent recursive watch on the dashboard's path (``addWatch``, kept by
the client across reconnects and added again on a new session) marks the view
dirty; a reader re-reads the path the way ``aiocoord inspect`` does
(`aiocoord.inspection.inspect_path`: each recipe recognised by its layout and read through its
describe API), at most once per `debounce` for a burst of notifications, and
publishes a new document.  Viewers wait for a newer document than the one
they have (`next_document`): a slow viewer skips to the latest and never
holds up the watcher or the other viewers; the number of viewers never
changes the load on ZooKeeper.

Connection states are published as they happen.  While SUSPENDED or LOST the
last read stays on show, marked by the state; every CONNECTED or RECONNECTED
reads again, so what changed while disconnected (a leader that went with a
lost session) appears as soon as the session is back.

Why not a `tree_cache`: the feed needs to know *that* something changed
below the path, then a bounded, recipe-aware read (`inspect_path` walks at
most ``MAX_NODES`` plain nodes, and each recipe's describe API reads what it
needs, at most ``MAX_READS`` of a scheduler's jobs and results).  A tree
cache would hold every node below the path, a scheduler's results
included, and fail past its ``max_nodes`` where the dashboard works today,
while the describe APIs would still read from ZooKeeper.  So the feed holds
the same persistent recursive watch the cache is built on, without the
copy.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

import anyio
from anyio.abc import TaskStatus

from ..errors import (
    ConnectionLostError,
    CoordError,
    CoordinatorClosedError,
    NoAuthError,
    NoNodeError,
)
from ..inspection import inspect_path
from ..session import ConnectionState, Coordinator
from ._dashboard_changes import changes

__all__ = ("DashboardFeed",)

log = logging.getLogger(__name__)

Document = dict[str, Any]

_USABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED, ConnectionState.READ_ONLY)
_RETRY = 1.0  # seconds before a refused watch, or a read that did not get through, is tried again


class DashboardFeed:
    """Watches `path` on `coord` and publishes what is there; run it with `run`.

    `depth` is how many levels of plain nodes are walked (as ``inspect
    --depth``); `history` how many recent changes each document carries.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        *,
        depth: int = 4,
        debounce: float = 0.05,
        history: int = 100,
    ) -> None:
        self.coord = coord
        self.path = path
        self.depth = depth
        self.debounce = debounce
        self._dirty = anyio.Event()
        self._published = anyio.Event()
        self._seq = 0
        self._state: ConnectionState | None = coord.state
        self._tree: dict[str, Any] | None = None
        self._error: str | None = None
        self._read_at: float | None = None
        self._read_took = 0.0
        self._changes: deque[dict[str, Any]] = deque(maxlen=history)
        self._document = self._build()

    @property
    def document(self) -> Document:
        """The latest document (plain JSON-able data); ``seq`` grows with each one."""
        return self._document

    async def next_document(self, after: int) -> Document:
        """The latest document once its ``seq`` is greater than `after` (at once if it is)."""
        while self._document["seq"] <= after:
            await self._published.wait()
        return self._document

    # --- running -------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Watch and re-read until cancelled; started once the connection state is known.

        The first read follows at once; viewers see it as the next document.
        """
        async with anyio.create_task_group() as tg:
            await tg.start(self._follow_states)
            tg.start_soon(self._watch)
            tg.start_soon(self._reader)
            task_status.started()

    async def _follow_states(self, *, task_status: TaskStatus[None]) -> None:
        started = False
        async for event in self.coord.connection_events():
            if self._state is not event.state and started:
                reason = f" ({event.reason})" if event.reason else ""
                self._log_change("", "session", f"connection {event.state.value}{reason}")
            self._state = event.state
            if event.state in _USABLE:
                self._dirty.set()  # what changed while disconnected shows up now
            self._publish()
            if not started:
                started = True
                task_status.started()

    async def _watch(self) -> None:
        client = self.coord.client
        while True:
            try:
                await self.coord.client.session.wait_connected()
                async with client.watch(self.path, recursive=True) as watch:
                    self._dirty.set()  # read once the watch is in place: nothing falls between
                    async for _event in watch.events:
                        self._dirty.set()
                return  # the events end only when the coordinator closes
            except CoordinatorClosedError:
                return
            except ConnectionLostError:
                continue  # the request went with the connection: again once connected
            except CoordError as exc:
                log.warning("dashboard: cannot watch %s: %s", self.path, exc)
                self._error = f"cannot watch {self.path}: {exc}"
                self._publish()
                await anyio.sleep(_RETRY)

    async def _reader(self) -> None:
        while True:
            await self._dirty.wait()
            # One read for a burst of notifications, and never back to back: reading a large
            # tree takes at most half of the time however busy it is.
            await anyio.sleep(max(self.debounce, self._read_took))
            self._dirty = anyio.Event()
            began = time.monotonic()
            try:
                await self._read()
            except CoordinatorClosedError:
                return
            self._read_took = time.monotonic() - began

    async def _read(self) -> None:
        tree: dict[str, Any] | None
        try:
            tree = await inspect_path(self.coord, self.path, depth=self.depth)
            error = None
        except ConnectionLostError:
            # Again once connected, or in a second if the connection never dropped (slow server).
            with anyio.move_on_after(_RETRY):
                await self.coord.client.session.wait_connected()
            self._dirty.set()
            return
        except NoNodeError:
            tree, error = None, f"{self.path} does not exist (yet)"
        except NoAuthError:
            tree, error = None, f"{self.path} is not readable with these credentials"
        except CoordError as exc:
            tree, error = self._tree, f"cannot read {self.path}: {exc}"
        for change in changes(self._tree, tree):
            self._log_change(change["path"], change["kind"], change["text"])
        self._tree, self._error, self._read_at = tree, error, time.time()
        self._publish()

    # --- documents -----------------------------------------------------------------------------

    def _log_change(self, path: str, kind: str, text: str) -> None:
        log.info("dashboard: %s %s", path or self.path, text)
        self._changes.append({"at": time.time(), "path": path, "kind": kind, "text": text})

    def _publish(self) -> None:
        self._seq += 1
        self._document = self._build()
        published, self._published = self._published, anyio.Event()
        published.set()

    def _build(self) -> Document:
        sid = self.coord.client.session.session_id
        return {
            "seq": self._seq,
            "path": self.path,
            "hosts": self.coord.settings.hosts,
            "state": self._state.value if self._state is not None else "CONNECTING",
            "session_id": f"0x{sid:x}" if sid else None,
            "tree": self._tree,
            "error": self._error,
            "read_at": self._read_at,
            "changes": list(self._changes),
        }

    def __repr__(self) -> str:
        state = self._state.value if self._state is not None else "CONNECTING"
        return f"<DashboardFeed {self.path} {state} seq={self._seq}>"
