"""One transaction for the writes that concurrent job runs make in the same step.

A worker running many jobs at once makes the same writes for each (the
RUNNING mark; the result with the assignment's delete).  `Coalescer.apply`
gathers the operations of the callers that arrive in one step of the event
loop and sends them as one transaction: under load fewer requests and fewer
writes for the server to log, and a lone caller pays nothing more (it is told
to go alone).  A shared transaction is all or nothing: refused (one job was
cancelled meanwhile, say) or of unknown outcome (the connection dropped), it
tells every caller to make its own request, which each does idempotently, so
the failure of one job is still that job's alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from ..errors import CoordError, CoordinatorClosedError
from ..zk.client import ZkClient
from ..zk.types import Op

__all__ = ("Coalescer",)

_MAX_BYTES = 256 * 1024  # node data per shared transaction (a request is at most 1 MB)


@dataclass(eq=False)
class _Batch:
    ops: list[Op]
    size: int
    callers: int = 1
    done: anyio.Event = field(default_factory=anyio.Event)
    applied: bool = False
    closed: CoordinatorClosedError | None = None


class Coalescer:
    """Shares transactions among the callers of `apply` in one step of the event loop."""

    def __init__(self, client: ZkClient, *, max_bytes: int = _MAX_BYTES) -> None:
        self._client = client
        self._max_bytes = max_bytes
        self._open: _Batch | None = None
        self.shared = 0  # transactions sent for more than one caller

    async def apply(self, ops: Sequence[Op], size: int) -> bool:
        """True if `ops` were applied in a shared transaction; False: make the request alone.

        `size` is the node data the operations carry.  Raises
        `CoordinatorClosedError` if the coordinator closed meanwhile.
        """
        batch = self._open
        if batch is not None and batch.size + size <= self._max_bytes:
            batch.ops.extend(ops)
            batch.size += size
            batch.callers += 1
            await batch.done.wait()
            if batch.closed is not None:
                raise batch.closed
            return batch.applied
        batch = self._open = _Batch(list(ops), size)
        try:
            await anyio.lowlevel.cancel_shielded_checkpoint()  # the others of this step join
        finally:
            if self._open is batch:
                self._open = None
        if batch.callers == 1:
            return False
        # Shielded: the others wait for this outcome, even if our own run is cancelled now
        # (its assignment deleted, by this very transaction among others).
        with anyio.CancelScope(shield=True):
            try:
                await self._client.multi(batch.ops)
                batch.applied = True
                self.shared += 1
            except CoordinatorClosedError as exc:
                batch.closed = exc
            except CoordError:
                batch.applied = False
            finally:
                batch.done.set()
        if batch.closed is not None:
            raise batch.closed
        return batch.applied
