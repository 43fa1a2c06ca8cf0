"""What the connect loop says while it retries: one line per outage, one per bad member, a summary.

A host that refuses, resets or does not answer is tried again and again
(every host, with backoff); a line per attempt buries everything else.  The
first failure of an outage is logged (WARNING before the first session once
the first second has passed: nothing may be listening; INFO later, when
SUSPENDED has said it already), the others at DEBUG, and the connection that
ends the outage says how many attempts failed and for how long.

A member of the host list that refuses connections or whose name does not
resolve is something an operator must fix: it gets one WARNING of its own per
outage, naming it, and DEBUG for every later attempt of that outage.  Not in
the outage's first second (a member being restarted refuses for a moment, a
blip is over before then): a member that failed only then is named when the
outage lasts longer, or, before the first session, when another member
answers (a bad entry in the host list, seen at start-up).  A connection
established starts the count again.  Records carry ``aiocoord_connect_retry``
so that a tool which reports the final error itself (the CLI) can leave them
out.
"""

from __future__ import annotations

import logging
import socket
import time

__all__ = ("RETRY_RECORD", "RetryLog", "member_fault")

log = logging.getLogger("aiocoord.session")

RETRY_RECORD = "aiocoord_connect_retry"
_EXTRA = {RETRY_RECORD: True}
_GRACE = 1.0  # seconds of an outage (or of start-up) in which a refusal may be a restart


def member_fault(exc: BaseException) -> str | None:
    """What is wrong with the member an attempt failed on, if it is the member's own fault.

    "does not resolve" (the name has no address) or "refuses connections"
    (nothing listens on the port); None for anything else (a timeout, a reset,
    a server that hangs up), which may be the network or a busy server.
    """
    cause = exc.__cause__
    if isinstance(cause, socket.gaierror):
        return "does not resolve"
    if isinstance(cause, ConnectionRefusedError):
        return "refuses connections"
    return None


class RetryLog:
    """Counts the failed attempts of the current outage and logs them as above."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._failed = 0
        self._said = False
        self._named: set[tuple[str, int]] = set()  # members warned about in this outage
        self._pending: dict[tuple[str, int], str] = {}  # failed in the grace, not named yet

    def failed(
        self,
        exc: BaseException,
        *,
        address: tuple[str, int] | None = None,
        first_session: bool,
        started_at: float,
    ) -> None:
        """An attempt on `address` failed with `exc`; `first_session`: none was ever established."""
        now = time.monotonic()
        if self._since is None:
            self._since, self._failed, self._said = now, 0, False
        self._failed += 1
        fault = member_fault(exc) if address is not None else None
        if fault is not None and address is not None:
            self._member_failed(address, fault, exc, now, first_session, started_at)
            return
        if self._said or (first_session and now - started_at < _GRACE):
            log.debug("connect attempt failed: %s (retrying)", exc, extra=_EXTRA)
            return
        self._said = True
        log.log(
            logging.WARNING if first_session else logging.INFO,
            "connect attempt failed: %s (retrying; further failures of this outage at DEBUG)",
            exc,
            extra=_EXTRA,
        )

    def _member_failed(
        self,
        address: tuple[str, int],
        fault: str,
        exc: BaseException,
        now: float,
        first_session: bool,
        started_at: float,
    ) -> None:
        assert self._since is not None
        began = started_at if first_session else self._since
        if address in self._named or now - began < _GRACE:
            if address not in self._named:
                self._pending[address] = f"{fault}: {exc}"
            log.debug("connect attempt failed: %s (retrying)", exc, extra=_EXTRA)
            return
        self._pending.pop(address, None)
        self._name(address, f"{fault}: {exc}")

    def _name(self, address: tuple[str, int], why: str) -> None:
        self._named.add(address)
        log.warning(
            "ZooKeeper member %s:%s of the host list %s (retrying; once per outage)",
            *address,
            why,
            extra=_EXTRA,
        )

    def connected(self, address: tuple[str, int], *, first_session: bool = False) -> None:
        """An attempt to `address` succeeded: the outage, if any, is over.

        With `first_session` (no session was ever established), the members
        that failed in the first second are named now: another one answered.
        """
        if first_session:
            for member, why in self._pending.items():
                self._name(member, why)
        if self._since is not None and (self._said or self._named):
            log.info(
                "connected to %s:%s after %d failed attempt(s) over %.1fs",
                address[0],
                address[1],
                self._failed,
                time.monotonic() - self._since,
                extra=_EXTRA,
            )
        self._since = None
        self._named.clear()
        self._pending.clear()
