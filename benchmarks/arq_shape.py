"""The job scheduler against arq, in the shape arq users run it, in one run.

Both systems get their own server, started here: Debian's ``redis-server``
(AOF, ``appendfsync everysec``, loopback, a free port, its own temporary
folder, stopped by its PID at exit) for arq, and a standalone ZooKeeper with
fsync on (its default ``forceSync=yes``) for aiocoord, its JVM run as
deployed (the full JIT, warmed up first by `--server-warmup` unmeasured
jobs), not with the test servers' quick-start flags.  Each system runs in
the same shape, every part its own process (`_arq_roles`): 3 worker
processes (each aiocoord worker on its own session) and 1 client process
whose 200 concurrent submitters each submit a trivial job and await its
result.  Rounds interleave the two systems (the order alternating), so a
noisy machine weighs on both; each round starts fresh workers and a fresh
queue (a new root; Redis flushed) and warms up with 200 jobs first.

Printed: jobs/s of each round for N = 2,000 and 20,000 jobs and the ratio;
per job, the ZooKeeper server's requests (``mntr``'s packets received), its
writes (transactions: the ``zxid`` advanced), its disk syncs and the watch
notifications it sent (the sums of ``mntr``'s ``node_*_watch_count``: the
watches, one-shot or persistent, each change reached), and Redis' commands;
the CPU time each process spent per job (``/proc``); a steady run
(100 jobs/s, each awaited) with p50/p99 of submit -> result; and a backlog (50,000 jobs queued before the workers start), timed
from the workers' start to the last result.

arq's own poll delays (the worker's queue poll and the client's result
poll) are 0.5 s by default; both are set to ``--poll`` (10 ms), as users
chasing throughput set them, and its ``max_jobs`` to the workers' capacity.

    python -m benchmarks.arq_shape [--sizes 2000,20000] [--rounds 2] [--backlog 50000]

``--ensemble 3`` runs the scheduler on a 3-member ensemble instead (each
member fsync on, the full JIT; every write then commits through a quorum):
ZooKeeper's counters are summed over the members, disk syncs included (each
member syncs its own log), and each member's CPU is shown.

Profiling: ``--only aiocoord`` runs one system; ``--count-ops DIR`` writes the
ZooKeeper requests each aiocoord process sent, by type; ``--profile DIR``
samples every Python process with py-spy (``pip install py-spy``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

from aiocoord.server import ZooKeeperProcess, free_ports, make_temp_dir
from aiocoord.testing import ZooKeeperEnsemble, ZooKeeperServer, four_letter_word

from . import python_m

__all__ = ("Redis", "main")

ROLES = "benchmarks._arq_roles"
# The test servers' JVM flags favour a fast start (C1 only, a container check every 0.5 s);
# a server that is measured runs as deployed: the full JIT (warmed up first, unmeasured, by
# `--server-warmup` jobs), the default check (60 s).
SERVER_JVM = ("-Xmx1g", "-XX:TieredStopAtLevel=4", "-Dznode.container.checkIntervalMs=60000")


class Redis:
    """A ``redis-server`` of our own: AOF everysec, loopback, free port, own folder."""

    def __init__(self) -> None:
        self.port = free_ports(1)[0]
        self.directory = Path(make_temp_dir("aiocoord-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        command = [
            shutil.which("redis-server") or "redis-server",
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.command("PING") == "PONG":
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"redis-server did not answer on port {self.port} in {timeout}s")

    def command(self, *words: str) -> str:
        """One command over RESP; the reply as text (a bulk or simple string, or an integer)."""
        body = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            sock.sendall(body.encode())
            data = b""
            while not data.endswith(b"\r\n") or (
                data.startswith(b"$") and len(data) < int(data[1 : data.index(b"\r\n")]) + 4
            ):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        head, _, rest = data.partition(b"\r\n")
        if head.startswith(b"$"):
            return rest[: int(head[1:])].decode()
        return head[1:].decode()

    def info(self) -> dict[str, str]:
        lines = self.command("INFO").splitlines()
        return dict(line.split(":", 1) for line in lines if ":" in line)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        shutil.rmtree(self.directory, ignore_errors=True)


class Child:
    """One process of `_arq_roles`; its JSON lines are read with a deadline."""

    def __init__(self, *args: str) -> None:
        self.name = " ".join(args[:1])
        command, env = python_m(ROLES, *args)
        self.proc = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        import selectors

        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError(f"{self.name}: no {event!r} in {timeout}s")
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"{self.name} exited ({self.proc.wait()})")
                try:
                    out: dict[str, Any] = json.loads(line)
                except ValueError:
                    continue
                if out.get("event") == event:
                    return out

    def say(self, word: str) -> None:
        stdin: IO[str] | None = self.proc.stdin
        assert stdin is not None
        stdin.write(word + "\n")
        stdin.flush()

    def stop(self) -> None:
        """SIGTERM by PID, then SIGKILL if it lingers."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


