"""Tests for the port of Maven's ``ComparableVersion`` (Maven 3.9.x ordering).

Most cases come from Maven's own ``ComparableVersionTest``; the "quirk"
cases pin results of Maven 3.9.x that look surprising but that Java services
sharing our ZooKeeper tree rely on, so the port must reproduce them.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from aiocoord.errors import ConfigError
from aiocoord.recipes.task_leadership._versions import MavenVersion, maven_version_key

# Ascending order, from ComparableVersionTest.VERSIONS_QUALIFIER.
VERSIONS_QUALIFIER = (
    "1-alpha2snapshot",
    "1-alpha2",
    "1-alpha-123",
    "1-beta-2",
    "1-beta123",
    "1-m2",
    "1-m11",
    "1-rc",
    "1-cr2",
    "1-rc123",
    "1-SNAPSHOT",
    "1",
    "1-sp",
    "1-sp2",
    "1-sp123",
    "1-abc",
    "1-def",
    "1-pom-1",
    "1-1-snapshot",
    "1-1",
    "1-2",
    "1-123",
)

# Ascending order, from ComparableVersionTest.VERSIONS_NUMBER.
VERSIONS_NUMBER = (
    "2.0",
    "2.0.a",
    "2-1",
    "2.0.2",
    "2.0.123",
    "2.1.0",
    "2.1-a",
    "2.1b",
    "2.1-c",
    "2.1-1",
    "2.1.0.1",
    "2.2",
    "2.123",
    "11.a2",
    "11.a11",
    "11.b2",
    "11.b11",
    "11.m2",
    "11.m11",
    "11",
    "11.a",
    "11b",
    "11c",
    "11m",
)

_MNG_7644_QUALIFIERS = ("abc", "alpha", "a", "beta", "b", "def", "milestone", "m", "RC")

# ComparableVersionTest.testVersionsEqual, then the MNG-7644 equalities.
EQUAL = (
    ("1", "1"),
    ("1", "1.0"),
    ("1", "1.0.0"),
    ("1.0", "1.0.0"),
    ("1", "1-0"),
    ("1", "1.0-0"),
    ("1.0", "1.0-0"),
    # no separator between number and character
    ("1a", "1-a"),
    ("1a", "1.0-a"),
    ("1a", "1.0.0-a"),
    ("1.0a", "1-a"),
    ("1.0.0a", "1-a"),
    ("1x", "1-x"),
    ("1x", "1.0-x"),
    ("1x", "1.0.0-x"),
    ("1.0x", "1-x"),
    ("1.0.0x", "1-x"),
    # aliases
    ("1ga", "1"),
    ("1release", "1"),
    ("1final", "1"),
    ("1cr", "1rc"),
    ("1-ga", "1"),
    ("1.final", "1"),
    # a, b and m mean alpha, beta and milestone when a digit follows
    ("1a1", "1-alpha-1"),
    ("1-alpha1", "1-a1"),
    ("1b2", "1-beta-2"),
    ("1m3", "1-milestone-3"),
    # case insensitive
    ("1X", "1x"),
    ("1A", "1a"),
    ("1B", "1b"),
    ("1M", "1m"),
    ("1Ga", "1"),
    ("1GA", "1"),
    ("1RELEASE", "1"),
    ("1RELeaSE", "1"),
    ("1Final", "1"),
    ("1FinaL", "1"),
    ("1FINAL", "1"),
    ("1Cr", "1Rc"),
    ("1cR", "1rC"),
    ("1m3", "1Milestone3"),
    ("1m3", "1MileStone3"),
    ("1m3", "1MILESTONE3"),
    # testLocaleIndependent: lower-casing ignores the locale (no Turkish dotless i)
    ("1-abcdefghijklmnopqrstuvwxyz", "1-ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    # MNG-7644: 2.0.X == 2-X == 2.0.0.X for any string X
    *((f"2-{x}", f"2.0.{x}") for x in _MNG_7644_QUALIFIERS),
    *((f"2-{x}", f"2.0.0.{x}") for x in _MNG_7644_QUALIFIERS),
    *((f"2.0.{x}", f"2.0.0.{x}") for x in _MNG_7644_QUALIFIERS),
)

# (lower, higher): ComparableVersionTest.testVersionComparing and the MNG cases.
ORDERED = (
    ("1", "2"),
    ("1.5", "2"),
    ("1", "2.5"),
    ("1.0", "1.1"),
    ("1.1", "1.2"),
    ("1.0.0", "1.1"),
    ("1.0.1", "1.1"),
    ("1.1", "1.2.0"),
    ("1.0-alpha-1", "1.0"),
    ("1.0-alpha-1", "1.0-alpha-2"),
    ("1.0-alpha-1", "1.0-beta-1"),
    ("1.0-beta-1", "1.0-SNAPSHOT"),
    ("1.0-SNAPSHOT", "1.0"),
    ("1.0-alpha-1-SNAPSHOT", "1.0-alpha-1"),
    ("1.0", "1.0-1"),
    ("1.0-1", "1.0-2"),
    ("1.0.0", "1.0-1"),
    ("2.0-1", "2.0.1"),
    ("2.0.1-klm", "2.0.1-lmn"),
    ("2.0.1", "2.0.1-xyz"),
    ("2.0.1", "2.0.1-123"),
    ("2.0.1-xyz", "2.0.1-123"),
    # MNG-5568: transitivity with a letter in the middle
    ("6.1.0rc3", "6.1.0"),
    ("6.1.0rc3", "6.1H.5-beta"),
    ("6.1.0", "6.1H.5-beta"),
    # MNG-6572: int, long and BigInteger sized numbers
    ("20190126.230843", "1234567890.12345"),
    ("1234567890.12345", "123456789012345.1H.5-beta"),
    ("20190126.230843", "123456789012345.1H.5-beta"),
    ("123456789012345.1H.5-beta", "12345678901234567890.1H.5-beta"),
    ("1234567890.12345", "12345678901234567890.1H.5-beta"),
    ("20190126.230843", "12345678901234567890.1H.5-beta"),
    # MNG-6964: a sub-list is compared with "nothing" item by item
    ("1-0.alpha", "1"),
    ("1-0.beta", "1"),
    ("1-0.alpha", "1-0.beta"),
    # MNG-7644: 1.0.0.X1 < 1.0.0-X2 for any string X
    *((f"1.0.0.{x}1", f"1.0.0-{x}2") for x in _MNG_7644_QUALIFIERS),
    # the class javadoc: 1.0.RC2 < 1.0-RC3 < 1.0.1
    ("1.0.RC2", "1.0-RC3"),
    ("1.0-RC3", "1.0.1"),
)

# (lower, higher) results of Maven 3.9.x that look wrong but are what Java does.
QUIRKS = (
    # A lone a, b or m is an unknown qualifier, ranked after the release.
    ("1", "1-a"),
    ("1-a1", "1"),
    ("1-a", "1-b"),
    ("1-sp", "1-foo"),
    # Ten or more '0's stay a Java long, which outranks every int.
    ("1.5.1", "1.0000000000.1"),
    # Different structures that share a canonical form.
    ("1-ga-1", "1-1"),
    ("ga.1", "1"),
    ("-1", "1"),
    ("1-alpha", "1-0.alpha"),
    # Java orders qualifiers by UTF-16 unit: a surrogate pair sorts before U+E000.
    ("1-\U0001f600", "1-\ue000"),
    # A digit outside the BMP is two UTF-16 units to Java, hence a qualifier.
    ("1.\U0001d7cf", "1.1"),
)

QUIRK_EQUAL = (
    ("1.x", "1-x"),
    ("1.x2", "1-x2"),
    ("1.\u0661", "1.1"),  # ARABIC-INDIC DIGIT ONE is a digit to Java too
    ("1.0.0-RELEASE", "1"),
)

# Maven 3.9.x getCanonical() results.
CANONICAL = (
    ("1.0-alpha", "1-alpha"),
    ("1.0.0.CR1", "1-rc-1"),
    ("1-alpha2snapshot", "1-alpha-2-snapshot"),
    ("1-1-snapshot", "1-1-snapshot"),
    ("1.0-SNAPSHOT", "1-snapshot"),
    ("1.0.0", "1"),
    ("2.0.a", "2-a"),
    ("2.1b", "2.1-b"),
    ("11.a2", "11-alpha-2"),
    ("1.2-M1", "1.2-milestone-1"),
    ("1-sp2", "1-sp-2"),
    ("1.2.3.Final", "1.2.3"),
    ("6.1H.5-beta", "6.1-h.5-beta"),
    ("1..2", "1.0.2"),
    (".1", "0.1"),
    ("1.-1", "1-1"),
    ("0000000000001", "1"),
    ("31.1-jre", "31.1-jre"),
    ("2.17.0.redhat-00001", "2.17.0.redhat-1"),
    ("1-0.alpha", "1-alpha"),
    ("1-ga-1", "1-1"),
    ("ga.1", "1"),
    ("1.0000000000.1", "1.0.1"),
)

# Versions of 1 to 19 characters, from testVersionEqualWithLeadingZeroes and
# testVersionZeroEqualWithLeadingZeroes.
LEADING_ZEROES = tuple("0" * n + "1" for n in range(19))
ALL_ZEROES = tuple("0" * n for n in range(1, 20))


def parse(version: str) -> MavenVersion:
    """Parse like Maven's test helper: the canonical form must parse to itself."""
    parsed = MavenVersion(version)
    if parsed.canonical:  # all-zero versions have an empty canonical form
        assert MavenVersion(parsed.canonical).canonical == parsed.canonical
    return parsed


