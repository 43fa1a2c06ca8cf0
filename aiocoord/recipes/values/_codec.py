"""Curator's number encodings: `SharedCount`'s 4-byte and `DistributedAtomicLong`'s 8-byte ints.

Both are Java's big-endian two's complement (``ByteBuffer.putInt`` /
``putLong``).  Data of another length is not ours: `NodeDataError` naming
the node, except that an empty node reads as 0 for an atomic long, as in
Curator (a node made by ``create`` without data).
"""

from __future__ import annotations

from typing import Final

from ...errors import ConfigError, NodeDataError

__all__ = ("INT32", "INT64", "decode", "decode_text", "encode", "encode_text")

INT32: Final = 4
INT64: Final = 8


def encode(value: int, size: int, name: str = "value") -> bytes:
    """`value` as `size` big-endian bytes; `ConfigError` naming `name` if it does not fit."""
    bits = size * 8
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ConfigError(name, f"must fit in a signed {bits}-bit int, not {value}")
    return value.to_bytes(size, "big", signed=True)


def decode(data: bytes, size: int, path: str, *, empty_is_zero: bool = False) -> int:
    """The int in a node's data; `NodeDataError` naming `path` if it is not `size` bytes."""
    if empty_is_zero and not data:
        return 0
    if len(data) != size:
        raise NodeDataError(
            path, f"a {size}-byte big-endian int was expected, not {len(data)} bytes"
        )
    return int.from_bytes(data, "big", signed=True)


# --- kazoo's Counter ---------------------------------------------------------------------------


def encode_text(value: int) -> bytes:
    """`value` as kazoo's ``Counter`` writes it: ``repr(value)`` in ASCII (no size limit)."""
    return repr(value).encode("ascii")


def decode_text(data: bytes, path: str, *, empty: int) -> int:
    """The int in a kazoo ``Counter``'s node, read as kazoo reads it (``int(data.decode("ascii"))``);
    `empty` for a node without data (kazoo's ``default``); `NodeDataError` naming `path` if
    it is not an int."""
    if not data:
        return empty
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        shown = data[:40].decode("ascii", "replace")
        raise NodeDataError(
            path, f"an int written as ASCII text was expected, not {shown!r}"
        ) from None
