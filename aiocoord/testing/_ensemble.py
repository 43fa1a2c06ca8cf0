"""A real ZooKeeper ensemble of ``QuorumPeerMain`` processes on loopback.

Each member gets its own directory (``zoo.cfg``, ``data/myid``, ``zk.log``) and
three free ports: client, peer (quorum) and leader election. The configuration
is the standalone one plus ``initLimit``/``syncLimit`` and the ``server.N`` lines
(zookeeper-notes 6.2). The ensemble is formed when exactly one running member
says ``Mode: leader`` in ``srvr`` and every other running member ``follower``.

With ``reconfig=True`` the members allow dynamic reconfiguration (ZooKeeper
3.5+): ``reconfigEnabled=true``, ``standaloneEnabled=false``, a super user
(``SUPER_AUTH``, for ``add_auth("digest", ...)``: reconfig needs one), and
``server.N=host:peer:election:participant;host:client`` lines, which ZooKeeper
moves into a dynamic config file that it then owns (a restart keeps it).
``add_member()`` starts a joiner listed as an observer next to the current
members (ZooKeeper's safe way to join); once a reconfig has made it a
participant and removed another, ``drop_member()`` stops the one removed.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from ..server import (
    DEFAULT_CONF_DIR,
    DEFAULT_JAR_DIR,
    ZooKeeperProcess,
    free_ports,
    make_temp_dir,
    probe_handshake,
    remove_temp_dir,
)

__all__ = ("SUPER_AUTH", "EnsembleMember", "ZooKeeperEnsemble")

logger = logging.getLogger(__name__)

_SERVING = ("leader", "follower")
_JOINING = ("leader", "follower", "observer")

SUPER_AUTH = "super:aiocoord-test"
"""The digest credentials of a reconfig ensemble's super user (``user:password``)."""
# DigestAuthenticationProvider.generateDigest("super:aiocoord-test"): base64(sha1(text)).
_SUPER_DIGEST = "super:" + base64.b64encode(hashlib.sha1(SUPER_AUTH.encode()).digest()).decode()


