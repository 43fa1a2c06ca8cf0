"""Maven version ordering: a port of ``org.apache.maven.artifact.versioning.ComparableVersion``.

Java services rank versions with Maven's `ComparableVersion` (Maven 3.9.x);
version-aware task leadership ranks them exactly the same way, quirks
included, so a Java service choosing versions by this rule agrees with it.  This module reproduces its
parsing, ordering, equality and canonical form:

- The text is lower-cased, then split on ``.`` and ``-`` and on every change
  between digits and non-digits.  An empty part counts as ``0``.
- ``-`` and each digit/letter change open a nested sub-list, so ``1-1`` is
  ``[1, [1]]``.  A qualifier that ends the version or runs into a digit is
  nested as if ``-`` preceded it, so ``2.0.rc`` equals ``2-rc`` (MNG-7644).
- Trailing "null" items (``0``, the release qualifier, an empty sub-list) are
  dropped from every list, also in front of a trailing sub-list, so
  ``1.0.0`` == ``1`` and ``1.0-alpha`` == ``1-alpha``.
- Qualifiers rank ``alpha < beta < milestone < rc < snapshot < "" < sp``, then
  every unknown qualifier in lexical order.  ``ga``, ``final`` and
  ``release`` mean ``""``, ``cr`` means ``rc``; ``a``, ``b`` and ``m`` mean
  alpha, beta and milestone only when a digit follows them.
- Items of different kinds compare by kind alone: a number beats a
  sub-list, which beats a qualifier.  Numbers keep Java's three widths
  (int, long, BigInteger, chosen by digit count after stripping ``0``s) and
  a wider kind beats a narrower one whatever the values.

Maven's order is not transitive for some unusual versions: ``1 < 1-a``
(unknown qualifier after the release) and ``1-a < 1-0.rc`` (qualifier below a
sub-list), yet ``1-0.rc < 1`` (rc before the release).  Sorting such a set
gives an order that depends on the input order, in Java as here, so callers
that must agree with Java should rank by pairwise comparison the way the
Java side does, not trust a sort of a cyclic set.

Where Java works on UTF-16 code units this port does too (digit tests and
qualifier order), so non-ASCII versions rank as they do in Java.  Parsing and
comparison are iterative, so a hostile version with thousands of nested parts
cannot exhaust the interpreter's recursion limit.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TypeVar

from aiocoord.errors import ConfigError

__all__ = ("MavenVersion", "maven_version_key")

# Java picks IntItem, LongItem or BigIntegerItem from the digit count after
# stripping leading '0's (MAX_INTITEM_LENGTH, MAX_LONGITEM_LENGTH).
_MAX_INT_DIGITS = 9
_MAX_LONG_DIGITS = 18
# Python refuses int() of longer digit strings (sys.int_info.default_max_str_digits).
_MAX_DIGITS = 4000
_INT, _LONG, _BIG = 0, 1, 2

_QUALIFIERS = ("alpha", "beta", "milestone", "rc", "snapshot", "", "sp")
_ALIASES = {"ga": "", "final": "", "release": "", "cr": "rc"}
_LETTER_BEFORE_DIGIT = {"a": "alpha", "b": "beta", "m": "milestone"}

# Unicode categories refused on top of whitespace: control characters,
# invisible format characters and lone surrogates (not encodable as UTF-8).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})


def _utf16(text: str) -> bytes:
    """Return a key that orders strings like Java's `String.compareTo` (by UTF-16 unit)."""
    return text.encode("utf-16-be")


def _qualifier_rank(qualifier: str) -> bytes:
    """Maven's `comparableQualifier`: known qualifiers by position, then unknown ones."""
    if qualifier in _QUALIFIERS:
        return _utf16(str(_QUALIFIERS.index(qualifier)))
    return _utf16(f"{len(_QUALIFIERS)}-{qualifier}")


_RELEASE_RANK = _qualifier_rank("")
_Comparable = TypeVar("_Comparable", int, bytes)


def _cmp(left: _Comparable, right: _Comparable) -> int:
    """Three-way comparison of two ints or two byte strings: -1, 0 or 1."""
    return (left > right) - (left < right)


@dataclass(frozen=True, slots=True)
class _Number:
    """A numeric part; `kind` is Java's width (`_INT`, `_LONG`, `_BIG`)."""

    kind: int
    value: int


@dataclass(frozen=True, slots=True)
class _Qualifier:
    """A non-numeric part after alias resolution; `rank` orders it."""

    value: str
    rank: bytes

    @classmethod
    def parse(cls, text: str, *, followed_by_digit: bool) -> _Qualifier:
        """Resolve aliases: ``a1`` is alpha-1, but a lone ``a`` is an unknown qualifier."""
        if followed_by_digit:
            text = _LETTER_BEFORE_DIGIT.get(text, text)
        value = _ALIASES.get(text, text)
        return cls(value, _qualifier_rank(value))


