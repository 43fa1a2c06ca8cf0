"""The safety checker: pure functions over a campaign's events (see `records`), no I/O.

`check(records)` rebuilds every term (who believed it held what, from when
to when, with which fencing token), every fenced write, every fault and
every process pause, and returns a `Report`.  Violations (each must be 0):

- **overlaps outside pauses**: two terms of one resource (latch, lock,
  once_per, task, assigner) whose bodies ran at the same time; for the
  semaphore (resource ``sem``) more than ``sem_leases`` at once; for the
  read/write lock (``rw``) a ``write`` term beside any other.  A term ends
  when its body was cancelled or returned; a term of a process that was
  SIGKILLed ends at the kill.  An overlap is excused only when one of the two
  holders was frozen (SIGSTOP) at some moment between shortly before its
  term began (`Params.grace`) and the start of the overlap: a frozen process
  can wake up believing it still leads, which no client library can prevent.
  A stall (the process logged that it ran nothing for a while: a loaded
  machine descheduled it) counts as a freeze, and stalls are reported.
  It is also excused, and counted apart, when either holder's session
  was expired by force on the server (``expire``: a third party took the
  session over and closed it) while it held the term, and the holder ended
  the term within `Params.expiry_bound` of that: the server tells the old
  holder (by closing its socket) and the next one (by a watch event) at
  the same moment, and nothing orders the two clients' reads.  The old
  holder's term can even begin after the next one's: re-elected on a read
  its member served just before applying the close.  A natural
  expiry (a partition or a pause past the session timeout) gets no excuse:
  the holder must have let go at SUSPENDED, before the server expired it.
- **stale writes accepted**: replaying the store's log in its own order, a
  write accepted with a token lower than one already accepted for the same
  resource (the store is re-checked, not trusted).
- **token order**: by start time, each term's token must be larger than
  every earlier term's of the resource; equal only for the same process
  (a latch or a task re-granted on the same node after SUSPENDED).  Shared
  terms (semaphore leases, reads) are not ordered among themselves: only a
  ``write`` term must outrank every earlier ``rw`` term.  A term
  begun by a holder just woken from a freeze, or while its session was
  being expired by force, is excused, as above.
- **double windows**: a once_per window with more than one recorded
  (successful) run.
- **missed windows**: a window that had to run and did not: no fault whose
  effects could reach it (see `_blocked`), and some participant connected
  throughout it.
- **lost jobs**: a submitted job with neither a result seen by its client nor
  a final status DONE/FAILED.
- **errors**: exceptions that are not `CoordError` (a recipe bug); processes
  that crashed or had to be killed at the end (a hang).
- **liveness**: at the end of the calm phase every leader resource has a
  leader and the lock has been taken during it.

Figures: faults by kind, terms by role, the longest leaderless gap, writes
accepted and refused, excused overlaps and the longest of them.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import Any

from .records import Record
from .report import Overlap, Params, Report, Term

__all__ = ("Overlap", "Params", "Report", "Term", "check")

LEADER_ROLES = ("latch", "task", "assigner")
USABLE = ("CONNECTED", "RECONNECTED")


# --- rebuilding the campaign from its events ----------------------------------------------


class _Campaign:
    def __init__(self, records: Iterable[Record]) -> None:
        self.by_kind: dict[str, list[Record]] = defaultdict(list)
        self.store: list[Record] = []
        last = 0.0
        for r in records:
            self.by_kind[r["k"]].append(r)
            if r["k"] == "w":
                self.store.append(r)
            last = max(last, float(r["t"]))
        self.last = last
        for rs in self.by_kind.values():
            rs.sort(key=lambda r: float(r["t"]))
        self.store.sort(key=lambda r: int(r["n"]))  # the store's own order
        self.config: dict[str, Any] = (
            dict(self.by_kind["config"][0]) if self.by_kind["config"] else {}
        )
        self.phases = {r["name"]: float(r["t"]) for r in self.by_kind["phase"]}
        self.deaths: dict[tuple[str, int], float] = {}
        self.stops: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        self.starts: dict[tuple[str, int], float] = {}
        self._processes()

    def _processes(self) -> None:
        for r in self.by_kind["start"]:
            self.starts.setdefault((r["p"], int(r["inc"])), float(r["t"]))
        open_stop: dict[tuple[str, int], float] = {}
        for r in self.by_kind["proc"]:
            key = (r["p"], int(r["inc"]))
            t, ev = float(r["t"]), r["ev"]
            if ev == "sigstop":
                open_stop[key] = t
            elif ev == "sigcont" and key in open_stop:
                self.stops[key].append((open_stop.pop(key), t))
            elif ev in ("sigkill", "exit", "crash"):
                self.deaths[key] = min(self.deaths.get(key, math.inf), t)
        for r in self.by_kind["exit"]:
            key = (r["p"], int(r["inc"]))
            self.deaths[key] = min(self.deaths.get(key, math.inf), float(r["t"]))
        for key, t in open_stop.items():
            self.stops[key].append((t, self.deaths.get(key, math.inf)))
        self.stalls = [
            (float(r["t0"]), float(r["t1"]), (r["p"], int(r["inc"]))) for r in self.by_kind["stall"]
        ]
        for t0, t1, key in self.stalls:
            self.stops[key].append((t0, t1))

    @property
    def end(self) -> float:
        """When the participants were told to stop (or the last event)."""
        return self.phases.get("stop", self.last)

    def terms(self) -> list[Term]:
        ends = {r["id"]: r for r in self.by_kind["end"]}
        outcomes = {r["id"]: r["res"] for r in self.by_kind["outcome"]}
        terms = []
        for r in self.by_kind["term"]:
            key = (r["p"], int(r["inc"]))
            end = ends.get(r["id"])
            if end is not None:
                stop, closed, why = float(end["t"]), "end", end.get("why")
            elif key in self.deaths:
                stop, closed, why = self.deaths[key], "death", None
            else:
                stop, closed, why = self.last, "open", None
            terms.append(
                Term(
                    r["id"],
                    r["p"],
                    int(r["inc"]),
                    r["role"],
                    r["res"],
                    int(r["tok"]),
                    float(r["t"]),
                    max(stop, float(r["t"])),
                    closed,
                    why,
                    r.get("win"),
                    outcomes.get(r["id"]),
                )
            )
        terms.sort(key=lambda t: (t.start, t.id))
        return terms

    def frozen_near(self, term: Term, until: float, grace: float) -> bool:
        """Whether `term`'s process was stopped at some moment in [start - grace, until]."""
        return any(s1 <= until and s2 >= term.start - grace for s1, s2 in self.stops[term.proc])

    def expired_under(self, term: Term, until: float, bound: float) -> bool:
        """Whether `term`'s session was expired by force while held, before `until`,
        and the term ended within `bound` of that expiry."""
        for r in self.by_kind["fault"]:
            if r["kind"] != "expire" or (r.get("p"), r.get("inc")) != term.proc:
                continue
            t0, t1 = float(r["t0"]), float(r["t1"])
            if term.start <= t1 and t0 <= until and term.end <= t1 + bound:
                return True
        return False

    def blocked(self, params: Params) -> list[tuple[float, float]]:
        stalls = [{"kind": "stop", "t0": t0, "t1": t1} for t0, t1, _ in self.stalls]
        return [_blocked(r, params) for r in [*self.by_kind["fault"], *stalls]]


