"""The CAS lock's writes to its node: create, conditional set, and learning a lost reply's outcome.

Pure I/O on one node, with no lock state: the lock passes the record, the
version it read and its holder id.  A write whose reply was lost is never
assumed to have failed: the node is read back, and our exact bytes at the
next version mean it landed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from ...errors import ConnectionLostError, NodeExistsError, NoNodeError
from ...zk import Node, Stat, Watch, ZkClient
from .._cas_write import Resend, cas_write, read_back
from ._record import LockRecord, decode, encode

__all__ = ("NodeWriter", "View")

log = logging.getLogger("aiocoord.recipes.cas_lock")


@dataclass(slots=True)
class View:
    """What a contender knows of the node: its content (None: no node) and maybe a watch.

    `known`: not read but remembered from our own last write, so possibly
    stale; it is only ever used for a CAS, which fails if it is.
    """

    node: Node | None
    watch: Watch | None = None
    known: bool = False


class NodeWriter:
    """Writes lock records to `path` through `client`; see the module docstring."""

    def __init__(self, client: ZkClient, path: str) -> None:
        self._client = client
        self.path = path

    async def create(self, record: LockRecord) -> Stat | None:
        """Create the node holding `record`; None if someone else created it first."""
        data = encode(record)
        try:
            return (await self._client.create(self.path, data, make_parents=True)).stat
        except NodeExistsError:
            return None
        except ConnectionLostError:
            pass  # outcome unknown: look
        try:
            node = await self._client.get(self.path)
        except NoNodeError:
            return None
        return node.stat if node.data == data else None

    async def cas(
        self, record: LockRecord, version: int, *, watch: bool
    ) -> tuple[Stat | None, View | None]:
        """The acquiring CAS, pipelined with a read of what is there after it.

        Returns the write's stat (None: the CAS lost) and, when it lost, the
        node that won (with a watch if asked), so that losing costs no extra
        round trip.  A lost reply is resolved as in `write`.
        """
        data = encode(record)
        try:
            stat, node, watcher = await self._client.set_and_get(
                self.path, data, version, watch=watch
            )
        except ConnectionLostError as exc:
            log.debug("lock %s: write interrupted (%s); reading it back", self.path, exc)
            outcome = await read_back(self._client, self.path, data, version)
            if isinstance(outcome, Resend):
                return await self.write(record, version), None
            return outcome, None
        return stat, (None if stat is not None else View(node, watcher))

    async def write(self, record: LockRecord, version: int) -> Stat | None:
        """``setData`` conditional on `version`; None when the CAS lost.

        A write whose reply was lost is resolved by reading the node back:
        our exact bytes at ``version + 1`` mean it landed; the old version
        means it did not (and it is sent again); anything else is a lost CAS.
        Raises `ConnectionLostError` if the read cannot be done either, or the
        connection keeps dropping (see ``recipes/_cas_write``).
        """
        return await cas_write(
            self._client, self.path, encode(record), version, log=log, recipe="lock"
        )

    async def join(self, record: LockRecord, version: int) -> View:
        """Add a waiter to a held record's ``recent`` by CAS: what is there after, with a watch.

        Whether the CAS landed or lost, the pipelined read shows the record as
        it is now; a lost reply raises `ConnectionLostError` (the caller reads
        again: joining twice is harmless, the id is listed once).
        """
        _, node, watcher = await self._client.set_and_get(
            self.path, encode(record), version, watch=True
        )
        return View(node, watcher)

    async def write_ours(
        self, new: LockRecord, version: int, holder: str
    ) -> tuple[Stat, LockRecord] | None:
        """CAS on `version`; after a lost CAS, write again if the record is still `holder`'s.

        A renewal whose outcome stayed unknown may have landed: the record then
        carries our holder id at a later version, and we simply continue from it.
        A waiter may have added itself to ``recent`` meanwhile: the write again
        keeps the list it finds.  Returns the write's stat and what it wrote.
        """
        while True:
            stat = await self.write(new, version)
            if stat is not None:
                return stat, new
            try:
                node = await self._client.get(self.path)
            except NoNodeError:
                return None
            current = decode(self.path, node.data)
            if current is None or not current.held or current.holder != holder:
                return None
            new, version = replace(new, recent=current.recent), node.stat.version
