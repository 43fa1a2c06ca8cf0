"""What the soak records: the `Recorder` its roles report to, the library's log, the samples.

The soak measures this process's memory, so its own books must not grow
with the run: terms go to a file (read back for the verdict at the end),
latencies are kept for one sampling interval only, errors keep their first
tracebacks and then only a count.  What stays in memory grows with the
number of faults (a few each), not with the load.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType

import anyio.lowlevel
import anyio.to_thread

import aiocoord
from aiocoord.testing import four_letter_word

from .soak_verdict import Fault, Firing, Jobs, Sample, Term, WindowRun, percentiles

__all__ = ("Fault", "FencedStore", "LogCounter", "Recorder", "take_sample")

KEPT_TRACEBACKS = 10


class FencedStore:
    """What a holder writes to, standing in for a database: it refuses a stale fencing token.

    A write to `resource` is accepted when its token is at least the highest
    accepted so far for that resource.  Only the highest token per resource
    and two counts are kept.
    """

    def __init__(self) -> None:
        self._high: dict[str, int] = {}
        self.accepted = 0
        self.refused = 0

    def write(self, resource: str, token: int) -> bool:
        """Write to `resource` with `token`; False (counted) when a larger token wrote first."""
        high = self._high.get(resource)
        if high is not None and token < high:
            self.refused += 1
            return False
        self._high[resource] = token
        self.accepted += 1
        return True


class Recorder:
    """Terms (to `path`), SUSPENDED times, faults, jobs, latencies and errors; see the module."""

    def __init__(self, path: Path) -> None:
        self._t0 = time.monotonic()
        self.wall0 = time.time() - self.now()  # wall clock - run's clock
        self._path = path
        self._file = path.open("w", encoding="utf-8")
        self._runs_path = path.with_name("windows.tsv")
        self._runs = self._runs_path.open("w", encoding="utf-8")
        self._firings_path = path.with_name("firings.tsv")
        self._firings = self._firings_path.open("w", encoding="utf-8")
        self.terms_begun = 0
        self.suspended: dict[int, list[float]] = defaultdict(list)
        self.states: dict[int, list[tuple[float, str]]] = defaultdict(list)
        self.store = FencedStore()
        self.cron_outcomes: Counter[str] = Counter()  # outcomes the cron workers wrote, by status
        self.stopped: float | None = None  # when the load stopped
        self.faults: list[Fault] = []
        self.counts: Counter[str] = Counter()  # expected conditions: CoordErrors and the like
        self.errors: Counter[str] = Counter()  # unexpected exceptions, by role and type
        self.tracebacks: list[str] = []  # the first KEPT_TRACEBACKS of them
        self.jobs = Jobs()
        self.open_jobs: dict[str, float] = {}
        # Per sampling interval: the sampler takes and clears them.
        self.job_latency: list[float] = []
        self.lock_latency: list[float] = []
        self.rtt: list[float] = []
        self.lag = 0.0

    def now(self) -> float:
        """Seconds since the run began, on the monotonic clock."""
        return time.monotonic() - self._t0

    @asynccontextmanager
    async def term(
        self, resource: str, holder: str, session: int, token: int
    ) -> AsyncIterator[None]:
        """Record the body inside as a term of `resource` held by `holder` with `token`."""
        await anyio.lowlevel.checkpoint()  # a term already lost never begins
        start = self.now()
        self.terms_begun += 1
        try:
            yield
        finally:
            end = self.now()
            self._file.write(f"{resource}\t{holder}\t{session}\t{token}\t{start!r}\t{end!r}\n")

    def terms(self) -> list[Term]:
        """Every term recorded so far (read back from the file)."""
        self._file.flush()
        out = []
        with self._path.open(encoding="utf-8") as f:
            for line in f:
                resource, holder, session, token, start, end = line.rstrip("\n").split("\t")
                out.append(
                    Term(resource, holder, int(session), int(token), float(start), float(end))
                )
        return out

    def window_run(self, resource: str, holder: str, window: float, ok: bool, start: float) -> None:
        """A `once_per` run of `window` (epoch seconds) that began at `start`; `ok`: recorded."""
        self._runs.write(f"{resource}\t{holder}\t{window!r}\t{int(ok)}\t{start!r}\n")

    def window_runs(self) -> list[WindowRun]:
        self._runs.flush()
        out = []
        with self._runs_path.open(encoding="utf-8") as f:
            for line in f:
                resource, holder, window, ok, start = line.rstrip("\n").split("\t")
                out.append(WindowRun(resource, holder, float(window), ok == "1", float(start)))
        return out

    def firing(self, job: str, holder: str, scheduled_wall: float) -> None:
        """A cron job's function began now, for the time `scheduled_wall` (epoch seconds)."""
        scheduled = scheduled_wall - self.wall0
        self._firings.write(f"{job}\t{holder}\t{scheduled!r}\t{self.now()!r}\n")

    def firings(self) -> list[Firing]:
        self._firings.flush()
        out = []
        with self._firings_path.open(encoding="utf-8") as f:
            for line in f:
                job, holder, scheduled, at = line.rstrip("\n").split("\t")
                out.append(Firing(job, holder, float(scheduled), float(at)))
        return out

    def save_states(self) -> None:
        """Write every session's connection states next to the terms (session, time, state)."""
        with self._path.with_name("states.tsv").open("w", encoding="utf-8") as f:
            for session, events in sorted(self.states.items()):
                for at, state in events:
                    f.write(f"{session}\t{at!r}\t{state}\n")

    def close(self) -> None:
        self._file.close()
        self._runs.close()
        self._firings.close()

    def error(self, role: str, exc: BaseException) -> None:
        """An exception that is not a `CoordError`: a defect."""
        self.errors[f"{role}: {type(exc).__name__}"] += 1
        if len(self.tracebacks) < KEPT_TRACEBACKS:
            tb = "".join(traceback.format_exception(exc))
            self.tracebacks.append(f"{role}: {exc!r}\n{tb}")


