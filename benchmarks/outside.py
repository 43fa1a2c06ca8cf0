"""A process's memory sampled from outside it: RSS from ``/proc/<pid>/status`` every few seconds.

``python -m benchmarks.outside [--every 5] [--out FILE] [--run SECONDS] -- COMMAND...``
starts ``COMMAND`` (its output passes through), reads its ``VmRSS`` every
``--every`` seconds until it exits, and prints the trend of the samples
after the first quarter of the run (Theil-Sen's, the soak's own
`soak_verdict.growth`) as a fraction of its level there, with the load
average seen.  ``--run`` (default: the whole run) limits the trend to the
first ``SECONDS`` (a soak's timed phase, before its drain and report).
``--out FILE`` also writes every sample (``t_s rss_kib load1``).  Exits with
the command's exit code.

What the soak measures of itself (``/proc/self/status`` from inside its own
event loop) stops when the loop stalls, and the process's own allocations
for its report come after it; a sampler outside sees what the kernel sees::

    python -m benchmarks.outside --run 900 -- python -m benchmarks.soak --seconds 900

Blocks while the command runs; Ctrl-C stops the command (SIGINT) and still
prints what was sampled.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .soak_verdict import growth


def rss_kib(pid: int) -> int | None:
    """The resident set of `pid` in KiB, None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def summary(samples: list[tuple[float, int, float]], run: float | None) -> str:
    """One line: the RSS trend after the first quarter of `run` (or of all samples)."""
    if not samples:
        return "outside: no sample"
    span = run if run is not None else samples[-1][0]
    kept = [(t, float(r)) for t, r, _ in samples if span / 4 <= t <= span]
    loads = [load for *_, load in samples]
    trend = growth(kept) if len(kept) >= 2 else None
    if trend is None:
        return f"outside: {len(kept)} sample(s) after the first quarter: no trend"
    values = [r for _, r in kept]
    return (
        f"outside: RSS {values[0]:.0f} KiB at {kept[0][0]:.0f} s -> {values[-1]:.0f} KiB at "
        f"{kept[-1][0]:.0f} s (min {min(values):.0f}, max {max(values):.0f}); trend after the "
        f"first quarter {trend * 100:+.2f} % ({len(kept)} samples); load average "
        f"{min(loads):.2f}-{max(loads):.2f}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--run", type=float, help="judge the trend over the first SECONDS only")
    parser.add_argument("--out", type=Path, help="also write every sample to this file")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    if args.every <= 0:
        parser.error(f"--every must be > 0: {args.every}")
    if args.run is not None and args.run <= 0:
        parser.error(f"--run must be > 0: {args.run}")
    samples: list[tuple[float, int, float]] = []
    proc = subprocess.Popen(command)
    start = time.monotonic()
    try:
        while proc.poll() is None:
            rss = rss_kib(proc.pid)
            if rss is not None:
                samples.append((time.monotonic() - start, rss, os.getloadavg()[0]))
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(args.every)
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
    if args.out is not None:
        args.out.write_text("".join(f"{t:.1f} {r} {load:.2f}\n" for t, r, load in samples))
    print(summary(samples, args.run), flush=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
