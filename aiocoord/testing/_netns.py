"""`NetworkLab`: ZooKeeper members and client processes in network namespaces on one bridge.

Faults at the network layer, which a TCP proxy cannot make: a member cut off
from its quorum while its clients still reach it, a link that silently drops
every packet (no RST, no FIN: the client must notice by its own timers), one
direction of a link dropped, a slow or lossy link.

Layout (``S`` is a free /24 picked per lab, ``10.213.S.0/24``)::

    root namespace                 hub namespace                node namespaces
    acobPID-N 10.213.S.254 ---veth--- obs --+                      (one per node)
                                         br0 --- n1 ---veth--- eth0 10.213.S.1
                                            +--- n2 ---veth--- eth0 10.213.S.2 ...

Every node (a ZooKeeper member, a client process) has its own namespace with
one interface on the hub's bridge and one address; no namespace has a default
route, so nothing sent inside the lab can leave the machine.  The root
namespace (the test process: probes, ``srvr``, session expiry) reaches every
node through the observer link and is never cut off.  Cuts are one nftables
table in the hub (``bridge`` family, forward hook): a set of (source,
destination) address pairs whose packets are dropped, replaced atomically on
each change; loss is a random drop in the same table.  Delay and reordering
are ``tc netem`` on both ends of a node's link, when the kernel has netem.
Where it has not (a kernel built without ``CONFIG_NET_SCH_NETEM``), a node made with ``relay=True`` gets a userspace delay relay
(`aiocoord.testing._relay`): every TCP connection the node opens into the
lab is redirected through it, and `NetworkLab.impair` delays each chunk
both ways (``delay ± jitter``, in order; no reordering).

Everything made here is named ``aiocoord-PID-N-...``; `NetworkLab.close`
(also on ``with`` exit and at interpreter exit) kills the processes it
started, deletes its namespaces and with them every link, address, rule and
queueing discipline; a lab whose process died without closing is removed by
the next lab that starts.  `network_lab_unavailable` says why a lab cannot run
here (not root, no ``ip``/``nft``/``tc``, namespaces not allowed), for a skip.
Every call blocks the calling thread (it runs ``ip``, ``nft`` and ``tc``).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import itertools
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeAlias

from ..server import DEFAULT_CONF_DIR, DEFAULT_JAR_DIR
from ._ensemble import EnsembleMember, ZooKeeperEnsemble
from ._netns_host import (
    PREFIX,
    NetworkLabUnavailableError,
    kill_namespace,
    namespaces,
    netem_unavailable,
    network_lab_unavailable,
    remove_stale,
    run,
)

__all__ = (
    "LabNode",
    "NetworkLab",
    "NetworkLabUnavailableError",
    "netem_unavailable",
    "network_lab_unavailable",
)

logger = logging.getLogger(__name__)

_NET = "10.213"
_OBSERVER_HOST = 254
_LOCK_PATH = Path("/run/aiocoord-netlab.lock")
_SERIAL = itertools.count(1)
_LIVE: weakref.WeakSet[NetworkLab] = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()
_ZK_PORT, _PEER_PORT, _ELECTION_PORT = 2181, 2888, 3888
_RELAY = Path(__file__).with_name("_relay.py")
_RELAY_PORT = 46113  # on 127.0.0.1 inside the node's namespace
_RELAY_MARK = 0x6163  # the relay's own connections: not redirected again
_RELAY_START = 20.0  # s for a relay to start listening
_RELAY_APPLY = 10.0  # s for a running relay to take a new setting


@dataclass(frozen=True, slots=True)
class LabNode:
    """One network namespace of a lab: ``name`` (as given), ``netns`` (the real name), ``address``."""

    name: str
    netns: str
    address: str

    @property
    def exec_prefix(self) -> tuple[str, ...]:
        """The command prefix that runs a program inside this namespace."""
        return ("ip", "netns", "exec", self.netns)


Target: TypeAlias = "LabNode | str | EnsembleMember | Iterable[Target]"


def _flatten(targets: Iterable[Target]) -> Iterable[LabNode | str | EnsembleMember]:
    for t in targets:
        if isinstance(t, LabNode | str | EnsembleMember):
            yield t
        else:
            yield from _flatten(t)


class NetworkLab:
    """Network namespaces on one bridge, with cuts, one-way blackholes and slow links.

    ``with NetworkLab() as lab:`` creates the hub; ``lab.node(name)`` adds a
    namespace, ``lab.ensemble(3)`` a ZooKeeper ensemble with one member per
    namespace (``zk1``..), ``lab.spawn(node, argv)`` a process inside a
    namespace.  Raises `NetworkLabUnavailableError` (see `network_lab_unavailable`)
    when the machine does not allow it.  A target of `partition`,
    `blackhole` and `impair` is a node, its name, an ensemble member, or any
    nesting of lists of these.

    ``delay`` says how `impair` delays: ``"auto"`` (netem where the kernel
    has it, else the relays of nodes made with ``relay=True``), ``"netem"``
    or ``"relay"`` (always that way).
    """

    def __init__(self, *, delay: Literal["auto", "netem", "relay"] = "auto") -> None:
        if delay not in ("auto", "netem", "relay"):
            raise ValueError(f"delay must be 'auto', 'netem' or 'relay': {delay!r}")
        reason = network_lab_unavailable()
        if reason is not None:
            raise NetworkLabUnavailableError(reason)
        self._delay_by: str = delay
        self._relays: dict[str, Path] = {}  # node name -> its relay's control file
        self._workdir: Path | None = None
        self.tag = f"{os.getpid()}-{next(_SERIAL)}"
        self.nodes: dict[str, LabNode] = {}
        self._cut: set[tuple[str, str]] = set()
        self._delayed: set[str] = set()  # nodes with netem on their link
        self._loss: dict[str, float] = {}  # address -> fraction of its packets dropped
        self._procs: list[subprocess.Popen[bytes]] = []
        self._ensembles: list[ZooKeeperEnsemble] = []
        self._closed = False
        self.hub = f"{PREFIX}{self.tag}-hub"
        self.subnet = ""
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            self._make_hub()
        except BaseException:
            self.close()
            raise

    # -- building -----------------------------------------------------------------------

    def _make_hub(self) -> None:
        _LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK_PATH.open("a") as lock:
            # One lab at a time picks a subnet and claims it with the observer's address.
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_stale()
            self.subnet = self._free_subnet()
            run("ip", "netns", "add", self.hub)
            batch = [
                "link set lo up",
                "link add br0 type bridge",
                "link set br0 up",
            ]
            run("ip", "-n", self.hub, "-batch", "-", stdin="\n".join(batch) + "\n")
            self.observer_if = f"acob{self.tag}"[:15]  # PID-N: at most 7 digits, a dash, N
            run(
                "ip", "link", "add", self.observer_if, "type", "veth",
                "peer", "name", "obs", "netns", self.hub,
            )  # fmt: skip
            run("ip", "-n", self.hub, "link", "set", "obs", "master", "br0", "up")
            self.observer_address = f"{self.subnet}.{_OBSERVER_HOST}"
            run("ip", "addr", "add", f"{self.observer_address}/24", "dev", self.observer_if)
            run("ip", "link", "set", self.observer_if, "up")
        rules = (
            "table bridge aiocoord {\n"
            "  set cut { type ipv4_addr . ipv4_addr; }\n"
            "  chain loss { }\n"
            "  chain forward { type filter hook forward priority 0; policy accept;\n"
            "    ip saddr . ip daddr @cut drop\n"
            "    jump loss\n"
            "  }\n"
            "}\n"
        )
        run("ip", "netns", "exec", self.hub, "nft", "-f", "-", stdin=rules)
        logger.info("network lab %s on %s.0/24", self.tag, self.subnet)

    def _free_subnet(self) -> str:
        taken: list[ipaddress.IPv4Network] = []
        for line in run("ip", "-4", "-o", "route", "show", "table", "all").splitlines():
            dst = line.split()[0] if line.split() else ""
            if dst[:1].isdigit():
                with contextlib.suppress(ValueError):
                    taken.append(ipaddress.IPv4Network(dst, strict=False))
        for line in run("ip", "-4", "-o", "addr", "show").splitlines():
            for word in line.split():
                if "/" in word and word[:1].isdigit():
                    with contextlib.suppress(ValueError):
                        taken.append(ipaddress.IPv4Interface(word).network)
        for third in range(256):
            net = ipaddress.IPv4Network(f"{_NET}.{third}.0/24")
            if not any(net.overlaps(t) for t in taken if t.prefixlen > 0):
                return f"{_NET}.{third}"
        raise NetworkLabUnavailableError(f"no free /24 left in {_NET}.0.0/16")

    @property
    def delays_by_relay(self) -> bool:
        """Whether `impair` delays through the relays (no netem here, or ``delay="relay"``).

        Then only nodes made with ``relay=True`` can be delayed.
        """
        if self._delay_by == "auto":
            self._delay_by = "netem" if netem_unavailable() is None else "relay"
        return self._delay_by == "relay"

    def node(self, name: str, *, relay: bool = False) -> LabNode:
        """Add a namespace ``name`` (letters, digits, ``-``, at most 12) on the bridge; returns it.

        ``relay``: every TCP connection the node opens into the lab passes a
        delay relay of its own (see the module docstring), which `impair`
        uses where there is no netem; with no delay set it only copies.  A
        connection the relay cannot open is reset rather than refused, and
        the connecting program sees it accepted first.  Raises
        ``ValueError`` if the name is taken or malformed.
        """
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,11}", name):
            raise ValueError(f"name must be 1-12 of [a-z0-9-]: {name!r}")
        if name in self.nodes:
            raise ValueError(f"name is already a node of this lab: {name!r}")
        if len(self.nodes) >= _OBSERVER_HOST - 1:
            raise ValueError("a lab holds at most 253 nodes")
        host = len(self.nodes) + 1
        node = LabNode(name, f"{PREFIX}{self.tag}-{name}", f"{self.subnet}.{host}")
        run("ip", "netns", "add", node.netns)
        self.nodes[name] = node
        port = f"n{host}"
        run(
            "ip", "-n", self.hub, "link", "add", port, "type", "veth",
            "peer", "name", "eth0", "netns", node.netns,
        )  # fmt: skip
        run("ip", "-n", self.hub, "link", "set", port, "master", "br0", "up")
        batch = ["link set lo up", f"addr add {node.address}/24 dev eth0", "link set eth0 up"]
        run("ip", "-n", node.netns, "-batch", "-", stdin="\n".join(batch) + "\n")
        if relay:
            self._start_relay(node)
        return node

    def _start_relay(self, node: LabNode) -> None:
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix=f"aiocoord-lab-{self.tag}-"))
        control = self._workdir / f"{node.name}.relay"
        _write_settings(control, 0.0, 0.0, wait=None)
        argv = [
            sys.executable, str(_RELAY), "--port", str(_RELAY_PORT),
            "--mark", str(_RELAY_MARK), "--control", str(control),
        ]  # fmt: skip
        proc = self.spawn(node, argv, stdout=subprocess.PIPE)
        assert proc.stdout is not None
        deadline = time.monotonic() + _RELAY_START
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 64)  # unbuffered: select sees the rest
                if not chunk:
                    break
                line += chunk
        proc.stdout.close()  # the relay says nothing more
        if line.strip() != b"listening":
            raise NetworkLabUnavailableError(
                f"the delay relay of node {node.name!r} did not start "
                f"(exit code {proc.poll()}, said {line!r})"
            )
        rules = (
            "table ip aiocoord_relay {\n"
            "  chain output { type nat hook output priority -100; policy accept;\n"
            f"    meta mark {_RELAY_MARK} return\n"
            f"    ip daddr {self.subnet}.0/24 meta l4proto tcp redirect to :{_RELAY_PORT}\n"
            "  }\n"
            "}\n"
        )
        run("ip", "netns", "exec", node.netns, "nft", "-f", "-", stdin=rules)
        self._relays[node.name] = control

    def ensemble(
        self,
        size: int = 3,
        *,
        tick_time: int = 200,
        extra_config: dict[str, str] | None = None,
        jar_dir: str | os.PathLike[str] = DEFAULT_JAR_DIR,
        conf_dir: str | os.PathLike[str] = DEFAULT_CONF_DIR,
    ) -> ZooKeeperEnsemble:
        """A ZooKeeper ensemble (not started) whose member N runs in a new namespace ``zkN``.

        Each member listens on its own address (client port 2181); the lab
        stops it on `close`.  Start it as usual (``with lab.ensemble() as zk:``).
        """
        first = sum(1 for name in self.nodes if name.startswith("zk")) + 1
        nodes = [self.node(f"zk{first + i}") for i in range(size)]
        ensemble = _LabEnsemble(
            nodes,
            tick_time=tick_time,
            extra_config=extra_config,
            jar_dir=jar_dir,
            conf_dir=conf_dir,
        )
        self._ensembles.append(ensemble)
        return ensemble

    def spawn(
        self, node: LabNode | str, argv: Sequence[str], **popen: Any
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` inside ``node``'s namespace (``popen``: more `subprocess.Popen` arguments).

        The process gets its own session (a Ctrl-C at the terminal does not
        reach it); `close` kills it if it still runs.
        """
        target = self._node(node)
        popen.setdefault("start_new_session", True)
        proc: subprocess.Popen[bytes] = subprocess.Popen([*target.exec_prefix, *argv], **popen)
        self._procs.append(proc)
        return proc

    # -- faults -------------------------------------------------------------------------

    def partition(self, *groups: Target) -> None:
        """Cut every link between nodes of different groups, both ways (on top of any cut already made).

        Nodes in no group, and the test process itself, still reach everyone:
        ``lab.partition([zk1], [zk2, zk3])`` isolates member 1 from its peers
        while clients still reach it.  Packets are dropped silently.
        """
        sets = [self._addresses(g) for g in groups]
        if len(sets) < 2:
            raise ValueError(f"groups must be at least two: {len(sets)}")
        pairs = {
            (a, b)
            for i, one in enumerate(sets)
            for j, other in enumerate(sets)
            if i != j
            for a in one
            for b in other
        }
        self._set_cut(self._cut | pairs)

    def blackhole(self, sources: Target, destinations: Target) -> None:
        """Silently drop every packet from ``sources`` to ``destinations`` (one direction only)."""
        pairs = {(a, b) for a in self._addresses(sources) for b in self._addresses(destinations)}
        self._set_cut(self._cut | pairs)

    def heal(self) -> None:
        """Remove every cut and blackhole (impairments stay: see `clear_impairments`)."""
        self._set_cut(set())

    def impair(
        self,
        nodes: Target,
        *,
        delay: float = 0.0,
        jitter: float = 0.0,
        loss: float = 0.0,
        reorder: float = 0.0,
    ) -> None:
        """Delay (s, ± ``jitter``), lose (fraction) and reorder (fraction) each node's packets.

        Both directions of each node's link: what it sends and what it
        receives each get the delay and the loss.  Loss is a random drop in
        the hub's nftables table (works wherever the lab does); delay, jitter
        and reordering are ``tc netem`` on both ends of the link.  Where the
        kernel has no netem (`delays_by_relay`), delay and jitter are the
        node's relay's (TCP connections the node opened, each chunk delayed
        ``delay ± jitter`` each way, in order): a node made without
        ``relay=True``, or a reordering, then raises
        `NetworkLabUnavailableError`.  Replaces an earlier impairment of the
        same node.
        """
        for name, value in (("delay", delay), ("jitter", jitter)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0: {value}")
        for name, value in (("loss", loss), ("reorder", reorder)):
            if not 0 <= value <= 1:
                raise ValueError(f"{name} must be a fraction in [0, 1]: {value}")
        targets = self._nodes(nodes)
        if (delay or jitter or reorder) and self.delays_by_relay:
            why = netem_unavailable() or "the lab delays by relay (delay='relay')"
            if reorder:
                raise NetworkLabUnavailableError(f"reordering needs netem: {why}")
            bare = [n.name for n in targets if n.name not in self._relays]
            if bare:
                raise NetworkLabUnavailableError(
                    f"{why}; nodes without a delay relay cannot be delayed: {bare} "
                    "(make them with lab.node(name, relay=True))"
                )
            for node in targets:
                _write_settings(self._relays[node.name], delay, jitter)
                self._delayed.add(node.name)
        elif delay or jitter or reorder:
            spec = ["delay", f"{delay * 1000:.3f}ms"]
            if jitter:
                spec.append(f"{jitter * 1000:.3f}ms")
            if reorder:
                spec += ["reorder", f"{reorder * 100:.3f}%"]
            for node in targets:
                for netns, dev in self._link_ends(node):
                    run("tc", "-n", netns, "qdisc", "replace", "dev", dev, "root", "netem", *spec)
                self._delayed.add(node.name)
        else:
            self._clear_delays([n for n in targets if n.name in self._delayed])
        losses = dict(self._loss)
        for node in targets:
            if loss:
                losses[node.address] = loss
            else:
                losses.pop(node.address, None)
        self._set_loss(losses)

    def clear_impairments(self) -> None:
        """Remove every impairment made by `impair`."""
        self._clear_delays([self.nodes[name] for name in sorted(self._delayed)])
        self._set_loss({})

    def _link_ends(self, node: LabNode) -> list[tuple[str, str]]:
        port = f"n{node.address.rsplit('.', 1)[1]}"
        return [(node.netns, "eth0"), (self.hub, port)]

    def _clear_delays(self, nodes: list[LabNode]) -> None:
        for node in nodes:
            if node.name in self._relays:
                # A relay that died takes no setting: the other nodes are cleared all the same.
                with contextlib.suppress(NetworkLabUnavailableError):
                    _write_settings(self._relays[node.name], 0.0, 0.0)
            for netns, dev in self._link_ends(node):
                with contextlib.suppress(NetworkLabUnavailableError):
                    run("tc", "-n", netns, "qdisc", "del", "dev", dev, "root")
            self._delayed.discard(node.name)

    def _set_loss(self, losses: dict[str, float]) -> None:
        lines = ["flush chain bridge aiocoord loss"]
        for address, fraction in sorted(losses.items()):
            below = round(fraction * 1_000_000)
            for field in ("saddr", "daddr"):
                lines.append(
                    f"add rule bridge aiocoord loss ip {field} {address} "
                    f"numgen random mod 1000000 < {below} drop"
                )
        run("ip", "netns", "exec", self.hub, "nft", "-f", "-", stdin="\n".join(lines) + "\n")
        self._loss = losses

    def cut_pairs(self) -> set[tuple[str, str]]:
        """The (source, destination) addresses whose packets are dropped now."""
        return set(self._cut)

    def _set_cut(self, pairs: set[tuple[str, str]]) -> None:
        lines = ["flush set bridge aiocoord cut"]
        if pairs:
            elements = ", ".join(f"{a} . {b}" for a, b in sorted(pairs))
            lines.append(f"add element bridge aiocoord cut {{ {elements} }}")
        run("ip", "netns", "exec", self.hub, "nft", "-f", "-", stdin="\n".join(lines) + "\n")
        self._cut = pairs
        logger.info("lab %s: %d address pairs cut", self.tag, len(pairs))

    def _node(self, target: LabNode | str | EnsembleMember) -> LabNode:
        if isinstance(target, LabNode):
            name = target.name
        elif isinstance(target, EnsembleMember):
            name = next((n.name for n in self.nodes.values() if n.address == target.host), "")
        else:
            name = target
        try:
            return self.nodes[name]
        except KeyError:
            raise ValueError(f"not a node of this lab: {target!r}") from None

    def _nodes(self, targets: Target) -> list[LabNode]:
        if isinstance(targets, LabNode | str | EnsembleMember):
            return [self._node(targets)]
        return [self._node(t) for t in _flatten(targets)]

    def _addresses(self, targets: Target) -> set[str]:
        return {n.address for n in self._nodes(targets)}

    # -- cleanup ------------------------------------------------------------------------

    def close(self) -> None:
        """Kill the lab's processes, stop its ensembles, delete every namespace (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        for ensemble in self._ensembles:
            with contextlib.suppress(Exception):
                ensemble.cleanup()
        for node in self.nodes.values():
            kill_namespace(node.netns)
        if self.hub in namespaces():
            kill_namespace(self.hub)  # takes the bridge and the observer link with it
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        with _LIVE_LOCK:
            _LIVE.discard(self)
        logger.info("network lab %s removed", self.tag)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<NetworkLab {self.tag} {self.subnet}.0/24 nodes={sorted(self.nodes)}>"


def _write_settings(
    path: Path, delay: float, jitter: float, *, wait: float | None = _RELAY_APPLY
) -> None:
    """Replace a relay's control file atomically (the relay may read it at any moment).

    Blocks until the relay says it has taken the setting (``FILE.applied``),
    at most ``wait`` seconds (`NetworkLabUnavailableError` after that); with
    ``wait=None`` it returns at once (before the relay runs).  The relay
    polls, so without the wait a loaded machine could send a whole exchange
    through it before it noticed the change.
    """
    generation = f"{os.getpid()}-{time.monotonic_ns()}"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(f"{delay!r} {jitter!r} {generation}\n")
    temporary.replace(path)
    if wait is None:
        return
    applied = Path(f"{path}.applied")
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError):
            if applied.read_text().strip() == generation:
                return
        if time.monotonic() >= deadline:
            raise NetworkLabUnavailableError(
                f"the delay relay did not take the setting {delay!r} ± {jitter!r} s within {wait} s ({path})"
            )
        time.sleep(0.01)


class _LabEnsemble(ZooKeeperEnsemble):
    """An ensemble whose member N listens on node ``nodes[N-1]``'s address, inside its namespace."""

    def __init__(self, nodes: Sequence[LabNode], **kwargs: Any) -> None:
        self._nodes = list(nodes)
        super().__init__(len(nodes), **kwargs)

    def _assign_ports(self, size: int) -> None:
        # Each member has its own address: the standard ports cannot collide.
        self.members = [
            EnsembleMember(
                self,
                i + 1,
                self.directory / f"member-{i + 1}",
                port=_ZK_PORT,
                peer_port=_PEER_PORT,
                election_port=_ELECTION_PORT,
                host=node.address,
                command_prefix=node.exec_prefix,
            )
            for i, node in enumerate(self._nodes[:size])
        ]


@atexit.register
def _close_labs() -> None:
    with _LIVE_LOCK:
        labs = list(_LIVE)
    for lab in labs:
        with contextlib.suppress(Exception):
            lab.close()