class Servers:
    """Both servers and their counters (ZooKeeper's summed over an ensemble's members)."""

    def __init__(self, redis: Redis, zk: ZooKeeperServer | ZooKeeperEnsemble) -> None:
        self.redis, self.zk = redis, zk
        self.members: list[ZooKeeperProcess] = (
            list(zk.members) if isinstance(zk, ZooKeeperEnsemble) else [zk]
        )
        self.roots = 0

    def counters(self, system: str) -> dict[str, float]:
        if system == "arq":
            info = self.redis.info()
            return {"commands": float(info["total_commands_processed"])}
        totals = {"requests": 0.0, "fsyncs": 0.0, "notifications": 0.0}
        for member in self.members:
            mntr = dict(
                line.split("\t", 1)
                for line in four_letter_word(member.host, member.port, "mntr").splitlines()
                if "\t" in line
            )
            totals["requests"] += float(mntr["zk_packets_received"])
            totals["fsyncs"] += float(mntr["zk_cnt_fsynctime"])  # each member syncs its log
            # Watches each change reached (one-shot and persistent): the notifications sent.
            totals["notifications"] += sum(
                float(mntr.get(f"zk_sum_node_{kind}_watch_count", 0))
                for kind in ("created", "deleted", "changed", "children")
            )
        first = self.members[0]
        srvr = four_letter_word(first.host, first.port, "srvr")
        zxid = next(line for line in srvr.splitlines() if line.startswith("Zxid:"))
        totals["writes"] = float(int(zxid.split()[-1], 16) & 0xFFFFFFFF)  # counter of this epoch
        return totals

    def server_pids(self, system: str) -> dict[str, int | None]:
        if system == "arq":
            return {"server": self.redis.proc.pid if self.redis.proc else None}
        if len(self.members) == 1:
            return {"server": self.members[0].pid}
        return {f"server{i + 1}": m.pid for i, m in enumerate(self.members)}

    def role_args(self, system: str, args: argparse.Namespace) -> list[str]:
        common = ["--capacity", str(args.capacity), "--loop", args.loop]
        if system == "arq":
            return [*common, "--port", str(self.redis.port), "--poll", str(args.poll)]
        return [*common, "--hosts", self.zk.connect_string]

    def fresh(self, system: str) -> list[str]:
        """A clean queue: Redis flushed, or a new scheduler root."""
        if system == "arq":
            self.redis.command("FLUSHALL")
            return []
        self.roots += 1
        return ["--root", f"/bench-arq-shape-{self.roots}"]


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of process `pid` so far (Linux ``/proc``), 0 if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def profiled(args: argparse.Namespace, label: str, pids: dict[str, int | None]) -> Iterator[None]:
    """With ``--profile DIR``: py-spy samples each Python process of the round (collapsed stacks)."""
    spies: list[subprocess.Popen[bytes]] = []
    local = Path(sys.executable).with_name("py-spy")  # pip install py-spy into the venv
    spy_exe = str(local) if local.exists() else shutil.which("py-spy")
    if args.profile is not None and spy_exe is not None:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            if name != "server" and pid is not None:
                out = Path(args.profile) / f"{label}-{name}.txt"
                command = [spy_exe, "record", "--pid", str(pid), "--format", "raw", "--rate", "100",
                           "--nonblocking", "--output", str(out)]  # fmt: skip
                spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))  # fmt: skip
    try:
        yield
    finally:
        for spy in spies:
            os.kill(spy.pid, signal.SIGINT)  # py-spy writes its file on SIGINT
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(spy.pid, signal.SIGKILL)
                spy.wait(5)


