"""The campaign's Java participants: Apache Curator 5.4 recipes, each in a JVM of its own.

`CuratorChaos.java` (next to this module) runs one recipe per JVM on the path
its Python counterparts use: a ``LeaderLatch`` on ``/latch`` (beside the
``latch`` role), a ``LeaderSelector`` with ``autoRequeue`` on ``/selector``
(beside ``selector``) and an ``InterProcessMutex`` on ``/mutex`` (beside
``mutex``).  Each connects through fault proxies of its own, as a Python
participant does, and writes the same records (`records`) on the same clock
(``System.nanoTime`` is CLOCK_MONOTONIC on Linux, as ``time.monotonic``), so
one checker judges both languages together: no two terms of a resource
overlap, whichever language held them, and tokens (node czxids) rise.

`prepare` compiles the program at campaign start with Debian's jars
(``libcurator-recipes-java``, ``zookeeper``); without ``javac`` or the jars it
returns the reason and the campaign runs without Java participants, saying
so.  `command` is a participant's command line: a light JVM (64 MB heap, C1
only, class-data sharing), for a machine of two cores.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..helpers import build_java, java_missing

__all__ = ("JARS", "JAVA_ROLES", "JVM_OPTIONS", "JavaBuild", "command", "prepare")

PROGRAM = "CuratorChaos"
SOURCES = Path(__file__).resolve().parent
JARS = [
    "curator-framework.jar",
    "curator-client.jar",
    "curator-recipes.jar",
    "guava.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
]
# The Python role each Java participant shares its path (and its resource) with.
JAVA_ROLES = ("latch", "selector", "mutex")
JVM_OPTIONS = ["-Xmx64m", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC"]


@dataclass(frozen=True, slots=True)
class JavaBuild:
    """The compiled program (`classpath`), or why there is none (`skipped`)."""

    classpath: str | None
    skipped: str | None = None


def prepare(out: Path) -> JavaBuild:
    """Compile the Java participant into `out`; a build without a class path says why not."""
    missing = java_missing(JARS)
    if missing is not None:
        return JavaBuild(None, f"Java participants skipped: {missing}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        return JavaBuild(build_java(PROGRAM, JARS, out, sources=SOURCES))
    except subprocess.CalledProcessError as exc:
        # Not a missing tool: a broken program is the campaign's failure, not a skip.
        raise RuntimeError(f"javac {PROGRAM}.java failed:\n{exc.stderr.decode()[-2000:]}") from exc


def command(
    classpath: str,
    *,
    role: str,
    name: str,
    inc: int,
    hosts: str,
    store: str,
    log: Path,
    session_timeout: float,
    seed: int,
    namespace: str,
) -> list[str]:
    """The command line of one Java participant (see the module docstring)."""
    if role not in JAVA_ROLES:
        raise ValueError(f"role must be one of {', '.join(JAVA_ROLES)}, not {role!r}")
    return [
        "java", *JVM_OPTIONS, "-cp", classpath, PROGRAM,
        "--role", role, "--name", name, "--inc", str(inc), "--hosts", hosts, "--store", store,
        "--log", str(log), "--session-timeout", str(session_timeout), "--seed", str(seed),
        "--namespace", namespace,
    ]  # fmt: skip
