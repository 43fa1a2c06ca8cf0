"""Leader-node writes issued at the same moment go to ZooKeeper as one transaction.

When a newer worker joins, every old leader releases its share of the tasks
at once and the newcomer creates them all as the deletions arrive: hundreds of
single writes, each one a transaction the server must log.  So the writes are
gathered here instead: everything queued in one step of the event loop (the
tasks woken together, the callbacks of one burst of notifications) goes out
as one ``multi`` from a loop callback at the end of that step, before any task
runs again (several batches may be in flight at once).  Each caller gets
exactly the outcome it would have had alone:

- a create returns the new node's czxid (the fencing token) and owner.  A
  ``multi`` answers creates with their paths only, but every node it creates
  has the transaction's zxid (`MultiResults.zxid`) as czxid and the session
  that sent it as owner: no read is needed (if the session changed while the
  transaction was out, one read of one of the nodes decides);
- if the transaction fails, the failing write gets its own error (a create
  whose parent is missing is retried alone, with its parents) and every other
  write is sent again on its own;
- a lost connection fails every write of the batch with the same
  `ConnectionLostError` (outcome unknown, as for a single write); so does
  having no connection when the batch is due (nothing waits for one).

A write is queued with a callback (`queue_create`, `queue_delete`), as every
hand-over step of a task is, whether a callback or the task's loop takes it
(`_slot`): the step ends in the callback that gets the answer, without waking
the loop.  `create` and `delete` await the same outcome instead.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc

from aiocoord.errors import (
    ConnectionLostError,
    CoordError,
    NodeExistsError,
    NoNodeError,
    TransactionFailed,
)
from aiocoord.zk import CreateMode, CreateOp, DeleteOp, ZkClient
from aiocoord.zk.client import SentMulti

__all__ = ("Write", "WriteBatcher")

log = logging.getLogger("aiocoord.recipes.task_leadership")

_MAX_BATCH = 250  # keeps a multi far below the server's 1 MB packet limit


class Write:
    """One queued write; `created` or `error` is set when `done`."""

    __slots__ = ("created", "done", "error", "on_done", "op")

    def __init__(
        self, op: CreateOp | DeleteOp, on_done: Callable[[Write], None] | None = None
    ) -> None:
        self.op = op
        self.on_done = on_done  # called with the write once it is done (else `done` is set)
        self.done = anyio.Event() if on_done is None else None
        self.created: tuple[int, int] | None = None  # (czxid, ephemeral owner)
        self.error: BaseException | None = None


class WriteBatcher:
    """Gathers ephemeral creates and deletes into multis; `run` hosts its recoveries."""

    def __init__(self, client: ZkClient) -> None:
        self._client = client
        self._queue: list[Write] = []
        self._flush_handle: asyncio.Handle | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    async def create(self, path: str, data: bytes) -> tuple[int, int]:
        """Create an ephemeral node (parents as containers): ``(czxid, ephemeral owner)``.

        Errors as `ZkClient.create`.
        """
        write = await self._submit(Write(CreateOp(path, data, CreateMode.EPHEMERAL)))
        assert write.created is not None
        return write.created

    async def delete(self, path: str, version: int) -> None:
        """Delete a node at `version`.  Errors as `ZkClient.delete`."""
        await self._submit(Write(DeleteOp(path, version)))

    def queue_create(self, path: str, data: bytes, on_done: Callable[[Write], None]) -> None:
        """`create` without waiting: `on_done(write)` gets the outcome (errors as `create`)."""
        self._queue_write(Write(CreateOp(path, data, CreateMode.EPHEMERAL), on_done))

    def queue_delete(self, path: str, version: int, on_done: Callable[[Write], None]) -> None:
        """`delete` without waiting: `on_done(write)` gets the outcome (errors as `delete`)."""
        self._queue_write(Write(DeleteOp(path, version), on_done))

    def _queue_write(self, write: Write) -> None:
        self._queue.append(write)
        if self._flush_handle is None:
            # A loop callback, run after the callbacks and task steps already due:
            # the writes queued by those (the tasks woken together, the callbacks of
            # one burst of notifications) go out together, in one step.
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    async def _submit(self, write: Write) -> Write:
        self._queue_write(write)
        assert write.done is not None
        await write.done.wait()
        if write.error is not None:
            raise write.error
        return write

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Host the tasks that sort out failed batches, until cancelled."""
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                task_status.started()
                await anyio.sleep_forever()
        finally:
            self._tg = None

    # --- sending ---------------------------------------------------------------------------

    def _flush(self) -> None:
        self._flush_handle = None
        while self._queue:
            batch, self._queue = self._queue[:_MAX_BATCH], self._queue[_MAX_BATCH:]
            self._send(batch)

    def _send(self, batch: list[Write]) -> None:
        session = self._client.session.session_id
        try:
            sent = self._client.send_multi([w.op for w in batch])
        except Exception as exc:  # not connected, closed, or an operation refused
            for write in batch:
                self._finish(write, error=exc)
            return
        sent.add_done_callback(lambda sent: self._on_reply(batch, sent, session))

    def _on_reply(self, batch: list[Write], sent: SentMulti, session: int | None) -> None:
        try:
            results = sent.result()
        except TransactionFailed as exc:
            failed = batch[exc.failed_index]
            if isinstance(failed.op, CreateOp) and isinstance(exc.cause, NoNodeError):
                again = batch  # a parent is missing: every create makes its own
            else:
                self._finish(failed, error=exc.cause)
                again = [w for w in batch if w is not failed]
            for write in again:
                self._spawn(self._alone, write, writes=[write])
            return
        except Exception as exc:
            for write in batch:
                self._finish(write, error=exc)
            return
        creates = [w for w in batch if isinstance(w.op, CreateOp)]
        created: tuple[int, int] | None = None
        if creates:
            if session is None or self._client.session.session_id != session:
                self._spawn(self._read_back, batch, creates, session, writes=batch)
                return
            # Session ids are never reused, so the same one before and after means the
            # transaction ran in it: its nodes are ours, with its zxid as czxid.
            created = results.zxid, session
        for write in batch:
            self._finish(write, created=created if isinstance(write.op, CreateOp) else None)

    def _spawn(
        self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any, writes: list[Write]
    ) -> None:
        """Run `fn` in the batcher's task group; fail `writes` if it no longer runs."""
        if self._tg is None:
            for write in writes:
                self._finish(write, error=ConnectionLostError("task leadership is closing"))
            return
        self._tg.start_soon(fn, *args)

    async def _read_back(
        self, batch: list[Write], creates: list[Write], session: int | None
    ) -> None:
        """The session changed while the batch was out: read whose its nodes are."""
        created: tuple[int, int] | None = None
        for write in creates:
            try:
                stat = await self._client.exists(write.op.path)
            except CoordError:
                break
            if stat is not None and stat.ephemeral_owner == session and stat.version == 0:
                created = stat.czxid, stat.ephemeral_owner
                break
        for write in batch:
            if write not in creates:
                self._finish(write)
            elif created is None:
                # Created, but no node of the batch could be read back as ours: let the
                # task read its node itself (it adopts a node of its own session).
                self._finish(write, error=NodeExistsError(path=write.op.path))
            else:
                self._finish(write, created=created)

    async def _alone(self, write: Write) -> None:
        op = write.op
        try:
            if isinstance(op, CreateOp):
                created = await self._client.create(
                    op.path, op.data, mode=op.mode, make_parents=True
                )
                self._finish(write, created=(created.stat.czxid, created.stat.ephemeral_owner))
            else:
                await self._client.delete(op.path, version=op.version)
                self._finish(write)
        except CoordError as exc:
            self._finish(write, error=exc)

    @staticmethod
    def _finish(
        write: Write,
        *,
        created: tuple[int, int] | None = None,
        error: BaseException | None = None,
    ) -> None:
        write.created, write.error = created, error
        if write.done is not None:
            write.done.set()
        elif write.on_done is not None:
            try:
                write.on_done(write)
            except Exception:  # a bug in the callback: the other writes must still finish
                log.exception("write callback for %s failed", write.op.path)
