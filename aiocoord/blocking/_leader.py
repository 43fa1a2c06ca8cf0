"""The leader latch from threads: ``with coord.leader_latch(path) as latch``.

Joining and leaving are the async latch's `start()` / `aclose()`, run in the
loop; ``latch.leadership(timeout=)`` is a `Right` over the async
``latch.leadership()``: the thread's body runs while we lead, ``term.lost`` is
set the moment leadership ends and ``term.check()`` raises `LeadershipLost`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from .._checks import check_timeout
from ..errors import LeadershipLost
from ..recipes.leader_latch import LeaderLatch, LeadershipTerm, Participant
from ._loop import Loop
from ._right import Right
from ._services import Started

__all__ = ("BlockingLeaderLatch",)


class BlockingLeaderLatch(Started[LeaderLatch]):
    """A participant in the election at `path`, for threads (see `aiocoord.LeaderLatch`).

    ``with`` joins (blocks until our node exists, not until we lead) and
    leaving withdraws (deleting the node); ``start()`` / ``close()`` do the
    same without ``with``.  Observers (`leader`, `participants`) also work
    before joining.
    """

    def __init__(self, loop: Loop, build: Callable[[], LeaderLatch]) -> None:
        super().__init__(loop, build, what="leader latch")

    @property
    def path(self) -> str:
        return self.value.path

    @property
    def participant_id(self) -> str:
        return self.value.participant_id

    @property
    def has_leadership(self) -> bool:
        """True while we lead (cheap: no request)."""
        return self.value.has_leadership

    def wait(self, timeout: float | None = None) -> bool:
        """Block until we lead; True then, False if `timeout` seconds passed first.

        Waits through ZooKeeper outages, as `LeaderLatch.wait` does;
        `CoordinatorClosedError` if the latch is not joined or is left.
        """
        seconds = check_timeout(timeout)
        latch = self.value

        async def wait() -> bool:
            if seconds is None:
                await latch.wait()
                return True
            return await latch.wait(seconds)

        return self._loop.call(wait, what="leader_latch.wait()")

    def leadership(self, timeout: float | None = None) -> Right[LeadershipTerm]:
        """Run a ``with`` body as leader: ``with latch.leadership(timeout=30) as term``.

        Entering blocks until we lead (`TimeoutError` after `timeout` seconds;
        None: no bound).  ``term.token`` is the fencing token; ``term.lost`` is
        set the moment leadership ends (SUSPENDED past what the session
        provably lives, LOST, our node deleted, the latch left) and
        ``term.check()`` raises `LeadershipLost` from then on; leaving after a
        loss raises it too.  Each ``with`` is a term of its own.
        """
        seconds = check_timeout(timeout)
        latch = self.value

        @asynccontextmanager
        async def lead() -> AsyncIterator[LeadershipTerm]:
            if seconds is not None and not await latch.wait(seconds):
                raise TimeoutError(f"leader latch {latch.path}: not leader within {seconds:g} s")
            # wait() returned as leader and nothing awaited since: leadership() enters at once.
            async with latch.leadership() as term:
                yield term

        return Right(
            self._loop,
            lead,
            path=latch.path,
            error=LeadershipLost,
            token=lambda term: term.token,
            reason=lambda term: term.lost,
            what="leadership",
        )

    def step_down(self) -> bool:
        """Give up leadership now and join again at the back (see `LeaderLatch.step_down`)."""
        return self._loop.call(self.value.step_down, what="step_down()")

    def leader(self) -> Participant | None:
        """The current leader as the nodes say, or None."""
        return self._loop.call(self.value.leader, what="leader()")

    def participants(self) -> list[Participant]:
        """Every participant in election order, the leader first."""
        return self._loop.call(self.value.participants, what="participants()")

    def __repr__(self) -> str:
        return f"<blocking {self.value!r}>"