def assert_ordered(low: str, high: str) -> None:
    lower, higher = parse(low), parse(high)
    assert lower < higher
    assert lower <= higher
    assert higher > lower
    assert higher >= lower
    assert lower != higher


def assert_same(left: str, right: str) -> None:
    first, second = parse(left), parse(right)
    assert first == second
    assert second == first
    assert not first < second
    assert not second < first
    assert first <= second
    assert first >= second
    assert hash(first) == hash(second)


def ascending_pairs(versions: tuple[str, ...]) -> list[Any]:
    return [pytest.param(lo, hi, id=f"{lo}<{hi}") for lo, hi in itertools.combinations(versions, 2)]


@pytest.mark.parametrize(("low", "high"), ascending_pairs(VERSIONS_QUALIFIER))
def test_qualifier_order(low: str, high: str) -> None:
    assert_ordered(low, high)


@pytest.mark.parametrize(("low", "high"), ascending_pairs(VERSIONS_NUMBER))
def test_number_order(low: str, high: str) -> None:
    assert_ordered(low, high)


@pytest.mark.parametrize(("low", "high"), [*ORDERED, *QUIRKS])
def test_order(low: str, high: str) -> None:
    assert_ordered(low, high)


@pytest.mark.parametrize(("left", "right"), [*EQUAL, *QUIRK_EQUAL])
def test_equal(left: str, right: str) -> None:
    assert_same(left, right)


