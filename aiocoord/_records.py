"""The one strict codec of recipe node data: bytes to typed records and back.

A recipe's nodes are shared with other writers (earlier versions, Java
services, an operator with zkCli), so their bytes are untrusted input.  `load`
accepts only UTF-8 JSON inside fixed bounds: at most `MAX_DATA` bytes, nested
at most `MAX_DEPTH` deep, integers of at most `MAX_INT_DIGITS` digits, finite
numbers (no ``NaN``/``Infinity`` literals, no ``1e400``) and strings without
lone surrogates.  Anything else is `NodeDataError(path, reason)`: no builtin
exception escapes a decoder, whatever the bytes.

`Record` reads one JSON object's fields through small typed readers (`TEXT`,
`FLAG`, `integer`, `number`, `TIMESTAMP`, `one_of`, `list_of`, `optional`),
so each recipe's decoder is a few lines and every refusal names the node and
the field.  `dump` is the matching encoder: compact JSON that `load` reads
back; a value `load` would refuse raises `RecordEncodeError` (a `ValueError`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final, TypeAlias, TypeVar, overload

from .errors import NodeDataError
from .zk.client import MAX_DATA

__all__ = (
    "check_format",
    "FLAG",
    "INT64",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "TEXT",
    "TIMESTAMP",
    "Invalid",
    "Reader",
    "Record",
    "RecordEncodeError",
    "dump",
    "integer",
    "list_of",
    "load",
    "load_record",
    "load_text",
    "number",
    "one_of",
    "optional",
    "show",
)

T = TypeVar("T")
D = TypeVar("D")

MAX_DEPTH: Final = 100
"""Deepest nesting of arrays and objects; far past any record, well inside the stack."""
MAX_INT_DIGITS: Final = 4000
"""Longest integer; inside Python's 4300-digit limit on int/str conversion."""
_INT_LIMIT: Final = 10**MAX_INT_DIGITS
# A day inside datetime's range (years 1 to 9999), so a local-time conversion fits too.
_TS_MIN: Final = -62135596800.0 + 86400
_TS_MAX: Final = 253402300799.0 - 86400

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP: Final = {"[": 1, "{": 1, "]": -1, "}": -1}
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # the only way a surrogate gets in
_SURROGATE = re.compile("[\ud800-\udfff]")


class Invalid(Exception):
    """Raised by a reader (or a check inside `load`): `reason` says what is wrong."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RecordEncodeError(ValueError):
    """A value cannot be written as a record `load` reads back (NaN, a lone surrogate, ...)."""


def show(value: object, width: int = 40) -> str:
    """A short repr of `value` for an error message (never a huge or unprintable text)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<a {value.bit_length()}-bit integer>"
    text = repr(value)
    return text if len(text) <= width else f"{text[: width - 3]}..."


# --- decoding --------------------------------------------------------------------------------


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise Invalid(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Invalid(f"the number {show(text)} is out of range")
    return value


def _parse_constant(text: str) -> Any:
    raise Invalid(f"{text} is not a JSON number")


_DECODER: Final = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)


def _check_depth(text: str) -> None:
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if brackets and max(accumulate(map(_STEP.__getitem__, brackets))) > MAX_DEPTH:
        raise Invalid(f"nested more than {MAX_DEPTH} deep")


def _check_strings(value: object) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                raise Invalid(f"a string holds a lone surrogate: {show(item)}")
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())


def _load(data: bytes, max_size: int) -> Any:
    if len(data) > max_size:
        raise Invalid(f"{len(data)} bytes, more than a record's {max_size}")
    try:
        text = str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    _check_depth(text)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise Invalid(f"not JSON ({exc})") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_strings(value)
    return value


def load(path: str, data: bytes, *, max_size: int = MAX_DATA) -> Any:
    """The JSON value in `data`, read from `path`; `NodeDataError` for anything else."""
    try:
        return _load(data, max_size)
    except Invalid as exc:
        raise NodeDataError(path, exc.reason) from None
    except (ValueError, RecursionError, OverflowError) as exc:  # a bound above should stop these
        raise NodeDataError(path, f"not a readable JSON record ({type(exc).__name__})") from exc


