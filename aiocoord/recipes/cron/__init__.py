"""Cluster-wide cron: each job led by one worker of the newest version, each firing run once.

Each job is a task of version-aware task leadership under `root`, so it is
run by one worker of the newest version present, the jobs are spread over
those workers, and a rolling upgrade hands them over by drain.  Before a
scheduled time runs, its leader claims it with a conditional write on the
job's record (the scheduled time and the term's fencing token); the outcome
is written when the function ends.  A new leader reads the record and never
runs a firing that already ran.

Node layout, under `root`::

    <root>/workers/<worker id>   EPHEMERAL   task leadership's worker records
    <root>/leaders/<job>         EPHEMERAL   task leadership's leader nodes (czxid: the token)
    <root>/jobs/<job>            PERSISTENT  the job's record (`_record`): last time handled,
                                             the running claim, the bounded history

Failure handling:

- The leader's term ends (hand-over, SUSPENDED, LOST, closing): the running
  firing is cancelled and its claim stays without an outcome.  The next
  leader (maybe the same worker) records it ``"interrupted"`` or, with
  ``retry_interrupted=True``, runs it again (attempt 2): at least once for
  that firing.  A runner whose session expired while it ran may still be
  running until it notices; a retry can then overlap it briefly.
- No worker for a while: times late by at most `grace` seconds run late, in
  order; older ones follow the job's ``missed`` policy (`_plan`).
- Every write is a ``setData`` on the version read; a leader that reads a
  record written under a larger token stops writing (fenced).
- A record this code cannot read (`NodeDataError`) stops only that job,
  logged, until someone changes the node; it is never overwritten.
- The function raises: logged and recorded ``"failed"``; the next time runs
  as usual.

Where things are: `_cron` (`Cron`), `_runner` (one job's loop), `_plan` (the
pure decisions), `_record` (the record), `_schedule` (cron expressions and
intervals), `_firing` (`Firing`, `FiringOutcome`), `describe` (the read-only view for
tools: `describe_cron`).
"""

from __future__ import annotations

from ._cron import Cron as Cron
from ._cron import CronOptions as CronOptions
from ._cron import cron as cron
from ._firing import Firing as Firing
from ._firing import FiringOutcome as FiringOutcome
from .describe import CronJobView as CronJobView
from .describe import CronRun as CronRun
from .describe import CronView as CronView
from .describe import describe_cron as describe_cron
from .describe import is_cron as is_cron
from .describe import read_cron_job as read_cron_job

__all__ = (
    "Cron",
    "CronOptions",
    "cron",
    "Firing",
    "FiringOutcome",
    "CronJobView",
    "CronRun",
    "CronView",
    "describe_cron",
    "is_cron",
    "read_cron_job",
)
