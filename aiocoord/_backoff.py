"""`Backoff`: the one exponential backoff under aiocoord's retries; `grown` is its formula.

A wait that doubles after each failure in a row, from `first` up to `most`,
less a random share of it (`jitter`: 1 is anywhere from zero, 0 exact), so
that clients that failed together do not come back together.  The session's
reconnects (`zk`), the shared values' lost compare-and-sets (`recipes.values`),
the leader selector's stands, a failed leader task (`integrations`) and the
job worker's registrations and assigner stands each keep one; the queue
loop's retries, the claimer's looks at a job left alone and the scheduler's
public `RetryBackoff` grow by `grown`.
"""

from __future__ import annotations

import random

import anyio

__all__ = ("Backoff", "grown")


def grown(first: float, steps: int, most: float, *, factor: float = 2.0) -> float:
    """``first * factor**steps``, at most `most`; no overflow however many `steps`."""
    try:
        value = first * float(factor) ** max(0, steps)
    except OverflowError:  # far past any cap
        return float(most)
    return float(min(most, value))


class Backoff:
    """The waits after failures in a row: `first`, then doubling, up to `most`.

    `delay()` counts one failure more and says how long to wait; `failed()`
    waits that long.  `reset()` after a success starts again from `first`;
    `ease()` steps back one failure only.  After `limit` failures in a row the
    wait stops growing even below `most`.
    """

    __slots__ = ("_failures", "first", "jitter", "limit", "most")

    def __init__(self, first: float, most: float, *, jitter: float = 1.0, limit: int = 64) -> None:
        self.first = first
        self.most = most
        self.jitter = jitter
        self.limit = limit
        self._failures = 0

    @property
    def failures(self) -> int:
        """Failures in a row counted so far (at most `limit`)."""
        return self._failures

    def bound(self, *, first: float | None = None, most: float | None = None) -> float:
        """The longest wait after the failures counted so far (`first` and `most` as given)."""
        start = self.first if first is None else first
        return grown(start, self._failures - 1, self.most if most is None else most)

    def delay(self, *, first: float | None = None, most: float | None = None) -> float:
        """Count one failure more: the wait before the next attempt, jitter taken off.

        `first` and `most` override the instance's for this wait (a first wait
        scaled to the last round trip, a cap that follows the session timeout).
        """
        self._failures = min(self._failures + 1, self.limit)
        return self.bound(first=first, most=most) * (1.0 - self.jitter * random.random())

    async def failed(self, *, first: float | None = None, most: float | None = None) -> None:
        """Count one failure more and sleep `delay()`; cancellation just ends the sleep."""
        await anyio.sleep(self.delay(first=first, most=most))

    def reset(self) -> None:
        """A success: the next wait is `first` again."""
        self._failures = 0

    def ease(self) -> None:
        """A success among failures: the next wait is one step shorter."""
        self._failures = max(self._failures - 1, 0)
