"""Import weight: time and peak RSS of ``import aiocoord`` against ``import aiozk``.

Each import runs in a fresh interpreter (so nothing is cached in the process),
alternating between the packages so that both see the same machine load; the
medians over the runs are printed with their ratio.  Beside the plain import,
``connect`` shows the cost of what a program that connects loads (the session,
the ZooKeeper client and pydantic).  Needs no server.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

__all__ = ("CASES", "measure", "measure_all")

CASES = {
    "aiocoord": "import aiocoord",
    "aiocoord + connect": "import aiocoord; aiocoord.connect('localhost:2181')",
    "aiozk": "import aiozk",
    "python": "pass",
}
"""What each row imports, run as the body of a fresh ``python -c``."""

_PROBE = """\
import json, resource, sys, time
started = time.perf_counter()
{code}
ms = (time.perf_counter() - started) * 1000
rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps([ms, rss_kb, len(sys.modules)]))
"""


def measure(code: str) -> tuple[float, float, int]:
    """One fresh interpreter running `code`: (milliseconds, peak RSS in MB, modules loaded)."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(code=code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    ms, rss_kb, modules = json.loads(out.stdout.splitlines()[-1])
    return float(ms), rss_kb / 1024, int(modules)


def measure_all(runs: int) -> dict[str, tuple[float, float, int]]:
    """Medians over `runs` rounds, each round running every case once."""
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in CASES}
    for _ in range(runs):
        for name, code in CASES.items():
            samples[name].append(measure(code))
    return {
        name: (
            statistics.median(s[0] for s in rows),
            statistics.median(s[1] for s in rows),
            rows[-1][2],
        )
        for name, rows in samples.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    results = measure_all(args.runs)
    print(f"import weight, median of {args.runs} fresh interpreters")
    print(f"{'case':<20}{'import ms':>10}{'peak RSS MB':>13}{'modules':>9}")
    for name, (ms, rss, modules) in results.items():
        print(f"{name:<20}{ms:>10.1f}{rss:>13.1f}{modules:>9}")
    ours, peer = results["aiocoord"], results["aiozk"]
    print(
        f"aiocoord vs aiozk: import time {ours[0] / peer[0]:.2f}x, peak RSS {ours[1] / peer[1]:.2f}x"
    )


if __name__ == "__main__":
    main()