@contextmanager
def workers(servers: Servers, system: str, extra: list[str], args: argparse.Namespace,
            label: str, wait: bool = True) -> Iterator[list[Child]]:  # fmt: skip
    role = "arq-worker" if system == "arq" else "zk-worker"
    started = [
        Child(role, *servers.role_args(system, args), *extra, *ops(args, f"{label}-worker{i + 1}"))
        for i in range(args.workers)
    ]
    try:
        if wait:
            for child in started:
                child.expect("ready", args.timeout)
        yield started
    finally:
        for child in started:
            child.stop()


def ops(args: argparse.Namespace, name: str) -> list[str]:
    if args.count_ops is None:
        return []
    Path(args.count_ops).mkdir(parents=True, exist_ok=True)
    return ["--count-ops", str(Path(args.count_ops) / f"{name}.json")]


def client(servers: Servers, system: str, extra: list[str], args: argparse.Namespace,
           load: str, jobs: int, label: str) -> Child:  # fmt: skip
    role = "arq-client" if system == "arq" else "zk-client"
    return Child(
        role,
        *servers.role_args(system, args),
        *extra,
        "--load", load,
        "--jobs", str(jobs),
        "--concurrency", str(args.concurrency),
        "--rate", str(args.rate),
        "--warmup", str(args.warmup),
        *ops(args, f"{label}-client"),
    )  # fmt: skip


def measured(servers: Servers, system: str, args: argparse.Namespace, load: str,
             jobs: int) -> dict[str, float]:  # fmt: skip
    """One round of `load` for `system`: its figures and its servers' counters per job."""
    extra = servers.fresh(system)
    label = f"{system}-{load}-{jobs}"
    with workers(servers, system, extra, args, label) as fleet:
        c = client(servers, system, extra, args, load, jobs, label)
        try:
            c.expect("ready", args.timeout)  # connected and warmed up
            pids: dict[str, int | None] = {"client": c.proc.pid, **servers.server_pids(system)}
            pids.update({f"worker{i + 1}": w.proc.pid for i, w in enumerate(fleet)})
            cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
            before = servers.counters(system)
            with profiled(args, label, pids):
                c.say("go")
                out = c.expect("done", args.timeout)
            after = servers.counters(system)
            for name, pid in pids.items():
                out[f"cpu_ms_{name}"] = (cpu_seconds(pid) - cpu[name]) * 1e3 / jobs
        finally:
            c.stop()
    out["jobs_per_s"] = jobs / out["seconds"]
    for key, value in after.items():
        out[f"{key}_per_job"] = (value - before[key]) / jobs
    return out


def backlog(servers: Servers, system: str, args: argparse.Namespace) -> dict[str, float]:
    """`args.backlog` jobs queued with no worker; then the workers start: time to the last result."""
    extra = servers.fresh(system)
    label = f"{system}-backlog-{args.backlog}"
    c = client(servers, system, extra, args, "backlog", args.backlog, label)
    try:
        c.expect("ready", args.timeout)
        submitted = c.expect("submitted", args.timeout)
        before = servers.counters(system)
        c.say("go")
        with workers(servers, system, extra, args, label, wait=False):
            out = c.expect("done", args.timeout)
        after = servers.counters(system)
    finally:
        c.stop()
    out["submit_s"] = submitted["seconds"]
    out["jobs_per_s"] = args.backlog / out["seconds"]
    for key, value in after.items():
        out[f"{key}_per_job"] = (value - before[key]) / args.backlog
    return out


def progress(what: str, system: str, out: dict[str, float]) -> None:
    """One line as each measurement ends: a long run shows its figures as it goes."""
    costs = ", ".join(f"{k[:-8]} {v:.2f}" for k, v in out.items() if k.endswith("_per_job"))
    cpu_ms = [v for k, v in out.items() if k.startswith("cpu_ms_")]
    cpu = f"; CPU {sum(cpu_ms):.2f} ms/job" if cpu_ms else ""
    extra = (
        f", p50 {out['p50'] * 1e3:.1f} ms, p99 {out['p99'] * 1e3:.1f} ms" if "p50" in out else ""
    )
    print(f"  {what}, {system}: {out['jobs_per_s']:.0f} jobs/s ({costs} per job{cpu}{extra})",
          flush=True)  # fmt: skip


