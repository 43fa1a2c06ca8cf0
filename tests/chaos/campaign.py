"""The orchestrator: an ensemble, a fenced store, participant processes, and the faults.

`run_campaign(CampaignConfig(seed=...))` starts a 3-member `ZooKeeperEnsemble`
of its own, the fenced store, and one `FaultProxy` per member per participant
(so cutting or pausing a participant's network hits that participant only),
then the participant processes (`participant`, alternately on asyncio and
uvloop) and the Java participants (`java`: compiled first, one JVM per
Curator recipe, ``j1``..; left out, saying why, without ``javac`` or the
jars).  It runs the seeded fault plan (`faults.plan`) in two lanes of
threads for `seconds` (an aimed fault hits the participant that holds its
resource at that moment, read from the participants' logs as they grow:
`Holders`), lets everything settle for `calm` seconds without
faults or new jobs, asks ZooKeeper about every job no client saw finish
(``job_final``), sends SIGTERM to every participant (each must exit
cleanly), reads every log and returns the checker's `Report`.  A participant
that dies unexpectedly is logged as a crash and started again.

Everything the orchestrator does is logged (``orchestrator.jsonl``) next to
the participants' and the store's logs in the campaign's directory, with
the namespace's nodes at the end of the calm phase (``tree.json``) and the
servers' logs; the directory is kept when the campaign fails (or with
``keep=True``).
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio

import aiocoord
from aiocoord import NoNodeError
from aiocoord.scheduler import Scheduler
from aiocoord.testing import EnsembleMember, FaultProxy, ZooKeeperEnsemble, kill_session

from . import java as chaos_java
from . import roles as chaos_roles
from .checker import Report, check
from .faults import AIMED, Fault, plan, with_java
from .records import Record, Writer, read_records
from .roles import CRON_EVERY
from .store import FencedStore

__all__ = ("CampaignConfig", "CampaignResult", "run_campaign")

REPO = Path(__file__).resolve().parents[2]
# The grace a membership view gets beyond the session timeout, for the checker: see Params.
MEMBER_GRACE = 2.0
STOP_TIMEOUT = 20.0  # a participant told to stop must be gone by then, or it hangs


@dataclass(slots=True)
class CampaignConfig:
    """What a campaign runs; the same seed gives the same fault plan."""

    seed: int = 1
    seconds: float = 45.0  # fault phase
    calm: float = 10.0  # no faults and no new jobs, then stop
    participants: int = 4
    session_timeout: float = 3.0
    roles: str = ",".join(chaos_roles.ROLES)
    directory: Path | None = None
    keep: bool = False
    echo: Callable[[str], None] = print
    aimed: float = AIMED  # the share of participant faults aimed at a holder
    aims: tuple[str, ...] | None = None  # at the holders of these (default: all, see faults.AIMS)
    kinds: tuple[str, ...] | None = None  # participant faults of these kinds only (default: all)
    # Curator participants beside the Python ones (`java`), one JVM per role of
    # java.JAVA_ROLES that `roles` has; skipped, saying why, without javac or the jars.
    java: bool = True


@dataclass(slots=True)
class CampaignResult:
    report: Report
    directory: Path
    plan: list[Fault] = field(default_factory=list)


@dataclass(slots=True)
class _Slot:
    """One participant name: its proxies and its current process (incarnation `inc`)."""

    index: int
    name: str
    proxies: list[FaultProxy]
    loop: str
    inc: int = 0
    version: str = "1.0"
    java_role: str | None = None  # a Java participant (`java`) running this Curator recipe
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None
    expected_exit: bool = False  # we killed it, or told it to stop

    @property
    def hosts(self) -> str:
        return ",".join(p.connect_string for p in self.proxies)


class Holders:
    """Who holds what now, from the participants' logs as they grow (read on demand).

    `holder(aim)` is the participant (name, incarnation) with an open term of
    the aimed resource (``task``: any task; ``job``: running a job now), else
    the one whose term of it began last (the cron job's leader between two
    firings, the last worker to start a job); None if nobody held it yet.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._offsets: dict[Path, int] = {}
        self._tails: dict[Path, bytes] = {}
        self.open: dict[str, Record] = {}  # term id -> its term record
        self.last: dict[str, Record] = {}  # aim -> the latest term (or job run) record

    def _read(self) -> None:
        for path in sorted([*self.dir.glob("p*.jsonl"), *self.dir.glob("j*.jsonl")]):
            with open(path, "rb") as f:
                f.seek(self._offsets.get(path, 0))
                data = self._tails.pop(path, b"") + f.read()
                self._offsets[path] = f.tell()
            lines = data.split(b"\n")
            if lines[-1]:
                self._tails[path] = lines[-1]  # a line still being written
            for raw in lines[:-1]:
                try:
                    r = json.loads(raw)
                except ValueError:
                    continue
                self._event(r)

    def _event(self, r: Record) -> None:
        if r.get("k") == "term":
            aim = "task" if str(r["res"]).startswith("task:") else str(r["res"])
            self.open[r["id"]] = r
            self.last[aim] = r
        elif r.get("k") == "end":
            self.open.pop(r["id"], None)
        elif r.get("k") == "run":
            self.last["job"] = r
        elif r.get("k") == "exit":
            for tid in [t for t, term in self.open.items() if term["p"] == r["p"]]:
                del self.open[tid]

    def holder(self, aim: str) -> tuple[tuple[str, int], bool] | None:
        """((name, incarnation), whether it holds the resource right now) or None."""
        self._read()
        now = time.monotonic()
        for term in sorted(self.open.values(), key=lambda r: -float(r["t"])):
            res = str(term["res"])
            if aim == res or (aim == "task" and res.startswith("task:")):
                return (str(term["p"]), int(term["inc"])), True
        last = self.last.get(aim)
        if last is None:
            return None
        # A worker still running its job; the cron job's leader, which fires every second.
        end = float(last["t"]) + int(last.get("ms", 0)) / 1000
        running = end > now if aim == "job" else aim == "cron" and end + CRON_EVERY + 0.5 > now
        return (str(last["p"]), int(last["inc"])), running


