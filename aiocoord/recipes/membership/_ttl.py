"""`PersistentTtlNode` and `persistent_ttl_node()`: a node that outlives its owner by a TTL.

Curator's ``PersistentTtlNode``.  Node layout::

    <path>          CONTAINER            the caller's data
    <path>/touch    PERSISTENT_WITH_TTL  ttl ms; Curator's default data (the local host's IP address)

Failure handling: the container is a `ContainerNode`, a persistent node's
core: made when missing (after the server removed it, or anyone deleted it),
and the caller's data written to it, also to a node found there.  The owner
writes ``touch`` every ``ttl / 2`` ms (Curator's touch schedule factor 2):
a set, or a create when missing, as Curator's ``create().orSetData()``;
also at once on entering and each time the container changes, and again as
soon as a connection is back after a lost one.  The server's container
manager removes ``touch`` once it was not written for `ttl` ms, then the
container once it is empty, so the node stays while its owner lives,
through reconnects and new sessions (nothing here is ephemeral), and goes
about a TTL after its owner dies or leaves.  Leaving deletes nothing
(Curator's ``close()``), unless ``aclose(delete=True)``.  A server without
``zookeeper.extendedTypesEnabled=true`` refuses the TTL child: entering
raises `ConfigError` naming that setting, after deleting the container it
made (an empty container that never had a child is never removed).
"""

from __future__ import annotations

import contextlib
import logging
import socket
from typing import Final

import anyio
import anyio.abc

from ..._checks import check_coordinator
from ..._lifecycle import Lifecycle, Phase, Service
from ..._status_view import StatusView
from ...errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    NodeExistsError,
    NoNodeError,
    ZooKeeperError,
)
from ...session import Coordinator
from ...zk import CreateMode, Stat
from ...zk.paths import join
from .._change_signal import ChangeSignal
from ._persistent import ContainerNode

__all__ = ("TOUCH", "PersistentTtlNode", "persistent_ttl_node")

log = logging.getLogger("aiocoord.recipes.membership")

TOUCH: Final = "touch"
"""The TTL child's name (Curator's ``PersistentTtlNode.DEFAULT_CHILD_NODE_NAME``)."""

MAX_TTL: Final = (1 << 40) - 1
"""The longest TTL the server takes, in milliseconds (ZooKeeper's ``EphemeralType.TTL``)."""

_UNIMPLEMENTED: Final = -6  # the server's answer to a TTL create without extendedTypesEnabled
_SETTING: Final = "zookeeper.extendedTypesEnabled"

_local_address: bytes | None = None


async def default_data() -> bytes:
    """Curator's default node data: the local host's IP address as text (b"" if unknown).

    ``CuratorFrameworkFactory.getLocalAddress()``, looked up once per process
    (an IPv4 address first, as Java prefers); the lookup runs in a worker
    thread, bounded.
    """
    global _local_address
    if _local_address is None:
        found = b""
        with anyio.move_on_after(5):
            try:
                infos = await anyio.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
            except OSError:
                infos = []
            ipv4 = [info for info in infos if info[0] == socket.AF_INET]
            for info in ipv4 or infos:
                found = str(info[4][0]).encode()
                break
        _local_address = found
    return _local_address


def _check_ttl(ttl: object) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise TypeError(f"ttl must be an int number of milliseconds, not {type(ttl).__name__}")
    if not 0 < ttl <= MAX_TTL:
        raise ConfigError("ttl", f"must be a number of milliseconds from 1 to {MAX_TTL}, not {ttl}")
    return ttl