def bench(servers: Servers, args: argparse.Namespace) -> dict[Any, Any]:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip() and s != "none"]
    r: dict[Any, Any] = {"rounds": {}}
    if args.server_warmup and "aiocoord" in args.systems:
        # A server that has run a while has its hot code compiled (JIT): not measured.
        progress("server warm-up", "aiocoord", measured(servers, "aiocoord", args, "burst",
                                                         args.server_warmup))  # fmt: skip
    for round_ in range(args.rounds):
        both = ("arq", "aiocoord") if round_ % 2 == 0 else ("aiocoord", "arq")
        order = [system for system in both if system in args.systems]
        for jobs in sizes:
            for system in order:
                out = measured(servers, system, args, "burst", jobs)
                r["rounds"].setdefault((system, jobs), []).append(out)
                progress(f"round {round_ + 1}, {jobs} jobs", system, out)
    for system in args.systems if args.steady_seconds > 0 else ():
        out = measured(servers, system, args, "steady", round(args.rate * args.steady_seconds))
        r[("steady", system)] = out
        progress(f"steady {args.rate:.0f}/s", system, out)
    if args.backlog:
        for system in args.systems:
            r[("backlog", system)] = out = backlog(servers, system, args)
            progress(f"backlog {args.backlog}", system, out)
    return r


