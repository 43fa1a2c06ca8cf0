"""What the connect loop says while it retries: one line per outage, and a summary at its end.

A host that refuses, resets or does not answer is tried again and again
(every host, with backoff); a line per attempt buries everything else.  The
first failure of an outage is logged (WARNING before the first session once
the first second has passed: nothing may be listening; INFO later, when
SUSPENDED has said it already), the others at DEBUG, and the connection that
ends the outage says how many attempts failed and for how long.  Records
carry ``aiocoord_connect_retry`` so that a tool which reports the final error
itself (the CLI) can leave them out.
"""

from __future__ import annotations

import logging
import time

__all__ = ("RETRY_RECORD", "RetryLog")

log = logging.getLogger("aiocoord.session")

RETRY_RECORD = "aiocoord_connect_retry"
_EXTRA = {RETRY_RECORD: True}


class RetryLog:
    """Counts the failed attempts of the current outage and logs them as above."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._failed = 0
        self._said = False

    def failed(self, exc: BaseException, *, first_session: bool, started_at: float) -> None:
        """An attempt failed with `exc`; `first_session`: no session was ever established."""
        now = time.monotonic()
        if self._since is None:
            self._since, self._failed, self._said = now, 0, False
        self._failed += 1
        if self._said or (first_session and now - started_at < 1.0):
            log.debug("connect attempt failed: %s (retrying)", exc, extra=_EXTRA)
            return
        self._said = True
        log.log(
            logging.WARNING if first_session else logging.INFO,
            "connect attempt failed: %s (retrying; further failures of this outage at DEBUG)",
            exc,
            extra=_EXTRA,
        )

    def connected(self, address: tuple[str, int]) -> None:
        """An attempt to `address` succeeded: the outage, if any, is over."""
        if self._since is not None and self._said:
            log.info(
                "connected to %s:%s after %d failed attempt(s) over %.1fs",
                address[0],
                address[1],
                self._failed,
                time.monotonic() - self._since,
                extra=_EXTRA,
            )
        self._since = None
