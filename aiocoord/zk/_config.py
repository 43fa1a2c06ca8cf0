"""The ensemble's dynamic config (``/zookeeper/config``): reading it, changing it, following it.

ZooKeeper 3.5+ keeps its membership in the node ``/zookeeper/config``, one
``server.<id>=<host>:<peer>:<election>[:<role>][;[<client host>:]<client
port>]`` line per member and a ``version=<hex>`` line.  `get_config` is a
getData on that node (outside any chroot, as the Java client's getConfig);
`reconfig` is ZooKeeper's reconfig request (opcode 16), whose answer is the
new config.  `follow_ensemble` is Curator's EnsembleTracker: a watch on the
node, set again whenever it fires (a reconnect restores it; a new session
fires it), and each config read handed to the session, which uses its client
addresses from the next connection attempt on.  Parsing is pure and lives
here; the requests go through the client's `Sender`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import (
    ConfigError,
    ConnectionLostError,
    CoordinatorClosedError,
    NodeDataError,
    ZooKeeperError,
)
from . import _replies, _wire
from ._arming import arming, forget_watch
from ._timing import Deadline
from ._watches import Watch, WatchKind
from .types import Node

if TYPE_CHECKING:
    from ._sending import Sender
    from ._session import ZkSession

__all__ = (
    "CONFIG_NODE",
    "ConfigWatch",
    "EnsembleConfig",
    "EnsembleServer",
    "follow_ensemble",
    "followed_hosts",
    "get_config",
    "parse_config",
    "reconfig",
)

log = logging.getLogger("aiocoord.session")

CONFIG_NODE = "/zookeeper/config"
_WILDCARDS = ("0.0.0.0", "::", "0:0:0:0:0:0:0:0")
_ROLES = ("participant", "observer")


@dataclass(frozen=True, slots=True)
class EnsembleServer:
    """One member of the ensemble's config: ``server.<id>=...``.

    `host` is its quorum address; `client_host` and `client_port` where it
    serves clients (None if the line names none).  `client_address` is where a
    client connects: a wildcard client host (``0.0.0.0``) means the quorum
    host, as Curator's EnsembleTracker reads it.
    """

    id: int
    host: str
    peer_port: int
    election_port: int
    role: str = "participant"
    client_host: str | None = None
    client_port: int | None = None

    @property
    def client_address(self) -> tuple[str, int] | None:
        if self.client_port is None:
            return None
        host = self.client_host
        if host is None or host in _WILDCARDS:
            host = self.host
        return (host, self.client_port)

    @property
    def spec(self) -> str:
        """The ``server.<id>=`` line, as a reconfig's `joining` or `new_members` takes it."""
        line = f"server.{self.id}={_bracket(self.host)}:{self.peer_port}:{self.election_port}"
        line += f":{self.role}"
        if self.client_port is not None:
            line += ";" + (f"{_bracket(self.client_host)}:" if self.client_host else "")
            line += str(self.client_port)
        return line


@dataclass(frozen=True, slots=True)
class EnsembleConfig:
    """The ensemble's dynamic config as read from ``/zookeeper/config``.

    `version` is the config's version (the zxid that made it; 0 when the node
    is empty, as on a standalone server), `servers` its members by id,
    `client_addresses` where clients connect, in id order.
    """

    version: int
    servers: tuple[EnsembleServer, ...] = ()

    @property
    def client_addresses(self) -> list[tuple[str, int]]:
        return [a for a in (s.client_address for s in self.servers) if a is not None]

    def server(self, server_id: int) -> EnsembleServer | None:
        """The member with id `server_id`, if it is in this config."""
        return next((s for s in self.servers if s.id == server_id), None)


class ConfigWatch(Watch):
    """The watch `get_config` sets: on ``/zookeeper/config`` itself, whatever the chroot."""

    __slots__ = ()
    absolute = True  # its path is a server path (see `_arming`)


# --- parsing (pure) ------------------------------------------------------------------------


