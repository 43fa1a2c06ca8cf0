"""`Backoff`: wait a random while after a lost compare-and-set, longer after each loss.

Contenders that lose a compare-and-set learn the winner's version at once and
would all try again together, so that again one wins and the rest lose: on
ZooKeeper every lost write is logged and synced too.  Each loser waits a
random time within a window that doubles with each loss in a row (Ethernet's
binary exponential backoff), counted in round trips of its own last attempt,
so the contenders spread out and most attempts win.
"""

from __future__ import annotations

import random
from typing import Final

import anyio

__all__ = ("Backoff",)

_MOST_DOUBLINGS: Final = 6
_LONGEST: Final = 0.05  # seconds: past this the counter would idle


class Backoff:
    """The window of one contender; `lost()` waits, `won()` narrows it again."""

    __slots__ = ("_doublings",)

    def __init__(self) -> None:
        self._doublings = 0

    async def lost(self, round_trip: float) -> None:
        """Wait a random time up to ``round_trip * 2**(losses + 1)`` (at most 50 ms)."""
        self._doublings = min(self._doublings + 1, _MOST_DOUBLINGS)
        window = min(round_trip * (2 << self._doublings), _LONGEST)
        await anyio.sleep(random.uniform(0, window))

    def won(self) -> None:
        self._doublings = max(self._doublings - 1, 0)
