"""kazoo 2.x's lock layout for the queue: its node names, its order and its reader rule.

Pure, beside `CuratorNames`; tests/unit/test_queue_kazoo.py tests it directly.

kazoo's ``Lock`` (``kazoo/recipe/lock.py``) names its node
``<uuid4 hex><marker><seq>`` (``__lock__``; a ``ReadLock``'s ``__rlock__``)
and finds it again after a connection loss by the ``<uuid4 hex><marker>``
prefix.  A contender is a child whose name ends in one of the lock's
markers and a sequence number (``_contenders_re``: ``(?:m1|m2)(-?\\d{10})$``);
every other child is not in the queue at all (a Curator node, ``__rlock__``
for a plain ``Lock``).  Contenders sort by that sequence number as text,
and a node waits for the contender just ahead of it:

    layout              markers seen              a node goes when
    KAZOO_LOCK          __lock__                  no __lock__ node is ahead (kazoo Lock)
    KAZOO_READ_WRITE    __lock__, __rlock__       writer: nobody ahead (kazoo WriteLock)
                                                  reader: no __lock__ ahead (kazoo ReadLock)

So a kazoo ``Lock`` and a ``ReadLock`` on one path do not exclude each other
(kazoo's rule, kept): only ``WriteLock`` waits for readers.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

__all__ = (
    "KAZOO_LOCK",
    "KAZOO_READ",
    "KAZOO_READ_WRITE",
    "KAZOO_WRITE",
    "KazooNames",
    "kazoo_id",
    "kazoo_reader",
    "kazoo_writer",
)

KAZOO_WRITE: Final = "__lock__"  # kazoo Lock._NODE_NAME, WriteLock._NODE_NAME
KAZOO_READ: Final = "__rlock__"  # kazoo ReadLock._NODE_NAME


def kazoo_id() -> str:
    """A new node's id, as kazoo makes it: ``uuid.uuid4().hex``."""
    return uuid.uuid4().hex


def _contenders(markers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"(?:{})(-?\d{{10}})$".format("|".join(map(re.escape, markers))))


@dataclass(frozen=True, slots=True)
class KazooNames:
    """A kazoo lock's node names: created as ``<uuid4 hex><marker><seq>``; the children that
    end in one of `markers` and a sequence number, sorted by that number as text."""

    markers: tuple[str, ...]
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", _contenders(self.markers))

    @property
    def marker(self) -> str:
        return self.markers[0]

    def sequence(self, name: str) -> str | None:
        """The sequence text of a contender's name (kazoo's ``match.group(1)``), else None."""
        match = self._pattern.search(name)
        return match.group(1) if match is not None else None

    def sort(self, names: Sequence[str]) -> list[str]:
        """The contenders among `names` in kazoo's order; other children are left out.

        kazoo compares the sequence numbers as text (``contender_sequence <
        node_sequence``); ties, which one parent's sequence numbers never
        have, go by the whole name.
        """
        keyed = [(seq, name) for name in names if (seq := self.sequence(name)) is not None]
        return [name for _, name in sorted(keyed)]


KAZOO_LOCK: Final = KazooNames((KAZOO_WRITE,))  # Lock, Election, Semaphore's guard
KAZOO_READ_WRITE: Final = KazooNames((KAZOO_WRITE, KAZOO_READ))  # ReadLock, WriteLock

_WRITER: Final = _contenders((KAZOO_WRITE,))


def kazoo_writer(name: str) -> bool:
    """Whether `name` is a kazoo writer's (or plain lock's) node: ``...__lock__<seq>``."""
    return _WRITER.search(name) is not None


def kazoo_reader(names: Sequence[str], index: int) -> str | None:
    """kazoo's ``ReadLock``: goes when no ``__lock__`` node is ahead; else it watches the
    nearest one ahead (kazoo's predecessor: the ``__lock__`` contender just before it)."""
    return next((name for name in reversed(names[:index]) if kazoo_writer(name)), None)