def parse_config(data: bytes) -> EnsembleConfig:
    """Read ``/zookeeper/config``'s data; `ValueError` naming the bad line.

    Lines other than ``server.N`` and ``version`` (``group.N``, ``weight.N``
    of hierarchical quorums) are skipped.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"the config is not UTF-8 text: {exc}") from None
    version = 0
    servers: list[EnsembleServer] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if key == "version":
            try:
                version = int(value.strip(), 16)
            except ValueError:
                raise ValueError(f"bad version line {line!r}") from None
        elif key.startswith("server."):
            servers.append(parse_server(key, value.strip()))
    servers.sort(key=lambda s: s.id)
    return EnsembleConfig(version, tuple(servers))


def parse_server(key: str, value: str) -> EnsembleServer:
    """One ``server.<id>=<value>`` line; `ValueError` saying what is wrong with it."""
    line = f"{key}={value}"
    id_text = key[len("server.") :]
    if not id_text.isdigit():
        raise ValueError(f"bad server id in {line!r}")
    quorum, _, client = value.partition(";")
    host, rest = _split_host(quorum, line)
    parts = rest.split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"expected host:peer_port:election_port[:role] in {line!r}")
    role = parts[2] if len(parts) == 3 else "participant"
    if role not in _ROLES:
        raise ValueError(f"role {role!r} of {line!r} is not participant or observer")
    client_host: str | None = None
    client_port: int | None = None
    if client:
        if client.isdigit():
            client_port = int(client)
        else:
            client_host, port_text = _split_host(client, line)
            if not port_text.isdigit():
                raise ValueError(f"bad client port in {line!r}")
            client_port = int(port_text)
    return EnsembleServer(
        int(id_text), host, int(parts[0]), int(parts[1]), role, client_host, client_port
    )


def _split_host(text: str, line: str) -> tuple[str, str]:
    """``host:rest`` or ``[v6]:rest`` into (host, rest)."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0 or text[end + 1 : end + 2] != ":":
            raise ValueError(f"bad bracketed address in {line!r}")
        return text[1:end], text[end + 2 :]
    host, sep, rest = text.partition(":")
    if not host or not sep:
        raise ValueError(f"expected host:port in {line!r}")
    return host, rest


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _specs(name: str, values: Sequence[str | EnsembleServer] | str | None) -> str | None:
    """A reconfig argument as the server wants it: comma-separated ``server.N=`` lines."""
    if values is None:
        return None
    if isinstance(values, str | EnsembleServer):
        values = [values]
    lines: list[str] = []
    for value in values:
        if isinstance(value, EnsembleServer):
            lines.append(value.spec)
            continue
        if not isinstance(value, str):
            raise ConfigError(name, f"expected server.N=... lines, got {type(value).__name__}")
        key, _, rest = value.strip().partition("=")
        try:
            lines.append(parse_server(key.strip(), rest.strip()).spec)
        except ValueError as exc:
            raise ConfigError(name, str(exc)) from None
    if not lines:
        raise ConfigError(name, "is empty; leave it out instead")
    return ",".join(lines)


def _leaving(values: Sequence[int | str] | int | str | None) -> str | None:
    if values is None:
        return None
    if isinstance(values, int | str):
        values = [values]
    ids: list[str] = []
    for value in values:
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit():
            raise ConfigError("leaving", f"expected server ids, got {value!r}")
        ids.append(text)
    if not ids:
        raise ConfigError("leaving", "is empty; leave it out instead")
    return ",".join(ids)


def _decode(node: Node) -> EnsembleConfig:
    # Read after the reply, not where it is read: a config we cannot read is the
    # caller's error, not a malformed packet that would drop the connection.
    try:
        return parse_config(node.data)
    except ValueError as exc:
        raise NodeDataError(CONFIG_NODE, str(exc)) from None