class _Orchestrator:
    def __init__(
        self,
        cfg: CampaignConfig,
        directory: Path,
        stack: contextlib.ExitStack,
        java: chaos_java.JavaBuild,
    ) -> None:
        self.cfg = cfg
        self.java = java
        self.dir = directory
        self.stack = stack
        self.log = Writer(directory / "orchestrator.jsonl")
        stack.callback(self.log.close)
        self.lock = threading.RLock()
        self.rng = random.Random(cfg.seed)
        self.failures: list[BaseException] = []
        self.ensemble = ZooKeeperEnsemble(3)
        stack.callback(self.ensemble.cleanup)
        stack.callback(self._save_server_logs)  # runs first: the exit stack is LIFO
        self.store = FencedStore(directory / "store.jsonl")
        self.slots: list[_Slot] = []
        self.stopping = threading.Event()
        self.holders = Holders(directory)

    # --- set-up ---------------------------------------------------------------------------

    def setup(self) -> None:
        self.ensemble.start()
        self.stack.enter_context(self.store)
        names = [f"p{i + 1}" for i in range(self.cfg.participants)]
        java_roles = java_roles_of(self.cfg) if self.java.classpath else []
        for i, name in enumerate([*names, *(f"j{k + 1}" for k in range(len(java_roles)))]):
            proxies = []
            for m in self.ensemble.members:
                proxy = FaultProxy(m.host, m.port).start()
                self.stack.callback(proxy.stop)
                proxies.append(proxy)
            if i < len(names):
                self.slots.append(_Slot(i, name, proxies, "uvloop" if i % 2 else "asyncio"))
            else:
                role = java_roles[i - len(names)]
                self.slots.append(_Slot(i, name, proxies, "java", java_role=role))
        self.stack.callback(self._kill_all)

    def _save_server_logs(self) -> None:
        """Keep the members' logs with the campaign's (removed with them after a success)."""
        for member in self.ensemble.members:
            with contextlib.suppress(OSError):
                shutil.copyfile(member.log_path, self.dir / f"zookeeper-{member.myid}.log")

    def spawn(self, slot: _Slot) -> None:
        host, port = self.store.address
        if slot.java_role is not None:
            assert self.java.classpath is not None
            args = chaos_java.command(
                self.java.classpath,
                role=slot.java_role,
                name=slot.name,
                inc=slot.inc,
                hosts=slot.hosts,
                store=f"{host}:{port}",
                log=self.dir / f"{slot.name}.jsonl",
                session_timeout=self.cfg.session_timeout,
                seed=self.cfg.seed,
                namespace=chaos_roles.NAMESPACE,
            )
        else:
            args = self._python_args(slot)
        if slot.out is None:
            slot.out = open(self.dir / f"{slot.name}.out", "ab")  # noqa: SIM115 - closed in _kill_all
        slot.proc = subprocess.Popen(
            args, cwd=REPO, stdin=subprocess.DEVNULL, stdout=slot.out, stderr=slot.out,
            start_new_session=True,
        )  # fmt: skip
        slot.expected_exit = False
        self.log.emit("proc", p=slot.name, inc=slot.inc, ev="spawn", pid=slot.proc.pid)

    def _python_args(self, slot: _Slot) -> list[str]:
        host, port = self.store.address
        return [
            sys.executable, "-m", "tests.chaos.participant",
            "--name", slot.name, "--inc", str(slot.inc), "--hosts", slot.hosts,
            "--store", f"{host}:{port}", "--log", str(self.dir / f"{slot.name}.jsonl"),
            "--session-timeout", str(self.cfg.session_timeout), "--loop", slot.loop,
            "--version", slot.version, "--seed", str(self.cfg.seed), "--roles", self.cfg.roles,
        ]  # fmt: skip

    def _kill_all(self) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                with contextlib.suppress(OSError):
                    slot.proc.send_signal(signal.SIGCONT)
                slot.proc.kill()
                slot.proc.wait()
            if slot.out is not None:
                slot.out.close()
                slot.out = None

    # --- the phases -----------------------------------------------------------------------

    def run(self, faults: list[Fault]) -> None:
        cfg = self.cfg
        self.log.emit(
            "config",
            seed=cfg.seed,
            seconds=cfg.seconds,
            calm=cfg.calm,
            participants=cfg.participants,
            session_timeout=cfg.session_timeout,
            roles=cfg.roles,
            lease=chaos_roles.LEASE,
            lock_lease=chaos_roles.LOCK_LEASE,
            skew=chaos_roles.SKEW,
            once_interval=chaos_roles.ONCE_INTERVAL,
            sem_leases=chaos_roles.SEM_LEASES,
            barrier_members=chaos_roles.BARRIER_MEMBERS,
            member_grace=MEMBER_GRACE,
            leader_resources=self._leader_resources(),
            jobs="jobs" in cfg.roles,
            java={s.name: s.java_role for s in self.slots if s.java_role is not None},
            java_skipped=self.java.skipped,
        )
        if self.java.skipped:
            self.cfg.echo(f"chaos: {self.java.skipped}")
        for slot in self.slots:
            self.spawn(slot)
        for slot in self.slots:
            if self.store.wait_session(slot.name, incarnation=0, timeout=90) is None:
                raise TimeoutError(f"participant {slot.name} never connected; see {self.dir}")
        self.cfg.echo(f"chaos: {len(self.slots)} participants up; {len(faults)} faults planned")
        start = time.monotonic()
        self.log.emit("phase", name="faults", wall=time.time(), t=start)
        lanes = [
            threading.Thread(
                target=self._lane,
                args=([f for f in faults if f.lane == lane], start),
                name=f"chaos-{lane}-lane",
                daemon=True,  # an interrupted campaign does not wait for its lanes
            )
            for lane in ("participant", "ensemble")
        ]
        for lane in lanes:
            lane.start()
        while any(lane.is_alive() for lane in lanes):
            self._watch(0.2)
        if self.failures:
            raise self.failures[0]
        self.log.emit("phase", name="calm", wall=time.time())
        self.store.submitting = False  # every job submitted gets the calm phase to finish
        self.cfg.echo(f"chaos: faults done after {time.monotonic() - start:.1f} s; calm")
        calm_end = time.monotonic() + cfg.calm
        while time.monotonic() < calm_end:
            self._watch(min(0.2, calm_end - time.monotonic()))
        if "jobs" in cfg.roles.split(","):
            self._final_jobs()
        anyio.run(self._dump_tree)
        self.log.emit("phase", name="stop", wall=time.time())
        self._stop_all()
        self.log.emit("phase", name="done", wall=time.time())

    def _leader_resources(self) -> list[str]:
        chosen = self.cfg.roles.split(",")
        out = ["latch"] if "latch" in chosen else []
        if "tasks" in chosen:
            out += [f"task:{t}" for t in chaos_roles.TASKS]
        if "jobs" in chosen:
            out.append("assigner")
        out += [res for res in ("mutex", "cron", "selector") if res in chosen]
        return out

    def _final_jobs(self) -> None:
        """Ask ZooKeeper about every submitted job whose result no client saw (``job_final``).

        Jobs still pending or assigned get a few more seconds to finish, with
        the participants still running; what is unfinished then is lost.
        """
        records = list(read_records(p for p in self.files() if p.name.startswith("p")))
        seen = {r["job"] for r in records if r["k"] == "result"}
        missing = [r["job"] for r in records if r["k"] == "submit" and r["job"] not in seen]
        if missing:
            for job, status in anyio.run(self._statuses, missing).items():
                self.log.emit("job_final", job=job, status=status)

    async def _dump_tree(self) -> None:
        """Write the namespace's nodes (``tree.json``) as they are at the end of the calm phase.

        For diagnosis: who holds which node (ephemeral owner) when a liveness
        check fails.  Sessions are the ones the participants last reported.
        """
        nodes: list[dict[str, object]] = []
        async with aiocoord.connect(
            self.ensemble.connect_string, namespace=chaos_roles.NAMESPACE, session_timeout=5.0
        ) as coord:

            async def walk(path: str) -> None:
                try:
                    node = await coord.client.get(path)
                    kids = await coord.client.children(path)
                except NoNodeError:
                    return
                nodes.append(
                    {
                        "path": path,
                        "owner": f"0x{node.stat.ephemeral_owner:x}",
                        "czxid": f"0x{node.stat.czxid:x}",
                        "data": node.data[:200].decode("utf-8", "replace"),
                    }
                )
                for kid in sorted(kids):
                    if not (path == "/jobs" and kid in ("results", "jobs")):  # too many
                        await walk(f"{path.rstrip('/')}/{kid}")

            with anyio.move_on_after(20):
                await walk("/")
            if "cache" in self.cfg.roles.split(","):
                await self._dump_cache(coord)
            if "count" in self.cfg.roles.split(","):
                await self._dump_counters(coord)
        sessions = {
            slot.name: f"0x{info.session_id:x}"
            for slot in self.slots
            if (info := self.store.session(slot.name)) is not None
        }
        dump = {"sessions": sessions, "nodes": nodes}
        (self.dir / "tree.json").write_text(json.dumps(dump, indent=1))

    async def _dump_cache(self, coord: aiocoord.Coordinator) -> None:
        """Log the server's ``/cache`` subtree (``cache_server``): what every cache must equal.

        Read node by node with plain reads (not with a cache: this is what the
        caches are checked against), after the calm phase, when nothing writes
        there any more; not logged if it cannot be read whole.
        """
        client = coord.client
        nodes: dict[str, aiocoord.Node] = {}

        async def walk(path: str) -> None:
            try:
                nodes[path] = await client.get(path)
                kids = await client.children(path)
            except NoNodeError:
                return
            for kid in kids:
                await walk(f"{path}/{kid}")

        with anyio.move_on_after(20):
            await client.sync(chaos_roles.CACHE_ROOT)
            await walk(chaos_roles.CACHE_ROOT)
            self.log.emit("cache_server", nodes=chaos_roles.node_states(nodes))

    async def _dump_counters(self, coord: aiocoord.Coordinator) -> None:
        """Log the counters' values after the calm phase (``counter_final``), read after a sync.

        Nothing increments them any more (the participants stopped at the
        calm phase), so each must equal its acknowledged increments, plus at
        most those whose outcome the caller could not know.
        """
        client = coord.client
        values: dict[str, int] = {}
        with anyio.move_on_after(20):
            for name, path, size in (
                ("shared", chaos_roles.COUNT, 4),
                ("long", chaos_roles.ALONG, 8),
            ):
                await client.sync(path)
                try:
                    data = (await client.get(path)).data
                except NoNodeError:
                    data = b""
                values[name] = int.from_bytes(data, "big", signed=True) if data else 0
                if data and len(data) != size:
                    values[name] = -(2**63)  # not a counter: fails the check, visibly
            self.log.emit("counter_final", values=values)

    async def _statuses(self, jobs: list[str]) -> dict[str, str]:
        deadline = time.monotonic() + 15.0
        out: dict[str, str] = {}
        async with aiocoord.connect(
            self.ensemble.connect_string, namespace=chaos_roles.NAMESPACE, session_timeout=5.0
        ) as coord:
            sched = Scheduler(coord, chaos_roles.JOBS_ROOT)
            for job in jobs:
                while True:
                    try:
                        status = (await sched.status(job)).name
                    except NoNodeError:
                        status = "UNKNOWN"
                    if status in ("DONE", "FAILED") or time.monotonic() > deadline:
                        break
                    await anyio.sleep(0.2)
                out[job] = status
        return out

    def _watch(self, seconds: float) -> None:
        """Sleep `seconds`, then restart any participant that died on its own (a crash)."""
        time.sleep(max(0.0, seconds))
        with self.lock:
            for slot in self.slots:
                proc = slot.proc
                if proc is not None and not slot.expected_exit and proc.poll() is not None:
                    self.log.emit(
                        "proc", p=slot.name, inc=slot.inc, ev="crash", code=proc.returncode
                    )
                    self.cfg.echo(f"chaos: {slot.name}.{slot.inc} crashed ({proc.returncode})")
                    slot.inc += 1
                    self.spawn(slot)

    def _stop_all(self) -> None:
        with self.lock:
            for slot in self.slots:
                if slot.proc is not None and slot.proc.poll() is None:
                    slot.expected_exit = True
                    self.log.emit("proc", p=slot.name, inc=slot.inc, ev="sigterm")
                    slot.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            for slot in self.slots:
                proc = slot.proc
                if proc is None:
                    continue
                try:
                    code = proc.wait(max(0.1, deadline - time.monotonic()))
                    self.log.emit("proc", p=slot.name, inc=slot.inc, ev="exit", code=code)
                    if code != 0:
                        self.log.emit("proc", p=slot.name, inc=slot.inc, ev="crash", code=code)
                except subprocess.TimeoutExpired:
                    self.log.emit("proc", p=slot.name, inc=slot.inc, ev="hang")
                    proc.kill()
                    proc.wait()
                    self.log.emit("proc", p=slot.name, inc=slot.inc, ev="sigkill")

    # --- the lanes ------------------------------------------------------------------------

    def _lane(self, faults: list[Fault], start: float) -> None:
        try:
            for fault in faults:
                wait = start + fault.at - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if time.monotonic() - start >= self.cfg.seconds or self.stopping.is_set():
                    return
                t0 = time.monotonic()
                extra: dict[str, Any] = {}
                if fault.lane == "participant":
                    index, aim = self._aim(fault)
                    slot = self.slots[index]
                    extra = {"p": slot.name, "inc": slot.inc, "aim": aim}
                    target, detail = self._participant_fault(fault, index)
                else:
                    target, detail = self._ensemble_fault(fault)
                t1 = time.monotonic()
                self.log.emit(
                    "fault", kind=fault.kind, target=target, t0=t0, t1=t1, detail=detail, **extra
                )
                aimed = f" [{extra['aim']}]" if extra.get("aim") else ""
                self.cfg.echo(
                    f"chaos: +{t0 - start:5.1f}s {fault.kind} {target}{aimed} ({t1 - t0:.1f}s) "
                    f"{detail}"
                )
        except BaseException as exc:
            self.failures.append(exc)

    def _aim(self, fault: Fault) -> tuple[int, str | None]:
        """The slot an aimed fault hits, and what it hit (``latch holder``, ``lock last``...)."""
        if fault.aim is None:
            return fault.target, None
        found = self.holders.holder(fault.aim)
        if found is not None:
            (name, inc), now = found
            with self.lock:
                for slot in self.slots:
                    if slot.name == name and slot.inc == inc:
                        return slot.index, f"{fault.aim} {'holder' if now else 'last'}"
        return fault.target, f"{fault.aim} none"

    def _participant_fault(self, fault: Fault, index: int) -> tuple[str, str]:
        slot = self.slots[index]
        kind = fault.kind
        if kind == "cut":
            reset = bool(self.rng.getrandbits(1))
            n = sum(p.cut(reset=reset) for p in slot.proxies)
            return slot.name, f"{n} connection(s){' reset' if reset else ''}"
        if kind.startswith("net_pause"):
            for p in slot.proxies:
                p.pause()
            time.sleep(fault.hold)
            for p in slot.proxies:
                p.resume()
            return slot.name, f"{fault.hold:.2f}s"
        if kind == "expire":
            return slot.name, self._expire(slot)
        if kind.startswith("stop"):
            with self.lock:
                proc = slot.proc
                assert proc is not None
                self.log.emit("proc", p=slot.name, inc=slot.inc, ev="sigstop")
                proc.send_signal(signal.SIGSTOP)
            time.sleep(fault.hold)
            with self.lock:
                proc.send_signal(signal.SIGCONT)
                self.log.emit("proc", p=slot.name, inc=slot.inc, ev="sigcont")
            return f"{slot.name}.{slot.inc}", f"{fault.hold:.2f}s"
        if kind == "kill":
            with self.lock:
                proc = slot.proc
                assert proc is not None
                slot.expected_exit = True
                proc.kill()
                proc.wait()
                killed = f"{slot.name}.{slot.inc}"
                self.log.emit("proc", p=slot.name, inc=slot.inc, ev="sigkill")
            time.sleep(fault.hold)
            with self.lock:
                slot.inc += 1
                slot.version = fault.version or slot.version
                self.spawn(slot)
            return killed, f"back as {slot.name}.{slot.inc} v{slot.version} after {fault.hold:.2f}s"
        raise ValueError(f"unknown participant fault {kind!r}")

    def _expire(self, slot: _Slot) -> str:
        info = self.store.session(slot.name)
        if info is None or info.incarnation != slot.inc:
            return "skipped: no session reported"
        members = self.ensemble.members
        candidates: list[EnsembleMember] = []
        for proxy, member in zip(slot.proxies, members, strict=True):
            if proxy.port == info.port:
                candidates.append(member)  # the member it is connected to, first
        candidates += [m for m in members if m not in candidates]
        errors = []
        for member in candidates:
            if not member.running:
                continue
            try:
                expired = kill_session(
                    member.host, member.port, info.session_id, info.password, 5.0
                )
            except OSError as exc:  # TimeoutError included: try another member
                errors.append(f"{member.name}: {exc}")
                continue
            return f"session 0x{info.session_id:x} {'expired' if expired else 'already gone'}"
        return f"skipped: no member answered ({'; '.join(errors)})"

    def _ensemble_fault(self, fault: Fault) -> tuple[str, str]:
        if fault.kind == "member_restart":
            member = self.ensemble.members[fault.target]
            member.stop()
            time.sleep(fault.hold)
            member.start(timeout=60)
            return member.name, f"down {fault.hold:.2f}s"
        if fault.kind == "leader_kill":
            leader = self.ensemble.leader()
            if leader is None:
                return "-", "skipped: no leader"
            self.ensemble.kill(leader)
            time.sleep(fault.hold)
            leader.start(timeout=60)
            return leader.name, f"down {fault.hold:.2f}s"
        raise ValueError(f"unknown ensemble fault {fault.kind!r}")

    def files(self) -> Iterator[Path]:
        yield self.dir / "orchestrator.jsonl"
        yield self.dir / "store.jsonl"
        for slot in self.slots:
            path = self.dir / f"{slot.name}.jsonl"
            if path.exists():
                yield path


