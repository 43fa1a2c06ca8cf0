"""`LeaderSelector` and `leader_selector()`: run while leader, give it back, requeue.

Curator's ``LeaderSelector``, on its layout: Curator builds its selector on an
``InterProcessMutex`` at the path, so its nodes are the mutex's,
``_c_<uuid>-lock-<seq>`` with the participant id as data, in the mutex's
order (the queue's ``LOCK`` names), and the first node leads.  Java
``LeaderSelector`` processes and aiocoord selectors on one path therefore
form one election (``tests/zk/test_interop_selector.py``).  A leader latch's
``-latch-`` nodes are another election: Curator's ``LeaderLatch`` and
``LeaderSelector`` do not share a path, and neither do ours.  `layout`
chooses otherwise: ``"latch"`` runs the selector on the latch's nodes, in one
election with the latches (aiocoord's and Curator's) on the path (the job
scheduler's assigner and the FastAPI lifespan's leader tasks do, beside
plain latches); ``"zookeeper"`` on ZooKeeper's ``n_<seq>`` election, which
latches of that layout share.

Each time this participant becomes leader, ``lead(term)`` runs inside the
``leadership()`` of `latch`, a `LeaderLatch` on those nodes, so it is
cancelled the moment leadership is lost:

- `lead` returns: our node is deleted (the next participant leads) and, with
  ``requeue=True``, a new node joins at the back of the queue (Curator
  releases its mutex once ``takeLeadership`` returned, and with
  ``autoRequeue`` acquires it again).  A hand-back is logged at INFO.
- leadership is lost (SUSPENDED, LOST, our node deleted): `lead` is
  cancelled, nothing is raised into the caller (the loss is logged at
  WARNING); the selector keeps its place when it can (same session) or joins
  again, as a latch does.  Without ``requeue`` the node is given back instead.
- `lead` raises: the error is logged and counted, the node given back, and
  the participant joins again after a backoff (doubling up to `max_backoff`,
  reset once `lead` returns); with ``on_error="raise"`` the selector stops
  instead and its exit (`aclose()`) raises the error.

- the selector leaves (`aclose()`): `lead` is cancelled and our node is
  deleted only once `lead` has returned, so its clean-up never overlaps the
  next leader's `lead` (Curator releases once ``takeLeadership`` returned).

Without ``requeue``, a selector leads at most once per `requeue()` call
(the first comes with `start()`), as Curator's without ``autoRequeue``.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Literal, TypedDict, Unpack

import anyio
import anyio.abc

from ..._backoff import Backoff
from ..._checks import check_seconds
from ..._lifecycle import Lifecycle, Phase, Service
from ...errors import ConfigError, CoordinatorClosedError, LeadershipLost
from ...session import Coordinator
from ._election import SELECTOR_LAYOUTS, LeadershipTerm
from ._latch import LeaderLatch

__all__ = ("LeaderSelector", "OnError", "SelectorOptions", "leader_selector")

log = logging.getLogger("aiocoord.recipes.leader_latch")

LeadFunc = Callable[[LeadershipTerm], Awaitable[None]]
OnError = Literal["requeue", "raise"]


class _SelectorLatch(LeaderLatch):
    """The selector's candidacy: a `LeaderLatch` on Curator LeaderSelector's nodes."""

    _layouts = SELECTOR_LAYOUTS


class LeaderSelector(Service):
    """Runs `lead` each time this participant leads the election at `path`; see the module docstring.

    Use it as ``async with`` (or `start()` ... `aclose()`, from any task).
    `latch` is the `LeaderLatch` underneath, on the selector's nodes (its
    observers and `changes()` work as usual and see the selector's election).
    `layout`: ``"curator"`` (Curator LeaderSelector's ``-lock-`` nodes, the
    default), ``"latch"`` (Curator LeaderLatch's ``-latch-`` nodes: one
    election with the latches on the path) or ``"zookeeper"``.  `runs`, `failures`, `losses` and `last_error` count what
    `lead` did.  Raises `TypeError` / `ConfigError` for bad arguments, and
    what `LeaderLatch` raises for the rest.
    """

    def __init__(
        self,
        coord: Coordinator,
        path: str,
        lead: LeadFunc,
        *,
        participant_id: str | None = None,
        requeue: bool = True,
        on_error: OnError = "requeue",
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        layout: str = "curator",
        lose_on_suspend: bool | None = None,
    ) -> None:
        if not inspect.iscoroutinefunction(lead) and not inspect.iscoroutinefunction(
            getattr(lead, "__call__", None)  # noqa: B004 - an object with an async __call__
        ):
            raise TypeError(
                f"lead must be an async function taking the LeadershipTerm, not {lead!r}"
            )
        if not isinstance(requeue, bool):
            raise TypeError(f"requeue must be a bool, not {type(requeue).__name__}")
        if on_error not in ("requeue", "raise"):
            raise ConfigError("on_error", f"must be 'requeue' or 'raise', not {on_error!r}")
        self._backoff = check_seconds("backoff", backoff)
        self._max_backoff = check_seconds("max_backoff", max_backoff)
        if self._max_backoff < self._backoff:
            raise ConfigError(
                "max_backoff", f"must be >= backoff ({backoff!r}), not {max_backoff!r}"
            )
        self.latch: LeaderLatch = _SelectorLatch(
            coord,
            path,
            participant_id=participant_id,
            layout=layout,
            lose_on_suspend=lose_on_suspend,
        )
        self._lead = lead
        self._requeue = requeue
        self._on_error = on_error
        self.runs = 0
        self.failures = 0
        self.losses = 0
        self.last_error: BaseException | None = None
        self._error: BaseException | None = None
        # `lead` runs in this scope; leaving cancels it and waits for it to unwind
        # before the node goes (as Curator releases only once takeLeadership returned).
        self._leading: anyio.CancelScope | None = None  # made when run: no loop may run yet
        self._leaving = False
        self._loop_done = anyio.Event()
        self._looping = False
        self._life = Lifecycle(
            f"leader selector {path} ({self.latch.participant_id})",
            self._run,
            stopping=self._stopping,
        )

    @property
    def path(self) -> str:
        return self.latch.path

    @property
    def participant_id(self) -> str:
        return self.latch.participant_id

    @property
    def has_leadership(self) -> bool:
        return self.latch.has_leadership

    async def start(self) -> None:
        """Join the election; returns once our node exists (as `LeaderLatch.start`)."""
        await self._life.start()

    async def aclose(self) -> None:
        """Leave: `lead` is cancelled, the node deleted; raises `lead`'s error with ``on_error="raise"``."""
        await self._life.aclose()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def requeue(self) -> None:
        """Join the election again now (after `lead` returned without ``requeue``, or a backoff)."""
        self.latch._rejoin()

    async def interrupt(self) -> bool:
        """End the current `lead` now and give leadership to the next in line.

        Curator's ``interruptLeadership``: `lead` is cancelled (counted in
        `losses`), our node is deleted (as `LeaderLatch.step_down`), and with
        ``requeue=True`` a new node joins at the back of the queue; without it
        the selector waits for `requeue()`.  Blocks until the node is deleted.
        Returns False, doing nothing, if we do not lead right now.  Raises
        `CoordinatorClosedError` if the selector is not entered or is left.
        """
        if not self.latch.has_leadership:
            if self._life.phase is not Phase.RUNNING:
                raise CoordinatorClosedError(
                    f"leader selector {self.path} is not open: use `async with leader_selector(...)`"
                )
            return False
        log.info("leader selector %s: interrupted", self.path)
        await self.latch._release("interrupted", rejoin_after=0.0 if self._requeue else math.inf)
        return True

    async def _run(self, tg: anyio.abc.TaskGroup) -> None:
        await self.latch.start()
        self._looping = True
        self._leading = anyio.CancelScope()
        if self._leaving:
            self._leading.cancel()
        tg.start_soon(self._loop_until_left, self._leading)

    async def _loop_until_left(self, leading: anyio.CancelScope) -> None:
        try:
            with leading:
                await self._loop()
        finally:
            self._loop_done.set()

    async def _stopping(self) -> None:
        """Leaving: `lead` is cancelled and has returned before the latch deletes our node."""
        self._leaving = True
        if self._leading is not None:
            self._leading.cancel()
        if self._looping:
            await self._loop_done.wait()
        await self.latch.aclose()

    async def _loop(self) -> None:
        # The one backoff, without jitter: the waits a user configured, doubling.
        backoff = Backoff(self._backoff, self._max_backoff, jitter=0.0)
        while True:
            try:
                async with self.latch.leadership() as term:
                    self.runs += 1
                    await self._lead(term)
            except LeadershipLost as exc:
                self.losses += 1
                log.info("leader selector %s: lead cancelled: %s", self.path, exc.reason)
                if not self._requeue:
                    await self.latch._release("lost", rejoin_after=math.inf)
                continue
            except CoordinatorClosedError:
                return  # the latch was left
            except Exception as exc:
                self.failures += 1
                self.last_error = exc
                if self._on_error == "raise":
                    log.error("leader selector %s: lead failed; stopping", self.path, exc_info=exc)
                    self._error = exc
                    await self._life.aclose()  # from our own task: only signals
                    return
                wait = backoff.delay()
                log.exception(
                    "leader selector %s: lead failed; joining again in %.1f s", self.path, wait
                )
                after = wait if self._requeue else math.inf
                await self.latch._release("failed", rejoin_after=after)
                continue
            backoff.reset()
            await self.latch._release("released", rejoin_after=0.0 if self._requeue else math.inf)

    def __repr__(self) -> str:
        return f"<LeaderSelector {self.path} id={self.participant_id} runs={self.runs}>"


class SelectorOptions(TypedDict, total=False):
    """`LeaderSelector`'s keyword arguments, as `leader_selector()` forwards them."""

    participant_id: str | None
    requeue: bool
    on_error: OnError
    backoff: float
    max_backoff: float
    layout: str
    lose_on_suspend: bool | None


def leader_selector(
    coord: Coordinator, path: str, lead: LeadFunc, **options: Unpack[SelectorOptions]
) -> LeaderSelector:
    """A `LeaderSelector` to use as ``async with leader_selector(coord, path, lead, ...)``.

    See `LeaderSelector` for the arguments.
    """
    return LeaderSelector(coord, path, lead, **options)