def _blocked(fault: Record, params: Params) -> tuple[float, float]:
    """When `fault` may keep a once_per window from running.

    A holder cut off from ZooKeeper keeps the lease it last wrote for up to
    lease + skew: after the start of a freeze or a kill (it wrote nothing
    since), after the end of anything else (a write held in a paused proxy or
    a connection still open may land then; an election delays renewals).
    """
    t0, t1 = float(fault["t0"]), float(fault["t1"])
    tail = params.lease + params.skew + params.quiet_margin
    if str(fault["kind"]).startswith("stop") or fault["kind"] == "kill":
        return t0 - 0.5, max(t0 + tail, t1 + params.quiet_margin)
    return t0 - 0.5, t1 + tail


def check(records: Iterable[Record], params: Params | None = None) -> Report:
    """Check a campaign's events (from every log, in any order; see the module docstring)."""
    camp = _Campaign(records)
    cfg = camp.config
    if params is None:
        default = Params()
        params = Params(
            lease=float(cfg.get("lease", default.lease)),
            skew=float(cfg.get("skew", default.skew)),
            once_interval=float(cfg.get("once_interval", default.once_interval)),
        )
    report = Report(seed=cfg.get("seed"), config=cfg)
    report.stalls = len(camp.stalls)
    report.longest_stall = max((t1 - t0 for t0, t1, _ in camp.stalls), default=0.0)
    for r in camp.by_kind["fault"]:
        report.faults[r["kind"]] += 1
    terms = camp.terms()
    for t in terms:
        report.terms[t.role] += 1
    by_res: dict[str, list[Term]] = defaultdict(list)
    for t in terms:
        by_res[t.res].append(t)
    for res, ts in sorted(by_res.items()):
        _overlaps(camp, res, ts, params, report)
        _token_order(camp, res, ts, params, report)
    _store(camp, report)
    _windows(camp, [t for t in terms if t.role == "once"], params, report)
    _jobs(camp, report)
    _errors(camp, report)
    _gaps_and_liveness(camp, by_res, params, report)
    return report


