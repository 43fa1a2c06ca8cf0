"""`ServiceProvider`: pick one instance of a service (curator-x-discovery's ``ServiceProvider``).

Strategies, Curator's: ``round-robin`` (the default), ``random``, and
``sticky`` (the same instance while it is listed, then the next by round
robin).  Disabled instances are never picked (``EnabledInstanceFilter``).
Curator's down-instance policy: an instance reported by `note_error()`
`error_threshold` times (2) within `down_for` seconds (30) of its first
report is left out until those seconds have passed.  The choice is made
from the discovery's cache; nothing here talks to ZooKeeper.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from typing import Final, Literal

from ..._checks import check_int, check_seconds
from ...errors import ConfigError
from ._instance import ServiceInstance

__all__ = ("STRATEGIES", "ServiceProvider", "Strategy")

Strategy = Literal["round-robin", "random", "sticky"]
STRATEGIES: Final = ("round-robin", "random", "sticky")


class ServiceProvider:
    """Picks an instance of service `name` from a discovery's cache; see the module docstring.

    Made by `ServiceDiscovery.provider()`.  Raises `ConfigError` or
    `TypeError` for bad arguments.
    """

    def __init__(
        self,
        name: str,
        instances: Callable[[str], Awaitable[list[ServiceInstance]]],
        *,
        strategy: Strategy = "round-robin",
        down_for: float = 30.0,
        error_threshold: int = 2,
    ) -> None:
        if strategy not in STRATEGIES:
            raise ConfigError("strategy", f"must be one of {STRATEGIES}, not {strategy!r}")
        check_int("error_threshold", error_threshold, least=1)
        self._name = name
        self._instances = instances
        self._strategy = strategy
        self._down_for = check_seconds("down_for", down_for)
        self._threshold = error_threshold
        self._errors: dict[str, tuple[float, int]] = {}  # id -> (first report, count)
        self._turn = 0
        self._sticky: ServiceInstance | None = None

    @property
    def name(self) -> str:
        return self._name

    @property
    def strategy(self) -> Strategy:
        return self._strategy

    async def all(self) -> list[ServiceInstance]:
        """Every instance that may be picked now: enabled and not down."""
        self._purge()
        return [
            i
            for i in await self._instances(self._name)
            if i.enabled and self._errors.get(i.id, (0.0, 0))[1] < self._threshold
        ]

    async def get(self) -> ServiceInstance | None:
        """One instance by the strategy, or None if there is none.

        From the discovery's cache (no request), or read from the server when
        the discovery was made with ``watch=False``.
        """
        choices = await self.all()
        if not choices:
            return None
        if self._strategy == "random":
            return random.choice(choices)
        if self._strategy == "sticky":
            sticky = self._sticky
            if sticky is not None:
                for inst in choices:
                    if inst.id == sticky.id:
                        return inst
            self._sticky = self._next(choices)
            return self._sticky
        return self._next(choices)

    def _next(self, choices: list[ServiceInstance]) -> ServiceInstance:
        choice = choices[self._turn % len(choices)]
        self._turn += 1
        return choice

    def note_error(self, instance: ServiceInstance) -> None:
        """Report that `instance` failed; at `error_threshold` reports it is down for `down_for`."""
        self._purge()
        first, count = self._errors.get(instance.id, (time.monotonic(), 0))
        self._errors[instance.id] = (first, count + 1)

    def _purge(self) -> None:
        expired = time.monotonic() - self._down_for
        for key in [k for k, (first, _) in self._errors.items() if first < expired]:
            del self._errors[key]

    def __repr__(self) -> str:
        down = sum(1 for _, count in self._errors.values() if count >= self._threshold)
        return f"<ServiceProvider {self._name} {self._strategy} down={down}>"
