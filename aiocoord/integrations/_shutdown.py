"""Retiring on the server's stop signal: a process that is shutting down takes no leadership.

With ``uvicorn --workers N`` every worker is told to stop at once (SIGTERM or
SIGINT), but each runs its lifespan's shutdown a little later than the signal,
after its connections drained.  Without a word in between, the leader leaves
its latch first, the next worker in line (itself about to stop) is elected and
starts the leader task for a few milliseconds, and so on down the line.

So the lifespan chains a handler in front of the server's own for those
signals: it calls `Coordination.retire()` (from the event loop, the signal
having interrupted it in the main thread) and then the server's handler,
unchanged.  Installed only where that is safe: in the main thread, and only
over a handler written in Python (a server's, or Python's default SIGINT
handler); a signal that would end the process by default is left alone.
The server's handler is put back when the lifespan ends.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._coordination import Coordination

__all__ = ("STOP_SIGNALS", "retire_on_signals")

log = logging.getLogger("aiocoord.integrations.fastapi")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

Handler = Callable[[int, FrameType | None], Any]


@contextmanager
def retire_on_signals(coordination: Coordination) -> Iterator[None]:
    """While in the block, a stop signal retires `coordination`, then reaches the server."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    loop = asyncio.get_running_loop()
    installed: dict[signal.Signals, _Chained] = {}
    for sig in STOP_SIGNALS:
        previous = signal.getsignal(sig)
        if not callable(previous):
            continue  # SIG_DFL, SIG_IGN or a handler set outside Python: not ours to wrap
        ours = _Chained(previous, lambda: loop.call_soon_threadsafe(coordination.retire))
        signal.signal(sig, ours)
        installed[sig] = ours
    try:
        yield
    finally:
        for sig, ours in installed.items():
            ours.active = False  # if another handler was put in front of ours, it passes through
            if signal.getsignal(sig) is ours:
                signal.signal(sig, _live(ours.previous))


class _Chained:
    """A stop-signal handler: retire, then whatever handled the signal before."""

    def __init__(self, previous: Handler, retire: Callable[[], object]) -> None:
        self.previous = previous
        self.retire = retire
        self.active = True

    def __call__(self, signum: int, frame: FrameType | None) -> Any:
        if self.active:
            try:
                self.retire()
            except RuntimeError:  # the loop has closed: nothing left to retire
                log.debug("stop signal %d after the event loop closed", signum)
        return self.previous(signum, frame)


def _live(handler: Handler) -> Handler:
    """`handler`, past any chained handler of ours whose lifespan has ended."""
    while isinstance(handler, _Chained) and not handler.active:
        handler = handler.previous
    return handler