def java_roles_of(cfg: CampaignConfig) -> list[str]:
    """The Java participants' roles a campaign of `cfg` runs (one JVM each, see `java`)."""
    chosen = cfg.roles.split(",")
    return [role for role in chaos_java.JAVA_ROLES if cfg.java and role in chosen]


def digest_mismatches(directory: Path) -> int:
    """Lines of ZooKeeper's own data-tree digest check failing, in the members' saved logs."""
    count = 0
    for log in directory.glob("zookeeper-*.log"):
        with contextlib.suppress(OSError), log.open(errors="replace") as f:
            count += sum(1 for line in f if "Digests are not matching" in line)
    return count


def run_campaign(cfg: CampaignConfig) -> CampaignResult:
    """Run one campaign (see the module docstring) and check it; the report says the verdict."""
    directory = cfg.directory or Path(tempfile.mkdtemp(prefix="aiocoord-chaos-"))
    directory.mkdir(parents=True, exist_ok=True)
    if not cfg.java:
        java = chaos_java.JavaBuild(None, "Java participants not asked for: java=False (--no-java)")
    elif not java_roles_of(cfg):
        java = chaos_java.JavaBuild(None, None)  # none of their roles chosen: nothing to say
    else:
        java = chaos_java.prepare(directory / "java")
    java_count = len(java_roles_of(cfg)) if java.classpath else 0
    faults = plan(
        cfg.seed,
        cfg.seconds,
        cfg.participants,
        session_timeout=cfg.session_timeout,
        aimed=cfg.aimed,
        aims=cfg.aims,
        kinds=cfg.kinds,
    )
    faults = with_java(faults, cfg.participants, java_count, cfg.seed)
    ok = False
    try:
        with contextlib.ExitStack() as stack:
            orch = _Orchestrator(cfg, directory, stack, java)
            stack.callback(orch.stopping.set)  # first thing on the way out: lanes stop
            orch.setup()
            orch.run(faults)
        report = check(read_records(orch.files()))
        report.server_digest_mismatches = digest_mismatches(directory)
        ok = report.ok
        return CampaignResult(report, directory, faults)
    finally:
        if ok and not cfg.keep and cfg.directory is None:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            cfg.echo(f"chaos: logs kept in {directory}")
