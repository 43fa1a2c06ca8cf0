"""`maven_version_key` against the real Java `ComparableVersion`, and the choice rule in Java too.

Java services that share the ZooKeeper tree order versions with Maven's
`ComparableVersion`; version-aware task leadership must agree with them.  A
small Java program (tests/interop/maven/VersionOrder.java) is compiled at test
time against Maven's own ``maven-artifact`` jar and asked to compare a few
thousand version pairs and to pick the preferred versions of a few hundred
sets (the rule of ``aiocoord/recipes/task_leadership/_choice.py``, cycles included).
Skips, saying why, only where Java, javac or the jar is missing (Debian:
``apt-get install default-jdk-headless maven``).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from aiocoord.recipes.task_leadership._choice import java_text_order, preferred_versions
from aiocoord.recipes.task_leadership._versions import maven_version_key

HERE = Path(__file__).resolve().parents[1] / "interop" / "maven"
JAR_CANDIDATES = (
    Path("/usr/share/maven/lib/maven-artifact-3.x.jar"),
    Path("/usr/share/java/maven3-artifact.jar"),
    Path("/usr/share/java/maven-artifact.jar"),
)

# Versions that exercise every rule: qualifiers and their aliases, separators,
# trailing zeros, Java's int/long/BigInteger widths, case, and the cycle.
CORPUS = (
    "1", "1.0", "1.0.0", "1-0", "1.0-0", "1-ga", "1.final", "1-release", "1GA",
    "1-alpha", "1-alpha-1", "1-alpha1", "1a1", "1-a", "1-b", "1-m", "1-beta-2",
    "1-m3", "1-milestone-3", "1-rc", "1-RC1", "1-cr2", "1-SNAPSHOT", "1-snapshot",
    "1-sp", "1-sp1", "1-abc", "1-xyz", "1-1", "1-1-snapshot", "1-2", "1.1",
    "1.0.1", "1.0-1", "1.0.0.1", "1-0.rc", "1-0.alpha", "1-0.beta", "1.0.RC2",
    "1.0-RC3", "2", "2.0", "2.0.rc", "2-rc", "2.0.0.rc", "2.0-alpha", "2.0.a1",
    "2.0.0.X1", "2.0.0-X2", "2.1-a", "2.1b", "2.1-c", "2.1-1", "2.10", "2.9",
    "10", "10-a", "10-0.rc", "9", "11.a2", "11m", "11.b11",
    "6.1.0rc3", "6.1.0", "6.1H.5-beta", "20190126.230843", "1234567890.12345",
    "123456789012345.1H.5-beta", "12345678901234567890.1H.5-beta",
    "1.0000000000.1", "1.5.1", "007", "7", "0.9", "0.9-SNAPSHOT", "ga.1",
    "-1", "1-ga-1", "1..1", "1--1", "1.", "1-", "v1", "release", "x",
)  # fmt: skip

_WORDS: tuple[str, ...] = (
    "alpha",
    "beta",
    "milestone",
    "rc",
    "cr",
    "snapshot",
    "SNAPSHOT",
    "ga",
    "final",
)
_WORDS += ("release", "sp", "a", "b", "m", "RC", "foo", "abc", "pom", "Final", "x")
_NUMBERS: tuple[str, ...] = (
    "0",
    "00",
    "1",
    "2",
    "3",
    "9",
    "10",
    "11",
    "007",
    "2147483647",
    "2147483648",
)
_NUMBERS += ("9999999999", "1234567890123456789", "12345678901234567890123")


def _random_version(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(1, 5)):
        kind = rng.random()
        if kind < 0.55:
            part = rng.choice(_NUMBERS)
        elif kind < 0.85:
            part = rng.choice(_WORDS)
        else:
            part = rng.choice(_WORDS) + rng.choice(_NUMBERS[:6])
        if parts:
            parts.append(rng.choice(".-" if rng.random() < 0.9 else ("", "..")))
        parts.append(part)
    return "".join(parts)


def _versions() -> list[str]:
    rng = random.Random(20240607)
    generated = {_random_version(rng) for _ in range(400)}
    return sorted(set(CORPUS) | generated, key=java_text_order)


def _find_jar() -> Path | None:
    override = os.environ.get("AIOCOORD_MAVEN_ARTIFACT_JAR")
    candidates = (Path(override),) if override else JAR_CANDIDATES
    return next((p for p in candidates if p.is_file()), None)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The command that runs VersionOrder (compiled here), or a skip saying what is missing."""
    javac, java_bin, jar = shutil.which("javac"), shutil.which("java"), _find_jar()
    if java_bin is None or javac is None:
        pytest.skip("java/javac not on PATH (apt-get install default-jdk-headless)")
    if jar is None:
        override = os.environ.get("AIOCOORD_MAVEN_ARTIFACT_JAR")
        places = [override] if override else [str(p) for p in JAR_CANDIDATES]
        pytest.skip(
            f"Maven's maven-artifact jar not found at {', '.join(places)} "
            "(apt-get install maven, or set AIOCOORD_MAVEN_ARTIFACT_JAR)"
        )
    out = tmp_path_factory.mktemp("maven-interop")
    subprocess.run(
        [javac, "-d", str(out), "-cp", str(jar), str(HERE / "VersionOrder.java")],
        check=True,
        timeout=120,
        capture_output=True,
    )
    return [java_bin, "-cp", os.pathsep.join((str(jar), str(out))), "VersionOrder"]