def followed_hosts(
    config: EnsembleConfig, current: Sequence[tuple[str, int]], first_version: int | None
) -> list[tuple[str, int]] | None:
    """The host list `config` asks a follower for, or None to keep `current`.

    A config that names no client address (a standalone server's, or lines
    without ``;port``) asks nothing.  The first config read (`first_version`
    None) is followed only when it shares an address with `current`: a client
    that reaches the servers by other names (through a NAT, a container's
    published port) keeps its own list until a reconfig changes the config.
    """
    addresses = config.client_addresses
    if not addresses:
        return None
    if first_version is None or config.version == first_version:
        return addresses if set(addresses) & set(current) else None
    return addresses


# --- the requests --------------------------------------------------------------------------


async def get_config(
    sender: Sender, session: ZkSession, *, watch: bool
) -> tuple[EnsembleConfig, ConfigWatch | None]:
    """`ZkClient.get_config`: read ``/zookeeper/config``, with `watch` a one-shot watch on it."""
    request = _wire.get_data_request(CONFIG_NODE, watch)
    if not watch:
        return _decode(await sender.read(request, _replies.parse_node, path=CONFIG_NODE)), None

    async def op(deadline: Deadline) -> tuple[Node, ConfigWatch]:
        watcher = ConfigWatch(WatchKind.DATA, CONFIG_NODE)
        with arming(session, watcher, CONFIG_NODE, {0: WatchKind.DATA}) as on_reply:
            node = await sender.fetch(
                request, _replies.parse_node, path=CONFIG_NODE, on_reply=on_reply, deadline=deadline
            )
            return node, watcher

    node, watcher = await sender.retrying(op)
    try:
        return _decode(node), watcher
    except NodeDataError:
        forget_watch(session, watcher)
        raise


async def reconfig(
    sender: Sender,
    *,
    joining: Sequence[str | EnsembleServer] | str | None,
    leaving: Sequence[int | str] | int | str | None,
    new_members: Sequence[str | EnsembleServer] | str | None,
    from_config: int,
) -> EnsembleConfig:
    """`ZkClient.reconfig`: validate the arguments and send one reconfig request."""
    if isinstance(from_config, bool) or not isinstance(from_config, int) or from_config < -1:
        raise ConfigError("from_config", f"expected a config version or -1, got {from_config!r}")
    join_text = _specs("joining", joining)
    leave_text = _leaving(leaving)
    members_text = _specs("new_members", new_members)
    if members_text is not None and (join_text is not None or leave_text is not None):
        raise ConfigError("new_members", "give either new_members or joining/leaving, not both")
    if members_text is None and join_text is None and leave_text is None:
        raise ConfigError("joining", "give joining and/or leaving, or new_members")
    request = _wire.reconfig_request(join_text, leave_text, members_text, from_config)
    return _decode(await sender.fetch(request, _replies.parse_node, path=CONFIG_NODE))


# --- following it --------------------------------------------------------------------------


async def follow_ensemble(
    read: Callable[[], Awaitable[tuple[EnsembleConfig, Watch | None]]],
    session: ZkSession,
    apply: Callable[[EnsembleConfig], None],
) -> None:
    """Curator's EnsembleTracker: read the config with a watch, `apply` it, again on each change.

    `read()` is ``get_config(watch=True)``.  Runs until the session closes;
    a lost connection waits for the next one (the watch is restored with the
    session; a new session fires it, so the config is read again).  A server
    that refuses the read (no ``/zookeeper/config`` before 3.5, an ACL) stops
    the following, logged once at INFO.
    """
    while True:
        try:
            config, watch = await read()
        except CoordinatorClosedError:
            return
        except ConnectionLostError:
            try:
                await session.wait_connected()
            except CoordinatorClosedError:
                return
            continue
        except ZooKeeperError as exc:
            log.info("not following the ensemble's config: %s", exc)
            return
        except NodeDataError as exc:
            log.warning("not following the ensemble's config: %s", exc)
            return
        apply(config)
        assert watch is not None
        await watch.wait()