def _overlaps(camp: _Campaign, res: str, terms: list[Term], params: Params, report: Report) -> None:
    # How many terms may run at once: the semaphore's leases; else one (readers share).
    limit = int(camp.config.get("sem_leases", 2)) if res == "sem" else 1
    active: list[Term] = []
    for b in terms:  # sorted by start
        active = [a for a in active if a.end > b.start]
        rivals = [a for a in active if res != "rw" or "write" in (a.role, b.role)]
        for a in rivals[: max(0, len(rivals) - limit + 1)]:
            length = min(a.end, b.end) - b.start
            if camp.frozen_near(a, b.start, params.grace) or camp.frozen_near(
                b, b.start, params.grace
            ):
                report.excused.append(Overlap(res, a.id, b.id, b.start, length, "frozen"))
            elif any(camp.expired_under(t, b.start, params.expiry_bound) for t in (a, b)):
                report.expiry_races.append(Overlap(res, a.id, b.id, b.start, length, "expired"))
            else:
                report.overlaps.append(Overlap(res, a.id, b.id, b.start, length))
        active.append(b)


def _token_order(
    camp: _Campaign, res: str, terms: list[Term], params: Params, report: Report
) -> None:
    if res == "sem":
        return  # leases run side by side: no order among them
    best: Term | None = None
    for b in terms:  # sorted by start
        if b.role == "read":  # reads share: only a write must outrank what came before
            if best is None or b.tok > best.tok:
                best = b
            continue
        if best is not None and (b.tok < best.tok or (b.tok == best.tok and b.proc != best.proc)):
            if camp.frozen_near(b, b.start, params.grace) or camp.expired_under(
                b, b.start, params.expiry_bound
            ):
                report.token_order_excused += 1
            else:
                report.token_order.append((res, f"{best.id} tok {best.tok}", f"{b.id} tok {b.tok}"))
        if best is None or b.tok > best.tok:
            best = b


def _store(camp: _Campaign, report: Report) -> None:
    high: dict[str, int] = {}
    for w in camp.store:
        res, tok = w["res"], int(w["tok"])
        if w["ok"]:
            report.writes_accepted += 1
            if tok < high.get(res, -1):
                report.stale_accepted.append(w)
            high[res] = max(high.get(res, -1), tok)
        else:
            report.writes_refused += 1


def _window_index(win: float, interval: float) -> int:
    return round(win / interval)


