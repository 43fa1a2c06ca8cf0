"""The machine side of `NetworkLab`: can a lab run here, the tools it runs, leftovers.

Every call blocks the calling thread (it runs ``ip``, ``tc`` and ``nft``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys

__all__ = (
    "PREFIX",
    "NetworkLabUnavailableError",
    "kill_namespace",
    "namespaces",
    "netem_unavailable",
    "network_lab_unavailable",
    "remove_stale",
    "run",
)

logger = logging.getLogger(__name__)

PREFIX = "aiocoord-"  # every namespace a lab makes: aiocoord-PID-N-NAME
_NAME = re.compile(r"^aiocoord-(\d+)-(\d+)-")
_TOOL_TIMEOUT = 20.0


class NetworkLabUnavailableError(RuntimeError):
    """This machine cannot run a `NetworkLab`: ``reason`` says why (skip, do not fail)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def network_lab_unavailable() -> str | None:
    """Why a `NetworkLab` cannot run on this machine, or None if it can."""
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            return f"{tool!r} is not installed (Debian package {package!r}; ./scripts/setup)"
    probe = f"{PREFIX}{os.getpid()}-0-probe"
    try:
        run("ip", "netns", "add", probe)
    except NetworkLabUnavailableError as exc:
        return f"cannot create a network namespace: {exc.reason}"
    try:
        run("ip", "netns", "exec", probe, "nft", "add", "table", "bridge", "probe")
    except NetworkLabUnavailableError as exc:
        return f"nftables does not work in a network namespace: {exc.reason}"
    finally:
        with contextlib.suppress(NetworkLabUnavailableError):
            run("ip", "netns", "del", probe)
    return None


def netem_unavailable() -> str | None:
    """Why `NetworkLab.impair` cannot delay or reorder here (no netem in the kernel), or None."""
    reason = network_lab_unavailable()
    if reason is not None:
        return reason
    probe = f"{PREFIX}{os.getpid()}-0-netem"
    try:
        run("ip", "netns", "add", probe)
        run("ip", "-n", probe, "link", "set", "lo", "up")
        run("tc", "-n", probe, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
    except NetworkLabUnavailableError as exc:
        return f"tc netem does not work (kernel built without CONFIG_NET_SCH_NETEM?): {exc.reason}"
    finally:
        with contextlib.suppress(NetworkLabUnavailableError):
            run("ip", "netns", "del", probe)
    return None


def run(*argv: str, stdin: str | None = None) -> str:
    """Run one tool; its failure becomes `NetworkLabUnavailableError` with its stderr."""
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=_TOOL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkLabUnavailableError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        raise NetworkLabUnavailableError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def namespaces() -> list[str]:
    out = run("ip", "netns", "list")
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def kill_namespace(netns: str) -> None:
    """SIGKILL every process still in ``netns`` (all started by a lab), then delete it."""
    with contextlib.suppress(NetworkLabUnavailableError):
        for pid in run("ip", "netns", "pids", netns).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    with contextlib.suppress(NetworkLabUnavailableError):
        run("ip", "netns", "del", netns)


def remove_stale() -> None:
    """Delete the namespaces of labs whose process is gone (killed before it could clean up)."""
    for netns in namespaces():
        match = _NAME.match(netns)
        if match is None:
            continue
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            logger.info("removing %s, left by process %d", netns, pid)
            kill_namespace(netns)
        except PermissionError:
            pass