def _ask(java: list[str], commands: list[list[str]]) -> list[str]:
    text = "".join("\t".join(c) + "\n" for c in commands)
    done = subprocess.run(
        java, input=text.encode("utf-8"), capture_output=True, check=True, timeout=120
    )
    answers = done.stdout.decode("utf-8").split("\n")[:-1]
    assert len(answers) == len(commands), done.stderr.decode("utf-8", "replace")
    return answers


def _sign(a: str, b: str) -> int:
    ka, kb = maven_version_key(a), maven_version_key(b)
    return (ka > kb) - (ka < kb)


def test_pairwise_order_agrees_with_java(java: list[str]) -> None:
    versions = _versions()
    rng = random.Random(7)
    pairs = list(itertools.combinations(CORPUS, 2))
    pairs += [(rng.choice(versions), rng.choice(versions)) for _ in range(3000)]
    answers = _ask(java, [["cmp", a, b] for a, b in pairs])
    wrong = [
        (a, b, f"python {_sign(a, b)} java {answer}")
        for (a, b), answer in zip(pairs, answers, strict=True)
        if _sign(a, b) != int(answer)
    ]
    assert len(pairs) > 3000
    assert wrong == []


def test_preferred_versions_agree_with_java_including_cycles(java: list[str]) -> None:
    versions = _versions()
    rng = random.Random(11)
    cycle = ["1", "1-a", "1-0.rc"]
    sets = [list(p) for p in itertools.permutations(cycle)]
    sets += [[*cycle, "0.9"], [*cycle, "2"], ["9", "10", "10-a", "10-0.rc"], ["1", "1.0", "1-ga"]]
    sets += [rng.sample(versions, rng.randint(2, 6)) for _ in range(300)]
    sets += [rng.sample(versions, 3) + cycle for _ in range(50)]
    commands = [[prefer, *s] for s in sets for prefer in ("newest", "oldest")]
    answers = _ask(java, commands)
    cyclic = 0
    wrong = []
    for (prefer, *texts), answer in zip(commands, answers, strict=True):
        got = preferred_versions(texts, prefer=prefer, version_key=maven_version_key)  # type: ignore[arg-type]
        cyclic += got.cyclic
        mine = "\t".join(sorted(got.versions, key=java_text_order))
        if mine != answer:
            wrong.append((prefer, texts, mine, answer))
    assert wrong == []
    assert cyclic >= 8  # the fallback was exercised, and Java agrees on it
