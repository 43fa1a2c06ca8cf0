"""Wall clocks that run ahead or behind, per process, with Debian's ``libfaketime``.

`faketime_env(offset)` is the environment that shifts a process's wall clock
(``time.time()``, CLOCK_REALTIME) by ``offset`` seconds and leaves its
monotonic clock alone (``FAKETIME_DONT_FAKE_MONOTONIC=1``): the logs of the
tier stay on the one shared monotonic clock, and asyncio's timers and the
CAS lock's own deadline (both monotonic) are untouched, as with a real host
whose wall clock is off.  Without that variable libfaketime fakes
CLOCK_MONOTONIC too: with ``FAKETIME=+5s`` Python's ``time.monotonic()``
returns the faked wall time (about 1.8e9), which would break the shared
clock.  `faketime_unavailable` says why a skew cannot be made here (for a
skip); `measured_offsets` reads each participant's offset back from its
``start`` event.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from ..chaos.records import Record

__all__ = ("LIBFAKETIME", "faketime_env", "faketime_unavailable", "measured_offsets")

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
_PROBE = "import time; print(time.time() - time.monotonic())"


def faketime_env(offset: float) -> dict[str, str]:
    """The environment that runs a process with its wall clock ``offset`` s ahead (< 0: behind)."""
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME": f"{offset:+.3f}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }


@functools.cache
def faketime_unavailable() -> str | None:
    """Why `faketime_env` cannot skew a Python process's wall clock here, or None if it can."""
    if not LIBFAKETIME.exists():
        return f"{LIBFAKETIME} is missing (Debian package 'libfaketime')"

    def offset(env: dict[str, str] | None) -> float:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return float(done.stdout)

    try:
        plain = offset(None)
        shifted = offset(faketime_env(5.0))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"python under libfaketime failed: {exc!r}"
    if abs(shifted - plain - 5.0) > 0.25:
        return f"libfaketime did not shift time.time() by 5 s here ({shifted - plain:+.3f} s)"
    return None


def measured_offsets(records: Iterable[Record]) -> dict[str, float]:
    """Each participant's wall clock minus this process's, from its ``start`` event (s)."""
    here = time.time() - time.monotonic()
    return {
        str(r["p"]): float(r["wall"]) - float(r["t"]) - here
        for r in records
        if r["k"] == "start" and "wall" in r
    }
