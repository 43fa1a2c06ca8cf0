"""The JVM peers' plumbing: Debian's Curator jars, and compiling a small Java program once.

The Curator benchmarks (`mutex_peers`, `latch_curator`) each run a Java
program compiled with ``javac`` against the jars in ``/usr/share/java``
(packages ``libcurator-recipes-java`` and ``zookeeper``) the first time it is
needed in a process; they are skipped, with a note, when Java or a jar is
missing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

__all__ = ("JARS", "JAVA_DIR", "classpath", "curator_missing")

JAVA_DIR = Path("/usr/share/java")
JARS = (
    "curator-framework.jar",
    "curator-client.jar",
    "curator-recipes.jar",
    "guava.jar",
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
)


def curator_missing() -> str | None:
    """Why Curator cannot be measured here, or None if it can."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    missing = [jar for jar in JARS if not (JAVA_DIR / jar).exists()]
    if missing:
        return f"{', '.join(missing)} not in {JAVA_DIR} (libcurator-recipes-java, zookeeper)"
    return None


@cache
def classpath(class_name: str, source: str) -> str:
    """Compile the Java class `class_name` from `source` once per process; its class path."""
    out = Path(tempfile.mkdtemp(prefix=f"aiocoord-{class_name.lower()}-"))
    path = out / f"{class_name}.java"
    path.write_text(source)
    jars = ":".join(str(JAVA_DIR / jar) for jar in JARS)
    subprocess.run(
        ["javac", "-d", str(out), "-cp", jars, str(path)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return f"{jars}:{out}"