def load_record(path: str, data: bytes, *, max_size: int = MAX_DATA) -> Record:
    """The JSON object in `data` as a `Record`; `NodeDataError` for anything else."""
    value = load(path, data, max_size=max_size)
    if not isinstance(value, dict):
        raise NodeDataError(path, f"{_kind(value)}, not a record (a JSON object)")
    return Record(path, value)


def load_text(path: str, data: bytes, what: str, *, max_size: int = MAX_DATA) -> str:
    """`data` as UTF-8 text (a raw id, not JSON); `NodeDataError` naming `what` if it is not."""
    if len(data) > max_size:
        raise NodeDataError(path, f"{what} is {len(data)} bytes, more than {max_size}")
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as exc:
        raise NodeDataError(
            path, f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})"
        ) from exc


# --- typed readers ---------------------------------------------------------------------------

Reader: TypeAlias = Callable[[object], T]
"""Reads one JSON value as a `T`, or raises `Invalid` with a reason ("must be ...")."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, not {_kind(value)}")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"must be true or false, not {_kind(value)}")
    return value


TEXT: Final[Reader[str]] = _text
FLAG: Final[Reader[bool]] = _flag


def integer(lo: int, hi: int) -> Reader[int]:
    """An integer from `lo` to `hi` (a boolean is not one)."""

    def read(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"must be an integer, not {_kind(value)}")
        if not lo <= value <= hi:
            raise Invalid(f"must be an integer from {lo} to {hi}, not {show(value)}")
        return value

    return read


def number(lo: float, hi: float, what: str = "") -> Reader[float]:
    """A number (integer or not) from `lo` to `hi`, as a float; `what` names it in errors."""
    what = what or f"a number from {lo:g} to {hi:g}"

    def read(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise Invalid(f"must be {what}, not {_kind(value)}")
        if not lo <= value <= hi:  # exact for huge integers too: no float() before the check
            raise Invalid(f"must be {what}, not {show(value)}")
        return float(value)

    return read


INT64: Final = integer(-(2**63), 2**63 - 1)
TIMESTAMP: Final = number(_TS_MIN, _TS_MAX, "a Unix time between years 1 and 9999")
"""Seconds since the epoch that `datetime.fromtimestamp` converts, UTC or local."""


def one_of(*choices: str) -> Reader[str]:
    """One of the strings `choices`."""

    def read(value: object) -> str:
        if value not in choices or not isinstance(value, str):
            listed = ", ".join(repr(c) for c in choices)
            raise Invalid(f"must be one of {listed}, not {show(value)}")
        return value

    return read


def list_of(reader: Reader[T]) -> Reader[list[T]]:
    """An array whose items each `reader` reads."""

    def read(value: object) -> list[T]:
        if not isinstance(value, list):
            raise Invalid(f"must be an array, not {_kind(value)}")
        out = []
        for i, item in enumerate(value):
            try:
                out.append(reader(item))
            except Invalid as exc:
                raise Invalid(f"item {i} {exc.reason}") from None
        return out

    return read


def optional(reader: Reader[T]) -> Reader[T | None]:
    """Null, or what `reader` reads."""
    return lambda value: None if value is None else reader(value)


_MISSING: Final[Any] = object()


class Record:
    """One JSON object read from the node at `path`; its fields are read by type.

    Every refusal is `NodeDataError(path, "field 'x' ...")`; fields of a nested
    record are named with their parent's (``'last_run.at'``).  Fields that no
    reader asks for are ignored: newer writers may add some.
    """

    __slots__ = ("_fields", "_prefix", "path")

    def __init__(self, path: str, fields: dict[str, Any], prefix: str = "") -> None:
        self.path = path
        self._fields = fields
        self._prefix = prefix

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def error(self, reason: str) -> NodeDataError:
        """The error to raise for a check across fields."""
        return NodeDataError(self.path, reason)

    @overload
    def get(self, name: str, reader: Reader[T]) -> T: ...
    @overload
    def get(self, name: str, reader: Reader[T], default: D) -> T | D: ...
    def get(self, name: str, reader: Reader[Any], default: Any = _MISSING) -> Any:
        """Field `name` as `reader` reads it; if missing, `default` when given, else an error."""
        if name not in self._fields:
            if default is _MISSING:
                raise self.error(f"field {self._prefix + name!r} is missing")
            return default
        try:
            return reader(self._fields[name])
        except Invalid as exc:
            raise self.error(f"field {self._prefix + name!r} {exc.reason}") from None

    def maybe(self, name: str, reader: Reader[T]) -> T | None:
        """Field `name` as `reader` reads it, or None when it is missing or null."""
        return self.get(name, optional(reader), None)

    def value(self, name: str) -> Any:
        """Field `name` as it is (any JSON value, null included); an error if missing."""
        return self.get(name, lambda value: value)

    def record(self, name: str) -> Record:
        """Field `name`, a nested JSON object, as a `Record`."""
        return Record(self.path, self.get(name, _object), f"{self._prefix}{name}.")

    def maybe_record(self, name: str) -> Record | None:
        """Field `name` as a `Record`, or None when it is missing or null."""
        return None if self._fields.get(name) is None else self.record(name)


def _object(value: object) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Invalid(f"must be an object, not {_kind(value)}")
    return value


# --- encoding --------------------------------------------------------------------------------


def _check_value(value: object) -> None:
    """Refuse what `load` would refuse; circular containers end as too deep."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                raise RecordEncodeError(
                    f"{show(item)} holds a lone surrogate, which UTF-8 cannot encode"
                )
        elif isinstance(item, bool) or item is None:
            pass
        elif isinstance(item, int):
            if not -_INT_LIMIT < item < _INT_LIMIT:
                raise RecordEncodeError(f"{show(item)} has over {MAX_INT_DIGITS} digits")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise RecordEncodeError(f"{item!r} is not a JSON number")
        elif isinstance(item, list | tuple | dict):
            if depth >= MAX_DEPTH:
                raise RecordEncodeError(f"nested more than {MAX_DEPTH} deep")
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)


