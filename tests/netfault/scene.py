"""`Scene`: participant processes (`participant`) in a `NetworkLab`, and waits on their logs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from aiocoord.testing import EnsembleMember, NetworkLab

from ..chaos.records import Record, read_records

__all__ = ("Scene",)

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


class Scene:
    """Clients of one scenario: each in its own namespace, each logging to ``directory``."""

    def __init__(self, lab: NetworkLab, directory: Path, session_timeout: float) -> None:
        self.lab = lab
        self.directory = directory
        self.session_timeout = session_timeout
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def client(
        self,
        name: str,
        members: Iterable[EnsembleMember],
        *,
        ordered: bool = False,
        module: str = "tests.netfault.participant",
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        relay: bool = False,
    ) -> None:
        """Start participant ``name`` in a new namespace of that name, connecting to ``members``.

        ``module`` is the participant's program (``--name``, ``--hosts``,
        ``--log`` and ``--session-timeout`` are passed to it, then ``args``);
        ``env`` is added to its environment; ``relay``: its node gets a delay
        relay (`NetworkLab.node`), for `NetworkLab.impair` without netem.
        """
        node = self.lab.node(name, relay=relay)
        hosts = ",".join(m.connect_string for m in members)
        argv = [
            sys.executable, "-m", module,
            "--name", name, "--hosts", hosts,
            "--log", str(self.directory / f"{name}.jsonl"),
            "--session-timeout", str(self.session_timeout),
            *args,
        ]  # fmt: skip
        if ordered:
            argv.append("--ordered")
        environment = {**os.environ, **env} if env is not None else None
        with (self.directory / f"{name}.err").open("ab") as err:
            self.procs[name] = self.lab.spawn(
                node, argv, cwd=ROOT, stdout=err, stderr=err, env=environment
            )

    def records(self) -> list[Record]:
        paths = sorted(self.directory.glob("*.jsonl"))
        return sorted(read_records(paths), key=lambda r: float(r["t"]))

    def wait(self, what: str, found: Callable[[list[Record]], T | None], timeout: float) -> T:
        """Poll the logs until ``found`` returns something (not None); AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            value = found(self.records())
            if value is not None:
                return value
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise AssertionError(f"{name} exited ({proc.returncode}) waiting for {what}")
            if time.monotonic() >= deadline:
                raise AssertionError(f"no {what} within {timeout}s")
            time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> dict[str, int | None]:
        """SIGTERM every participant and wait; returns their exit codes (None: killed)."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                codes[name] = None
        return codes

    def logs(self) -> str:
        """The participants' stderr, for a failure message."""
        return "\n".join(
            f"--- {p.name}:\n" + p.read_text(errors="replace")[-3000:]
            for p in sorted(self.directory.glob("*.err"))
        )