class EnsembleMember(ZooKeeperProcess):
    """One member of a ``ZooKeeperEnsemble``; ``myid`` counts from 1.

    Has the standalone server's API (``start``/``stop``/``kill``/``pause``/
    ``resume``/``restart``, ``port``, ``pid``, ``log_path``); its ``start`` waits
    until the member serves as leader or follower, which needs a quorum.
    """

    main_class = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

    def __init__(
        self,
        ensemble: ZooKeeperEnsemble,
        myid: int,
        directory: Path,
        *,
        port: int,
        peer_port: int,
        election_port: int,
        host: str = "127.0.0.1",
        command_prefix: Sequence[str] = (),
    ) -> None:
        super().__init__(
            directory,
            port=port,
            tick_time=ensemble.tick_time,
            extra_config=ensemble.extra_config,
            jar_dir=ensemble.jar_dir,
            conf_dir=ensemble.conf_dir,
            host=host,
            command_prefix=command_prefix,
        )
        self._ensemble = ensemble
        self.myid = myid
        self.peer_port = peer_port
        self.election_port = election_port
        self.joining = False  # listed as an observer until a reconfig adds it

    @property
    def spec(self) -> str:
        """This member's ``server.N=`` line as a participant (for a reconfig's joining list)."""
        return f"server.{self.myid}={self._server_line('participant')}"

    def _server_line(self, role: str) -> str:
        return f"{self.host}:{self.peer_port}:{self.election_port}:{role};{self.host}:{self.port}"

    @property
    def name(self) -> str:
        return f"zookeeper-{self.myid}:{self.port}"

    def config(self) -> dict[str, str]:
        cfg = super().config()
        # Ticks: 5 s to connect and sync with a new leader, 2 s of follower silence.
        cfg.setdefault("initLimit", str(max(10, 5000 // self.tick_time)))
        cfg.setdefault("syncLimit", str(max(5, 2000 // self.tick_time)))
        if self._ensemble.reconfig:
            cfg.update(
                reconfigEnabled="true",
                standaloneEnabled="false",
                # Read from zoo.cfg as the system property zookeeper.<name>.
                **{"DigestAuthenticationProvider.superDigest": _SUPER_DIGEST},
            )
            for key in ("clientPort", "clientPortAddress"):  # in the server lines instead
                cfg.pop(key, None)
            for m in self._ensemble.members:
                role = "observer" if m.joining else "participant"
                cfg[f"server.{m.myid}"] = m._server_line(role)
            return cfg
        for m in self._ensemble.members:
            cfg[f"server.{m.myid}"] = f"{m.host}:{m.peer_port}:{m.election_port}"
        return cfg

    def _prepare(self) -> None:
        if self._ensemble.reconfig and self.config_path.exists():
            # ZooKeeper rewrote zoo.cfg to point at its dynamic config file: keep its view.
            self.data_dir.mkdir(parents=True, exist_ok=True)
        else:
            super()._prepare()
        (self.data_dir / "myid").write_text(f"{self.myid}\n")

    def _is_ready(self) -> bool:
        serving = _JOINING if self.joining else _SERVING
        return self.role() in serving and probe_handshake(self.host, self.port, timeout=1.0)


class ZooKeeperEnsemble:
    """``size`` ZooKeeper servers on loopback forming one ensemble (default 3).

    ``with ZooKeeperEnsemble() as zk:`` starts all members, waits until they
    have elected a leader, and on exit stops them and removes the directory.
    Members are addressed by index in ``members`` (0-based) or by handle.
    ``reconfig=True`` allows dynamic reconfiguration (see the module
    docstring): ``super_auth`` is then the super user's digest credentials,
    ``add_member()`` starts a joiner and ``drop_member()`` stops one removed.
    """

    def __init__(
        self,
        size: int = 3,
        directory: str | os.PathLike[str] | None = None,
        *,
        tick_time: int = 200,
        extra_config: dict[str, str] | None = None,
        jar_dir: str | os.PathLike[str] = DEFAULT_JAR_DIR,
        conf_dir: str | os.PathLike[str] = DEFAULT_CONF_DIR,
        reconfig: bool = False,
    ) -> None:
        if size < 2:
            raise ValueError(f"size must be at least 2 (a single server is standalone): {size}")
        self._own_dir = directory is None
        self.directory = (
            make_temp_dir("aiocoord-ensemble-") if directory is None else Path(directory)
        )
        self.tick_time = tick_time
        self.extra_config = dict(extra_config or {})
        self.jar_dir = Path(jar_dir)
        self.conf_dir = Path(conf_dir)
        self.reconfig = reconfig
        self.super_auth = SUPER_AUTH if reconfig else None
        """The super user's digest credentials (``user:password``) with ``reconfig``."""
        self.members: list[EnsembleMember] = []
        self._dropped: list[EnsembleMember] = []
        self._assign_ports(size)

    def _assign_ports(self, size: int) -> None:
        ports = free_ports(3 * size)
        self.members = [
            EnsembleMember(
                self,
                i + 1,
                self.directory / f"member-{i + 1}",
                port=ports[3 * i],
                peer_port=ports[3 * i + 1],
                election_port=ports[3 * i + 2],
            )
            for i in range(size)
        ]

    @property
    def connect_string(self) -> str:
        """``host1:p1,host2:p2,...`` over every member (all on 127.0.0.1 by default)."""
        return ",".join(m.connect_string for m in self.members)

    @property
    def running(self) -> bool:
        return any(m.running for m in self.members)

    def start(self, timeout: float = 60.0) -> Self:
        """Start every member not running and wait until the ensemble has formed.

        Raises ``RuntimeError`` (with the members' log tails) if a member exits,
        ``TimeoutError`` if no leader is elected within ``timeout`` seconds.
        """
        for attempt in (1, 2):
            for member in self.members:
                member.spawn()
            try:
                self.wait_formed(timeout)
                dead = [m.name for m in self.members if not m.running]
                if dead:
                    raise RuntimeError(f"{dead} exited while starting\n" + self._tails())
                return self
            except RuntimeError:
                if attempt == 2 or not any(m.port_taken() for m in self.members):
                    raise
                # A port was taken between choosing it and binding it: pick new ones.
                logger.info("an ensemble port was taken; retrying on new ports")
                self.stop()
                self._assign_ports(len(self.members))
        raise AssertionError("unreachable")

    def wait_formed(self, timeout: float = 30.0) -> None:
        """Poll until one running member leads, the others follow, and all answer.

        Paused members do not count. Raises ``RuntimeError`` if fewer than a
        quorum of members run, ``TimeoutError`` (with roles and log tails) on timeout.
        """
        deadline = time.monotonic() + timeout
        quorum = len(self.members) // 2 + 1
        while True:
            live = [m for m in self.members if m.running and not m.paused]
            if len(live) < quorum:
                raise RuntimeError(
                    f"only {len(live)} of {len(self.members)} members run; no quorum\n"
                    + self._tails()
                )
            roles = [m.role(timeout=0.5) for m in live]
            if (
                roles.count("leader") == 1
                and roles.count("follower") == len(live) - 1
                and all(probe_handshake(m.host, m.port, timeout=1.0) for m in live)
            ):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"ensemble did not form within {timeout}s; roles {self.roles()}\n"
                    + self._tails()
                )
            time.sleep(0.05)

    def roles(self) -> list[str | None]:
        """Each member's ``srvr`` mode, aligned with ``members`` (None: not serving)."""
        return [m.role(timeout=0.5) for m in self.members]

    def leader(self) -> EnsembleMember | None:
        """The member that reports ``Mode: leader`` now, if any."""
        for member, role in zip(self.members, self.roles(), strict=True):
            if role == "leader":
                return member
        return None

    def followers(self) -> list[EnsembleMember]:
        """The members that report ``Mode: follower`` now."""
        return [m for m, r in zip(self.members, self.roles(), strict=True) if r == "follower"]

    def member(self, member: int | EnsembleMember) -> EnsembleMember:
        """The member at index ``member`` in ``members``, or ``member`` itself."""
        if isinstance(member, EnsembleMember):
            if member not in self.members:
                raise ValueError(f"{member!r} is not a member of this ensemble")
            return member
        return self.members[member]

    def member_for_port(self, port: int) -> EnsembleMember:
        """The member serving client port ``port`` (e.g. a client socket's peer port)."""
        for member in self.members:
            if member.port == port:
                return member
        raise LookupError(f"no member serves client port {port}")

    def add_member(self, timeout: float = 60.0) -> EnsembleMember:
        """Start one more member (``reconfig`` ensembles), listed as an observer; return it.

        Its zoo.cfg names the current members as participants and itself as an
        observer, so it syncs with the leader without changing the quorum;
        it serves clients (as an observer) when this returns.  Make it a voter
        with a reconfig that adds ``member.spec``.  Raises ``RuntimeError``
        without ``reconfig``, ``TimeoutError`` if it does not serve in time.
        """
        if not self.reconfig:
            raise RuntimeError("add_member() needs ZooKeeperEnsemble(reconfig=True)")
        taken = {m.myid for m in self.members + self._dropped}
        myid = max(taken) + 1
        port, peer, election = free_ports(3)
        member = EnsembleMember(
            self,
            myid,
            self.directory / f"member-{myid}",
            port=port,
            peer_port=peer,
            election_port=election,
        )
        member.joining = True
        self.members.append(member)
        try:
            member.start(timeout)
        except BaseException:
            self.members.remove(member)
            member.cleanup()
            raise
        member.joining = False  # what it will be once a reconfig adds it
        return member

    def drop_member(self, member: int | EnsembleMember) -> EnsembleMember:
        """Stop a member removed from the ensemble by a reconfig, and forget it.

        It leaves ``members`` (so ``connect_string``, ``wait_formed`` and the
        quorum count follow the new membership); its folder goes at cleanup.
        """
        target = self.member(member)
        target.stop()
        self.members.remove(target)
        self._dropped.append(target)
        return target

    def kill(self, member: int | EnsembleMember) -> EnsembleMember:
        """SIGKILL one member; returns it so that it can be ``start``-ed again."""
        target = self.member(member)
        target.kill()
        return target

    def stop(self) -> None:
        """Stop every member (SIGTERM to all at once, then wait; SIGKILL as fallback)."""
        for member in self.members:
            member.terminate()
        for member in self.members:
            member.stop()

    def cleanup(self) -> None:
        """Stop every member and remove the directory if this object created it."""
        self.stop()
        for member in self.members + self._dropped:
            member.cleanup()
        if self._own_dir:
            remove_temp_dir(self.directory)

    close = cleanup

    def _tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {m.name}:\n{m.log_tail(lines)}" for m in self.members)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        return f"<ZooKeeperEnsemble {self.connect_string} roles={self.roles()}>"
