"""`Participant`: one contender of any recipe as its node says, for every ``participants()``."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ("Participant",)


@dataclass(frozen=True, slots=True)
class Participant:
    """A contender as its node says: `id` (the participant id in the node), whether it
    `holds` the right now (holds the lock or a lease, leads the election, is in the
    barrier), and its `node` name (not compared).

    The same type for the latch, the mutex, the read/write lock, the semaphore, the
    double barrier and their blocking façades; `is_leader` is `holds` under the name
    the latch has always used.
    """

    id: str
    holds: bool
    node: str = field(default="", compare=False)

    @property
    def is_leader(self) -> bool:
        """Whether this participant leads (a latch's holder): the same as `holds`."""
        return self.holds