class LogCounter(logging.Handler):
    """Counts the library's WARNING and ERROR records by logger and message, keeps a few errors.

    While installed (``with LogCounter() as log:``) the ``aiocoord`` logger
    stops propagating, so hundreds of expected warnings under faults (a latch
    waiting while SUSPENDED) do not flood the soak's table.
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[tuple[str, str, str]] = Counter()
        self.first_errors: list[str] = []
        self._logger = logging.getLogger("aiocoord")
        self._saved = (self._logger.propagate, self._logger.level)

    def emit(self, record: logging.LogRecord) -> None:
        self.counts[(record.levelname, record.name, str(record.msg))] += 1
        if record.levelno >= logging.ERROR and len(self.first_errors) < KEPT_TRACEBACKS:
            self.first_errors.append(f"{record.name}: {self.format(record)}")

    def __enter__(self) -> LogCounter:
        self._logger.addHandler(self)
        self._logger.propagate = False
        if self._logger.level == logging.NOTSET or self._logger.level > logging.WARNING:
            self._logger.setLevel(logging.WARNING)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate, level = self._saved
        self._logger.setLevel(level)


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _server_figures(host: str, port: int) -> tuple[int | None, int | None]:
    """Total watches (``wchs``) and node count (``mntr``), None where the server did not answer."""
    watches = znodes = None
    try:
        found = re.search(r"Total watches:\s*(\d+)", four_letter_word(host, port, "wchs"))
        watches = int(found.group(1)) if found else None
        found = re.search(r"zk_znode_count\s+(\d+)", four_letter_word(host, port, "mntr"))
        znodes = int(found.group(1)) if found else None
    except OSError:
        pass
    return watches, znodes


def _client_watches(coords: Sequence[aiocoord.Coordinator]) -> int:
    """Live watches the coordinators hold, counted as the server does: one per (kind, path)."""
    return sum(
        len(paths) for c in coords for paths in c.client._session.watches.snapshot().values()
    )


async def take_sample(
    rec: Recorder, coords: Sequence[aiocoord.Coordinator], server: tuple[str, int]
) -> Sample:
    """Measure this process and the server now; take the interval's latencies and lag."""
    watches, znodes = await anyio.to_thread.run_sync(_server_figures, *server)

    def ms(values: list[float]) -> tuple[float, float] | None:
        pair = percentiles(values)
        values.clear()
        return None if pair is None else (pair[0] * 1e3, pair[1] * 1e3)

    sample = Sample(
        t=rec.now(),
        rss_kib=_rss_kib(),
        blocks=sys.getallocatedblocks(),
        fds=len(os.listdir("/proc/self/fd")),
        tasks=len(asyncio.all_tasks()),
        client_watches=_client_watches(coords),
        server_watches=watches,
        znodes=znodes,
        terms=rec.terms_begun,
        jobs_done=rec.jobs.done + rec.jobs.failed,
        jobs_open=len(rec.open_jobs),
        faults=len(rec.faults),
        job_ms=ms(rec.job_latency),
        lock_ms=ms(rec.lock_latency),
        rtt_ms=ms(rec.rtt),
        lag_ms=rec.lag * 1e3,
        load=os.getloadavg()[0],
    )
    rec.lag = 0.0
    return sample