def dump(value: object, *, sort_keys: bool = False, ensure_ascii: bool = True) -> bytes:
    """Compact UTF-8 JSON for `value` that `load` reads back.

    `RecordEncodeError` (a `ValueError`) for NaN or infinity, a lone
    surrogate, an integer of over `MAX_INT_DIGITS` digits or nesting past
    `MAX_DEPTH`; `TypeError` for a value JSON has no form for.
    """
    _check_value(value)
    try:
        text = json.dumps(
            value,
            separators=(",", ":"),
            sort_keys=sort_keys,
            ensure_ascii=ensure_ascii,
            allow_nan=False,
        )
    except ValueError as exc:  # e.g. a NaN dict key
        raise RecordEncodeError(str(exc)) from exc
    return text.encode("utf-8")


_FORMAT_DIGITS = re.compile("[0-9]+")


def check_format(record: Record, kind: str, name: str, newest: int) -> None:
    """The record's ``format`` field is ``<name>/<version>`` with a version this aiocoord reads.

    `kind` names the record in the error (``"lock"``, ``"cron job"``).
    """
    if "format" not in record:
        raise record.error(f"not a {kind} record: no 'format' field")
    fmt = record.get("format", TEXT)
    prefix, _, version = fmt.partition("/")
    if prefix != name or not _FORMAT_DIGITS.fullmatch(version):
        raise record.error(f"foreign record format {show(fmt)}")
    digits = version.lstrip("0") or "0"
    if len(digits) > 9 or int(digits) > newest:
        raise record.error(
            f"record format {show(version)} is newer than this aiocoord reads ({newest})"
        )