@dataclass(slots=True, eq=False)
class _List:
    """A list of parts, Maven's `ListItem`; `versus_null` is its comparison with nothing."""

    items: list[_Item] = field(default_factory=list)
    versus_null: int = 0

    def normalize(self) -> None:
        """Drop trailing null parts, looking through trailing sub-lists (Maven's `normalize`).

        Called on a sub-list before its parent, so a sub-list emptied here is
        itself null to its parent, and its `versus_null` is already known.
        """
        for index in range(len(self.items) - 1, -1, -1):
            item = self.items[index]
            if _is_null(item):
                del self.items[index]
            elif not isinstance(item, _List):
                break
        # Maven compares a whole list with "nothing" item by item (MNG-6964).
        self.versus_null = next(
            (result for item in self.items if (result := _versus_null(item))), 0
        )


_Item = _Number | _Qualifier | _List
_ZERO = _Number(_INT, 0)


def _is_null(item: _Item) -> bool:
    if isinstance(item, _Number):
        return item.value == 0
    if isinstance(item, _Qualifier):
        return item.rank == _RELEASE_RANK
    return not item.items


def _versus_null(item: _Item) -> int:
    """Compare `item` with a missing part: ``1.0 == 1``, ``1-rc < 1``, ``1-sp > 1``."""
    if isinstance(item, _Number):
        return 1 if item.value else 0
    if isinstance(item, _Qualifier):
        return _cmp(item.rank, _RELEASE_RANK)
    return item.versus_null


def _compare_leaf(left: _Item, right: _Item) -> int:
    """Compare two parts that are not both lists, following Maven's per-kind tables."""
    if isinstance(left, _Number):
        if not isinstance(right, _Number):
            return 1  # 1.1 > 1-sp and 1.1 > 1-1
        if left.kind != right.kind:
            return _cmp(left.kind, right.kind)  # wider Java type wins, whatever the value
        return _cmp(left.value, right.value)
    if isinstance(left, _Qualifier):
        if not isinstance(right, _Qualifier):
            return -1  # 1.any < 1.1 and 1.any < 1-1
        return _cmp(left.rank, right.rank)
    return -1 if isinstance(right, _Number) else 1  # 1-1 < 1.0.x, 1-1 > 1-sp


def _compare(left: _List, right: _List) -> int:
    """Maven's `ListItem.compareTo`, walking nested lists with an explicit stack."""
    stack: list[tuple[list[_Item], list[_Item], int]] = [(left.items, right.items, 0)]
    while stack:
        lefts, rights, index = stack.pop()
        if index >= len(lefts) and index >= len(rights):
            continue  # this level is equal; resume its parent
        stack.append((lefts, rights, index + 1))
        lhs = lefts[index] if index < len(lefts) else None
        rhs = rights[index] if index < len(rights) else None
        if isinstance(lhs, _List) and isinstance(rhs, _List):
            stack.append((lhs.items, rhs.items, 0))
            continue
        if lhs is None:
            assert rhs is not None  # both missing ended this level above
            result = -_versus_null(rhs)
        elif rhs is None:
            result = _versus_null(lhs)
        else:
            result = _compare_leaf(lhs, rhs)
        if result:
            return result
    return 0


def _is_java_digit(char: str) -> bool:
    # Java's Character.isDigit(char) sees one UTF-16 unit: category Nd in the BMP.
    return char.isdecimal() and char <= "\uffff"


def _parse_number(digits: str) -> _Number:
    # Java strips only ASCII '0's and keeps an all-zero run whole, so ten '0's
    # become a LongItem: null when trailing, but wider than any int elsewhere.
    stripped = digits.lstrip("0") or digits
    if len(stripped) > _MAX_DIGITS:
        raise ConfigError(
            "version", f"has a number of {len(stripped)} digits; at most {_MAX_DIGITS}"
        )
    if len(stripped) <= _MAX_INT_DIGITS:
        kind = _INT
    elif len(stripped) <= _MAX_LONG_DIGITS:
        kind = _LONG
    else:
        kind = _BIG
    return _Number(kind, int(stripped))


def _parse_item(is_digit: bool, text: str) -> _Item:
    if is_digit:
        return _parse_number(text)
    return _Qualifier.parse(text, followed_by_digit=False)