def _windows(camp: _Campaign, runs: list[Term], params: Params, report: Report) -> None:
    interval = params.once_interval
    by_window: dict[int, list[Term]] = defaultdict(list)
    for t in runs:
        if t.win is not None:
            by_window[_window_index(float(t.win), interval)].append(t)
    report.windows_run = len(by_window)
    for win, ts in sorted(by_window.items()):
        ok = [t.id for t in ts if t.outcome == "ok"]
        if len(ok) > 1:
            report.double_windows.append((win, ok))
        report.unconfirmed_runs += sum(
            1 for t in ts if t.outcome is not None and t.outcome.startswith("unknown")
        )
    phase = next((r for r in camp.by_kind["phase"] if r["name"] == "faults"), None)
    if phase is None or "once" not in str(camp.config.get("roles", "once")):
        return
    offset = float(phase["wall"]) - float(phase["t"])  # wall = mono + offset, one machine
    first = float(phase["t"]) + 2.0  # participants settle in
    last = camp.end
    blocked = camp.blocked(params)
    k = math.ceil((first + offset) / interval)
    while (k + 1) * interval - offset <= last:
        a, b = k * interval - offset, (k + 1) * interval - offset
        quiet = all(end < a or start > b for start, end in blocked)
        if quiet and _someone_connected(camp, a, b):
            report.owed_windows += 1
            ran = [t for t in by_window.get(k, []) if t.outcome == "ok" or t.why == "exit"]
            if not ran:
                report.missed_windows.append(k)
        k += 1


def _someone_connected(camp: _Campaign, a: float, b: float) -> bool:
    """Whether some process ran once_per and stayed connected from before `a` until `b`."""
    conns: dict[tuple[str, int], list[Record]] = defaultdict(list)
    for r in camp.by_kind["conn"]:
        conns[(r["p"], int(r["inc"]))].append(r)
    for key, start in camp.starts.items():
        if start > a - 1.0 or camp.deaths.get(key, math.inf) < b:
            continue
        if any(s1 <= b and s2 >= a - 1.0 for s1, s2 in camp.stops[key]):
            continue
        states = conns.get(key, [])
        before = [r for r in states if float(r["t"]) <= a]
        during = [r for r in states if a < float(r["t"]) <= b]
        if before and before[-1]["state"] in USABLE and not during:
            return True
    return False


def _jobs(camp: _Campaign, report: Report) -> None:
    submitted = [r["job"] for r in camp.by_kind["submit"]]
    report.jobs_enabled = bool(camp.config.get("jobs")) or bool(submitted)
    report.jobs_submitted = len(submitted)
    runs = Counter(str(r.get("tag")) for r in camp.by_kind["run"])
    report.jobs_run = sum(runs.values())
    report.jobs_run_twice = sum(1 for n in runs.values() if n > 1)
    seen = {r["job"]: r["status"] for r in camp.by_kind["result"]}
    final = {r["job"]: r["status"] for r in camp.by_kind["job_final"]}
    for job in submitted:
        status = seen.get(job) or final.get(job)
        if status not in ("DONE", "FAILED"):
            report.jobs_lost.append(job)
        elif status == "FAILED":
            report.jobs_failed += 1


def _errors(camp: _Campaign, report: Report) -> None:
    report.errors.extend(camp.by_kind["error"])
    for r in camp.by_kind["proc"]:
        if r["ev"] in ("crash", "hang"):
            report.crashes.append(r)
    for r in camp.by_kind["coord_error"]:
        report.coord_errors[str(r.get("exc"))] += 1


def _gaps_and_liveness(
    camp: _Campaign, by_res: dict[str, list[Term]], params: Params, report: Report
) -> None:
    end = camp.end
    calm = camp.phases.get("calm")
    for res, terms in sorted(by_res.items()):
        if terms[0].role not in LEADER_ROLES:
            continue
        covered = terms[0].start
        gap = 0.0
        for t in terms:  # sorted by start
            if t.start > covered:
                gap = max(gap, min(t.start, end) - covered)
            covered = max(covered, t.end)
        gap = max(gap, end - covered)
        report.gaps[res] = gap
        if calm is not None:
            at = end - params.liveness_at
            if not any(t.start <= at < t.end for t in terms):
                report.liveness.append(f"{res}: no leader {params.liveness_at} s before the end")
    if (
        calm is not None
        and "lock" in by_res
        and not any(calm <= t.start <= end for t in by_res["lock"])
    ):
        report.liveness.append("lock: not taken during the calm phase")
    for res in camp.config.get("leader_resources", []):
        if res not in by_res:
            report.liveness.append(f"{res}: never led")
