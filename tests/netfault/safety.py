"""The safety checks of the network-fault tier: pure functions over the participants' events.

Violations (each scenario asserts there are none):

- **overlaps**: two terms of one resource (the latch, the mutex) of different processes whose bodies ran at
  the same time.  Excused only while one of the two holders was frozen (it
  logged a stall: the machine descheduled it) plus a third of the session
  timeout after it woke, the margin between SUSPENDED and the server's
  expiry (the rule of `tests.chaos.checker`).  A term still open when its
  process exits or the log ends lasts until then.
- **tokens**: in order of their start, each term's token is larger than
  every earlier term's; equal only for the same process (a latch re-granted
  on the same node after SUSPENDED).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..chaos.records import Record

__all__ = ("Term", "events", "terms", "violations")


@dataclass(slots=True)
class Term:
    id: str
    p: str
    res: str
    tok: int
    start: float
    end: float
    closed: bool  # its end was logged


def events(records: Iterable[Record], p: str, kind: str, **match: object) -> list[Record]:
    """The events of kind ``kind`` of participant ``p`` whose fields equal ``match``, in time order."""
    found = [
        r
        for r in records
        if r.get("p") == p and r["k"] == kind and all(r.get(k) == v for k, v in match.items())
    ]
    return sorted(found, key=lambda r: float(r["t"]))


def terms(records: Sequence[Record], res: str | None = None) -> list[Term]:
    """Every term (of resource ``res``, if given), with its end (its process's exit, or the
    last event, when not logged)."""
    last = max((float(r["t"]) for r in records), default=0.0)
    exits = {r["p"]: float(r["t"]) for r in records if r["k"] == "exit"}
    ends = {r["id"]: float(r["t"]) for r in records if r["k"] == "end"}
    found = []
    for r in records:
        if r["k"] != "term" or (res is not None and r["res"] != res):
            continue
        closed = r["id"] in ends
        end = ends[r["id"]] if closed else exits.get(r["p"], last)
        found.append(Term(r["id"], r["p"], r["res"], int(r["tok"]), float(r["t"]), end, closed))
    return sorted(found, key=lambda term: term.start)


def violations(records: Sequence[Record], session_timeout: float) -> list[str]:
    """What broke safety, one line each (empty: nothing)."""
    found: list[str] = []
    all_terms = terms(records)
    wake = session_timeout / 3
    stalls: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if r["k"] == "stall":
            stalls.setdefault(r["p"], []).append((float(r["t0"]), float(r["t1"]) + wake))

    def excused(a: Term, b: Term, t0: float, t1: float) -> bool:
        spans = stalls.get(a.p, []) + stalls.get(b.p, [])
        return any(s0 - 0.05 <= t0 and t1 <= s1 for s0, s1 in spans)

    for i, a in enumerate(all_terms):
        for b in all_terms[i + 1 :]:
            if a.res != b.res or a.p == b.p:
                continue
            t0, t1 = max(a.start, b.start), min(a.end, b.end)
            if t1 > t0 and not excused(a, b, t0, t1):
                found.append(
                    f"overlap on {a.res}: {a.id} and {b.id} for {t1 - t0:.3f}s at {t0:.3f}"
                )
    for i, b in enumerate(all_terms):
        for a in all_terms[:i]:
            if a.res == b.res and (b.tok < a.tok or (b.tok == a.tok and a.p != b.p)):
                found.append(
                    f"token order on {b.res}: {b.id} ({b.tok:#x}) after {a.id} ({a.tok:#x})"
                )
    return found