class PersistentTtlNode(Service):
    """A node at `path` that lives while its owner does and about `ttl` ms after.

    Curator's ``PersistentTtlNode``: a CONTAINER at `path` holding `data`,
    with a TTL child ``touch`` written every ``ttl / 2`` ms (see the module
    docstring).  Entering blocks until the container is there and ``touch``
    written (waiting for a connection if need be: bound it with
    `anyio.fail_after`); leaving stops the writes and deletes nothing: the
    server removes the node about `ttl` ms later unless another owner (a
    Java ``PersistentTtlNode`` on the same path, say) keeps it.

    While SUSPENDED the holder sees nothing: the writes wait for the
    connection, and the node stays on the server for the TTL meanwhile.
    After LOST the new session writes ``touch`` at once; the container is
    made again if the server removed it (away longer than the TTL).  Raises
    `ConfigError` naming ``zookeeper.extendedTypesEnabled`` on entering if
    the server refuses TTL nodes; `InvalidPathError`, `ConfigError` or
    `TypeError` for bad arguments.
    """

    def __init__(self, coord: Coordinator, path: str, *, ttl: int, data: bytes = b"") -> None:
        self._coord = check_coordinator(coord)
        self._ttl = _check_ttl(ttl)
        self._wake = ChangeSignal()
        self._node = ContainerNode(coord, path, data=data, on_change=self._wake.fire)
        self._touch_path = join(self._node.path, TOUCH)
        self._touch_data = b""
        self._delete = False
        self._refused = False  # a refused touch was logged (once, until one succeeds)
        self._life = Lifecycle(f"persistent ttl node {path}", self._setup, stopped=self._stopped)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the node and write ``touch``; return once both are there (see the class docstring)."""
        await self._life.start()

    async def aclose(self, *, delete: bool = False) -> None:
        """Stop writing ``touch``, from any task; idempotent.

        The node is left for the server to remove about `ttl` ms later
        (Curator's ``close()``); with ``delete=True`` ``touch`` and the
        container are deleted now (shielded, bounded; a container someone
        else still keeps a child in stays).
        """
        if delete:
            self._delete = True
        await self._life.aclose()

    async def _setup(self, tg: anyio.abc.TaskGroup) -> None:
        self._touch_data = await default_data()
        await self._node.start()
        try:
            await self._touch_through()
        except ConfigError:
            # An empty container that never had a child stays forever: delete the one we made.
            self._delete = self._node.created_in is not None
            raise
        tg.start_soon(self._keep_touching)

    async def _stopped(self) -> None:
        """Delete ``touch``, then the container, if asked (this hook runs shielded)."""
        if self._delete:
            with anyio.move_on_after(self._coord.client.session.timing.request_timeout):
                try:
                    await self._coord.client.delete(self._touch_path)
                except (NoNodeError, ConnectionLostError, CoordinatorClosedError) as exc:
                    log.debug("persistent ttl node %s: delete failed: %s", self._touch_path, exc)
        await self._node.aclose(delete=self._delete)

    # --- touch -------------------------------------------------------------------------------

    async def _keep_touching(self) -> None:
        period = self._ttl / 2000
        while True:
            woken = self._wake.event()  # the container changed: made again, say
            with anyio.move_on_after(period):
                await woken.wait()
            try:
                await self._touch_through()
            except CoordinatorClosedError:
                return
            except (ConfigError, ZooKeeperError) as exc:
                # A server that stopped taking TTL nodes, an ACL that refuses us: tried again.
                if not self._refused:
                    self._refused = True
                    log.warning("persistent ttl node %s: %s", self._node.path, exc)
            else:
                self._refused = False

    async def _touch_through(self) -> None:
        """Write ``touch`` once, through lost connections (each time waiting for the next)."""
        while True:
            if self._coord.client.session.closed:
                raise CoordinatorClosedError(f"the coordinator closed: {self._touch_path}")
            try:
                await self._touch()
                return
            except ConnectionLostError as exc:
                log.debug("persistent ttl node %s: touch failed: %s", self._touch_path, exc)
                await self._coord.client.session.wait_connected()

    async def _touch(self) -> None:
        """Set ``touch``, or create it when missing (Curator's ``create().orSetData()``)."""
        client = self._coord.client
        path, data = self._touch_path, self._touch_data
        try:
            await client.set(path, data)
            return
        except NoNodeError:
            pass
        try:
            await client.create(path, data, mode=CreateMode.PERSISTENT_WITH_TTL, ttl=self._ttl)
        except NodeExistsError:
            with contextlib.suppress(NoNodeError):  # deleted again meanwhile: the next makes it
                await client.set(path, data)
        except NoNodeError:
            log.debug("persistent ttl node %s: missing; it is made again", self._node.path)
        except ZooKeeperError as exc:
            if exc.code != _UNIMPLEMENTED:
                raise
            raise ConfigError(
                _SETTING,
                f"the ZooKeeper server refuses TTL nodes, which persistent_ttl_node "
                f"{self._node.path} needs: start it with -D{_SETTING}=true "
                "(extendedTypesEnabled=true in zoo.cfg)",
            ) from exc

    # --- use ---------------------------------------------------------------------------------

    async def set_data(self, data: bytes) -> None:
        """Set the node's data, now and for every time it is made again.

        Blocks until the server holds `data`, waiting for a connection if need
        be; cancelled, the data is still kept and written once connected.
        Raises `CoordinatorClosedError` if the node is left first, `TypeError`
        if `data` is not bytes.
        """
        await self._node.set_data(data)

    @property
    def path(self) -> str:
        return self._node.path

    @property
    def touch_path(self) -> str:
        """``<path>/touch``, the TTL child."""
        return self._touch_path

    @property
    def ttl(self) -> int:
        """The TTL of ``touch``, in milliseconds."""
        return self._ttl

    @property
    def data(self) -> bytes:
        """The data the node holds or is to hold (the last `set_data()`)."""
        return self._node.data

    @property
    def stat(self) -> Stat | None:
        """The container's stat as last seen (None: absent); kept while the connection is away."""
        return self._node.stat

    @property
    def present(self) -> bool:
        """Whether the container is there, as last seen (False while stale)."""
        return self._node.present

    def status_view(self) -> StatusView:
        """This node for a status page, from memory: as `PersistentNode.status_view`, with its TTL."""
        if self._life.phase is not Phase.RUNNING:
            state = self._life.phase.value
        else:
            state = self._node.status_view().state
        return StatusView("persistent_ttl_node", self.path, state, {"ttl_ms": self._ttl})

    def __repr__(self) -> str:
        state = self._life.phase.value if self._life.phase is not Phase.RUNNING else None
        if state is None:
            state = "PRESENT" if self.present else "ABSENT"
        return f"<PersistentTtlNode {self.path} ttl={self._ttl}ms {state}>"


def persistent_ttl_node(
    coord: Coordinator, path: str, *, ttl: int, data: bytes = b""
) -> PersistentTtlNode:
    """A `PersistentTtlNode` at `path`, to use as ``async with``: kept while the block runs.

    `ttl` is in milliseconds; leaving leaves the node for the server to
    remove about `ttl` ms later.
    """
    return PersistentTtlNode(coord, path, ttl=ttl, data=data)