def _parse(version: str) -> _List:
    """Maven's `parseVersion`: build the nested item lists, then normalize them."""
    text = version.lower()
    root = _List()
    current = root
    lists = [root]

    def open_sublist(parent: _List) -> _List:
        sublist = _List()
        parent.items.append(sublist)
        lists.append(sublist)
        return sublist

    is_digit = False
    start = 0
    for index, char in enumerate(text):
        if char in ".-":
            current.items.append(
                _ZERO if index == start else _parse_item(is_digit, text[start:index])
            )
            start = index + 1
            if char == "-":
                current = open_sublist(current)
        elif _is_java_digit(char):
            if not is_digit and index > start:
                if current.items:
                    current = open_sublist(current)  # 1.0.0.X1 < 1.0.0-X2: treat .X as -X
                qualifier = text[start:index]
                current.items.append(_Qualifier.parse(qualifier, followed_by_digit=True))
                start = index
                current = open_sublist(current)
            is_digit = True
        else:
            if is_digit and index > start:
                current.items.append(_parse_number(text[start:index]))
                start = index
                current = open_sublist(current)
            is_digit = False
    if len(text) > start:
        if not is_digit and current.items:
            current = open_sublist(current)
        current.items.append(_parse_item(is_digit, text[start:]))
    # Sub-lists were created after their parents, so this normalizes children first.
    for sublist in reversed(lists):
        sublist.normalize()
    return root


def _render(root: _List) -> str:
    """Maven's `ListItem.toString`: ``-`` before a sub-list, ``.`` before anything else.

    Like Java, a separator is written only once the list's own text is
    non-empty, so a leading release qualifier swallows the next separator.
    """
    parts: list[str] = []
    length = 0
    frames: list[tuple[Iterator[_Item], int]] = [(iter(root.items), 0)]
    while frames:
        items, start = frames[-1]
        item = next(items, None)
        if item is None:
            frames.pop()
            continue
        if length > start:
            parts.append("-" if isinstance(item, _List) else ".")
            length += 1
        if isinstance(item, _List):
            frames.append((iter(item.items), length))
            continue
        text = str(item.value)
        parts.append(text)
        length += len(text)
    return "".join(parts)


def _validate(version: object) -> str:
    """Refuse what cannot serve as a version in a registry; Maven itself accepts anything."""
    if not isinstance(version, str):
        raise ConfigError("version", f"must be a str, not {type(version).__name__}")
    if not version or version.isspace():
        raise ConfigError("version", "must not be empty or only whitespace")
    for index, char in enumerate(version):
        if char.isspace() or unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise ConfigError(
                "version",
                f"{version!r} has whitespace or a control character ({char!r}) at index {index}",
            )
    return version


class MavenVersion:
    """A version parsed and ordered exactly like Maven's `ComparableVersion`.

    Instances are immutable and hashable, and compare with each other as
    Maven's `compareTo` does (not always transitively; see the module docs).
    Equality is Maven's `equals` (same parsed items, so ``1 == 1.0 == 1-ga``),
    which holds exactly when `compareTo` gives 0.  `str()` gives the original
    text, `canonical` Maven's `getCanonical()`.

    Raises `ConfigError` (a `ValueError`) if `version` is not a non-empty str
    free of whitespace and control characters.
    """

    __slots__ = ("_canonical", "_items", "_text")

    def __init__(self, version: str) -> None:
        self._text = _validate(version)
        self._items = _parse(version)
        self._canonical: str | None = None

    @property
    def canonical(self) -> str:
        """Maven's canonical form, e.g. ``1-rc-1`` for ``1.0.0.CR1``.

        Two different versions can share a canonical form (``1-ga-1`` and
        ``1-1`` both give ``1-1``), so compare versions, not canonical strings.
        """
        if self._canonical is None:
            self._canonical = _render(self._items)
        return self._canonical

    def _compare(self, other: MavenVersion) -> int:
        return _compare(self._items, other._items)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MavenVersion):
            return NotImplemented
        return self._compare(other) < 0

    def __le__(self, other: object) -> bool:
        if not isinstance(other, MavenVersion):
            return NotImplemented
        return self._compare(other) <= 0

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, MavenVersion):
            return NotImplemented
        return self._compare(other) > 0

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, MavenVersion):
            return NotImplemented
        return self._compare(other) >= 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MavenVersion):
            return NotImplemented
        return self._compare(other) == 0

    def __hash__(self) -> int:
        # Equal versions have equal items, hence equal canonical forms.
        return hash(self.canonical)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<MavenVersion {self._text!r} canonical={self.canonical!r}>"


def maven_version_key(version: str) -> MavenVersion:
    """Sort key ranking versions as Maven does: ``sorted(names, key=maven_version_key)``.

    Raises `ConfigError` (a `ValueError`) naming `version` if it is not a
    non-empty str free of whitespace and control characters.
    """
    return MavenVersion(version)
