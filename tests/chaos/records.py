"""The campaign's log format: JSON lines, one object per event, on one shared clock.

Every process of a campaign (the orchestrator, the fenced store, each
participant) appends to its own file.  Each line is one JSON object with at
least ``k`` (the kind) and ``t`` (``time.monotonic()`` of the writer: all
processes run on one machine, so CLOCK_MONOTONIC is one clock).  Lines are
written with a single ``os.write`` on an ``O_APPEND`` descriptor, so a process
killed with SIGKILL leaves at most its last event unwritten, never half a line
in the middle of the file.

Participant events (``p`` participant name, ``inc`` incarnation: one per OS
process started for that name):

- ``start``: ``os_pid``, ``wall`` (``time.time()`` at the same instant as ``t``),
  ``loop`` (asyncio or uvloop), ``mutant`` (the deliberate defect applied, or null);
  a Java participant (`java`) has ``loop`` java, ``lang`` java and its ``role``
- ``conn``: a connection state, ``state``, ``sid``, ``new`` (a new session)
- ``term``: a term begins: ``id``, ``role`` (latch, lock, mutex, selector, once,
  task, assigner, cron), ``res`` (the resource it guards), ``tok`` (fencing token),
  for once_per also ``win`` (the window's start, wall clock), for cron
  ``win`` (the firing's scheduled time, wall clock)
- ``end``: the term ``id`` ends: its body was cancelled (``why``: cancelled) or
  returned (``why``: exit), or raised (``why``: the exception)
- ``outcome``: how a once_per run ended for the caller: ``id``, ``res``
  (ok: the run was recorded; lost: LockLost; unknown: the record could not
  be confirmed)
- ``submit`` / ``result`` / ``run``: a job submitted (``job``), its result
  seen by the submitter (``job``, ``status``), a job run by a worker (``tag``,
  ``ms``: how long it runs)
- ``error``: an exception that is not a `CoordError` (``role``, ``exc``,
  ``tb``): a bug, counted as a violation
- ``coord_error``: a `CoordError` a role saw and rode out (``exc``: its type)
- ``stall``: the process ran nothing from ``t0`` to ``t1`` (a loaded machine
  deschedules it): the checker treats it as a pause
- ``exit``: the process leaves cleanly
- ``stale_lead`` (Java latch only): Curator 5.4 reported leadership on ``node``,
  created by session ``owner``, while connected on ``sid``: no term is begun on it
  (CURATOR-696, fixed in Curator 5.7.0), once per such node

Store events: ``w``: one fenced write, ``n`` (its rank in the store's order),
``res``, ``tok``, ``p``, ``id`` (term), ``ok`` (accepted), ``high`` (the
highest token accepted for ``res`` before it).

Orchestrator events: ``phase`` (``name``: faults, calm, stop, done; ``wall``),
``proc`` (``p``, ``inc``, ``ev``: spawn, sigkill, sigstop, sigcont, sigterm,
exit with ``code``, crash), ``fault`` (``kind``, ``target``, ``t0``, ``t1``,
``detail``; for a participant fault ``p``, ``inc`` and ``aim``: what it was
aimed at and whether that participant held it, e.g. "lock holder"),
``job_final`` (``job``, ``status`` read from ZooKeeper at the
end), ``config`` (the campaign's parameters and seed).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ("Record", "Writer", "read_records")

Record = dict[str, Any]


class Writer:
    """Append JSON lines to `path`, one ``os.write`` per event (safe across SIGKILL).

    `fields` are added to every event (such as ``p`` and ``inc``).
    """

    def __init__(self, path: str | os.PathLike[str], **fields: Any) -> None:
        self.path = Path(path)
        self._fields = fields
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def emit(self, event: str, /, *, t: float | None = None, **data: Any) -> Record:
        """Write one event of kind `event` (``t`` defaults to now) and return it."""
        record: Record = {"k": event, "t": time.monotonic() if t is None else t}
        record.update(self._fields)
        record.update(data)
        line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
        os.write(self._fd, line.encode("utf-8"))
        return record

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_records(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Record]:
    """Every event of every file; a torn last line (killed writer) is skipped."""
    for path in paths:
        with open(path, "rb") as f:
            for raw in f:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and "k" in record and "t" in record:
                    yield record