def report(r: dict[Any, Any], args: argparse.Namespace) -> dict[str, float]:
    """Print the tables; return the headline figures (for tests and the docs)."""
    figures: dict[str, float] = {}
    print(
        f"arq_shape: {args.workers} worker processes (capacity {args.capacity}), 1 client "
        f"process with {args.concurrency} submitters, {args.loop}; arq poll {args.poll}s"
    )
    print(f"{'jobs':>7} {'arq jobs/s':>18} {'aiocoord jobs/s':>18} {'ratio':>6} "
          f"{'zk req/job':>10} {'zk wr/job':>9} {'fsync/job':>9} {'notif/job':>9} "
          f"{'redis cmd/job':>13}")  # fmt: skip
    sizes = sorted({jobs for (_, jobs) in r["rounds"]})
    for jobs in sizes:
        arq = [o["jobs_per_s"] for o in r["rounds"][("arq", jobs)]]
        zk = r["rounds"][("aiocoord", jobs)]
        ours = [o["jobs_per_s"] for o in zk]
        ratio = statistics.median(ours) / statistics.median(arq)
        req = statistics.median(o["requests_per_job"] for o in zk)
        wr = statistics.median(o["writes_per_job"] for o in zk)
        fs = statistics.median(o["fsyncs_per_job"] for o in zk)
        nt = statistics.median(o["notifications_per_job"] for o in zk)
        cmd = statistics.median(o["commands_per_job"] for o in r["rounds"][("arq", jobs)])
        print(
            f"{jobs:>7} {' '.join(f'{v:.0f}' for v in arq):>18} "
            f"{' '.join(f'{v:.0f}' for v in ours):>18} {ratio:>5.2f}x "
            f"{req:>10.2f} {wr:>9.2f} {fs:>9.3f} {nt:>9.2f} {cmd:>13.2f}"
        )
        figures.update({
            f"arq_{jobs}": statistics.median(arq), f"aiocoord_{jobs}": statistics.median(ours),
            f"ratio_{jobs}": ratio, f"requests_per_job_{jobs}": req,
            f"writes_per_job_{jobs}": wr, f"fsyncs_per_job_{jobs}": fs,
            f"notifications_per_job_{jobs}": nt,
            f"redis_commands_per_job_{jobs}": cmd,
        })  # fmt: skip
    print("CPU ms per job by process (median of rounds; 'server': redis-server or ZooKeeper):")
    for jobs in sizes:
        for system in ("arq", "aiocoord"):
            outs = r["rounds"][(system, jobs)]
            names = sorted(k[len("cpu_ms_") :] for k in outs[0] if k.startswith("cpu_ms_"))
            cpu = {n: statistics.median(o[f"cpu_ms_{n}"] for o in outs) for n in names}
            cells = ", ".join(f"{n} {v:.2f}" for n, v in cpu.items())
            print(f"{jobs:>7} {system:<9} total {sum(cpu.values()):.2f}: {cells}")
            figures[f"cpu_ms_{system}_{jobs}"] = sum(cpu.values())
    sa, sz = r[("steady", "arq")], r[("steady", "aiocoord")]
    print(
        f"steady {args.rate:.0f} jobs/s, submit -> result: arq p50 {sa['p50'] * 1e3:.1f} ms "
        f"p99 {sa['p99'] * 1e3:.1f} ms; aiocoord p50 {sz['p50'] * 1e3:.1f} ms "
        f"p99 {sz['p99'] * 1e3:.1f} ms"
    )
    figures.update({
        "steady_arq_p50": sa["p50"], "steady_arq_p99": sa["p99"],
        "steady_aiocoord_p50": sz["p50"], "steady_aiocoord_p99": sz["p99"],
    })  # fmt: skip
    if ("backlog", "arq") in r:
        ba, bz = r[("backlog", "arq")], r[("backlog", "aiocoord")]
        print(
            f"backlog {args.backlog} jobs queued first (arq {ba['submit_s']:.1f} s, aiocoord "
            f"{bz['submit_s']:.1f} s), workers started, to the last result: arq "
            f"{ba['jobs_per_s']:.0f} jobs/s, aiocoord {bz['jobs_per_s']:.0f} jobs/s: "
            f"{bz['jobs_per_s'] / ba['jobs_per_s']:.2f}x; zk {bz['requests_per_job']:.2f} "
            f"req/job, {bz['writes_per_job']:.2f} writes/job, "
            f"{bz['notifications_per_job']:.2f} notifications/job"
        )
        figures.update({
            "backlog_arq": ba["jobs_per_s"], "backlog_aiocoord": bz["jobs_per_s"],
            "backlog_ratio": bz["jobs_per_s"] / ba["jobs_per_s"],
        })  # fmt: skip
    return figures


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="2000,20000", help="jobs per burst round ('none')")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--capacity", type=int, default=64, help="jobs at once per worker")
    parser.add_argument("--concurrency", type=int, default=200, help="submitters")
    parser.add_argument("--warmup", type=int, default=200, help="jobs per round, not measured")
    parser.add_argument("--server-warmup", type=int, default=2000, help="ZooKeeper's JIT, first")
    parser.add_argument("--rate", type=float, default=100.0, help="jobs/s of the steady run")
    parser.add_argument("--steady-seconds", type=float, default=10.0, help="0: no steady run")
    parser.add_argument("--backlog", type=int, default=50_000, help="0: no backlog run")
    parser.add_argument("--poll", type=float, default=0.01, help="arq's poll delays (s)")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per measurement (s)")
    parser.add_argument("--count-ops", default=None, help="folder: ZooKeeper requests by type")
    parser.add_argument("--profile", default=None, help="folder: py-spy stacks of each process")
    parser.add_argument("--only", choices=("arq", "aiocoord"), help="profiling: one system alone")
    parser.add_argument(
        "--ensemble", type=int, default=0, help="aiocoord on an ensemble of this many (0: one)"
    )
    args = parser.parse_args(argv)
    args.systems = ("arq", "aiocoord") if args.only is None else (args.only,)
    # Stopped (SIGTERM): unwind, so that every process started here is stopped by its PID.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with ExitStack() as stack:
        redis = Redis()
        stack.callback(redis.stop)
        redis.start()
        zk: ZooKeeperServer | ZooKeeperEnsemble
        if args.ensemble:
            zk = ZooKeeperEnsemble(args.ensemble, extra_config={"forceSync": "yes"})
            for member in zk.members:
                member.jvm_args = SERVER_JVM  # after the quick-start flags: these win
            stack.enter_context(zk)
        else:
            zk = stack.enter_context(
                ZooKeeperServer(extra_config={"forceSync": "yes"}, jvm_args=SERVER_JVM)
            )
        r = bench(Servers(redis, zk), args)
    if args.only is not None or not r["rounds"] or args.steady_seconds <= 0:
        print(json.dumps({str(k): v for k, v in r.items() if k != "rounds"}, indent=1))
        print(json.dumps({str(k): v for k, v in r["rounds"].items()}, indent=1))
        return {}
    return report(r, args)


if __name__ == "__main__":
    main()