@pytest.mark.parametrize("versions", [LEADING_ZEROES, ALL_ZEROES], ids=["one", "zero"])
def test_leading_zeroes_do_not_matter(versions: tuple[str, ...]) -> None:
    for left, right in itertools.combinations_with_replacement(versions, 2):
        assert_same(left, right)


@pytest.mark.parametrize(("version", "canonical"), CANONICAL)
def test_canonical(version: str, canonical: str) -> None:
    assert parse(version).canonical == canonical


def test_shared_canonical_does_not_mean_equal() -> None:
    assert MavenVersion("1-ga-1").canonical == MavenVersion("1-1").canonical
    assert MavenVersion("1-ga-1") != MavenVersion("1-1")


def test_sorted_with_key_reproduces_maven_order() -> None:
    for expected in (VERSIONS_QUALIFIER, VERSIONS_NUMBER):
        shuffled = list(expected)
        random.Random(7).shuffle(shuffled)
        assert sorted(shuffled, key=maven_version_key) == list(expected)


@pytest.mark.parametrize(
    "cycle",
    [("1", "1-a", "1-0.rc"), ("1.0.0", "1-sp", "1-0.rc"), ("1-sp", "1-0.rc", "1-ga")],
)
def test_order_has_cycles_like_maven(cycle: tuple[str, str, str]) -> None:
    """Maven 3.9.x ranks each of these below the next and the last below the first."""
    first, second, third = map(MavenVersion, cycle)
    assert first < second
    assert second < third
    assert third < first


def test_comparisons_are_antisymmetric_and_agree_with_hash() -> None:
    rng = random.Random(2024)
    pieces = ("0", "1", "2", "10", "0000000000", "a", "b", "m", "x", "rc", "ga", "sp", "SNAPSHOT")
    texts = {
        "".join(rng.choice(pieces) + rng.choice((".", "-", "")) for _ in range(rng.randint(1, 5)))
        for _ in range(100)
    }
    versions = [MavenVersion(text) for text in texts]
    for left, right in itertools.product(versions, repeat=2):
        assert (left < right) == (right > left)
        assert (left <= right) == (right >= left)
        assert (left == right) == (not left < right and not right < left)
        if left == right:
            assert hash(left) == hash(right)
            assert left.canonical == right.canonical


def test_equal_versions_collapse_in_a_set() -> None:
    assert len({MavenVersion(text) for text in ("1", "1.0", "1-0", "1-ga", "1.final")}) == 1


def test_str_and_repr() -> None:
    version = maven_version_key("1.0.0.CR1")
    assert isinstance(version, MavenVersion)
    assert str(version) == "1.0.0.CR1"
    assert repr(version) == "<MavenVersion '1.0.0.CR1' canonical='1-rc-1'>"


def test_other_types_do_not_compare() -> None:
    version = MavenVersion("1")
    assert version != "1"
    with pytest.raises(TypeError):
        _ = version < "2"


def test_deep_nesting_needs_no_recursion() -> None:
    low = MavenVersion("1-" * 5000 + "1")
    high = MavenVersion("1-" * 5000 + "2")
    assert low < high
    assert low.canonical.startswith("1-1-1")


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, "must be a str, not NoneType"),
        (1.0, "must be a str, not float"),
        (b"1.0", "must be a str, not bytes"),
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("1.0 ", "whitespace or a control character"),
        ("1.0\n", "whitespace or a control character"),
        ("1\u00a00", "whitespace or a control character"),
        ("1.0\x00", "whitespace or a control character"),
        ("1.0\x7f", "whitespace or a control character"),
        ("1.0\u200b", "whitespace or a control character"),
        ("1.0\ud800", "whitespace or a control character"),
    ],
)
def test_bad_input(version: Any, message: str) -> None:
    with pytest.raises(ValueError, match=r"^version: .*" + message) as caught:
        maven_version_key(version)
    assert isinstance(caught.value, ConfigError)
    assert caught.value.field == "version"
