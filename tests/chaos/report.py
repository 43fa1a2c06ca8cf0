"""What the checker returns: the campaign's `Report`, its `Term`s and `Overlap`s, and `Params`.

`Report.format()` is the summary a campaign prints; `Report.violations` is
the number that must be 0 (see `checker` for each invariant).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .recipe_checks import RecipeFindings
from .records import Record

__all__ = ("Overlap", "Params", "Report", "Term")


@dataclass(frozen=True, slots=True)
class Params:
    """The campaign's parameters the checker needs (the ``config`` event overrides them)."""

    # How long after a freeze ends an overlap with the woken holder is still excused: a third
    # of the session timeout (the checker sets it from the campaign's; see `checker`).
    wake_bound: float = 1.0
    # The longest a contended resource may go without a holder, at any time: four session
    # timeouts (the checker sets it).  A holder cut off or frozen is expired by the server
    # one session timeout after it was last heard from; the next in line may itself be
    # reconnecting (a member restarted under it: up to one more); an ensemble that lost its
    # leader elects another (under one more, measured: 1-3 s); and the new holder's reads
    # and writes to take over (the CAS lock's lease + skew, 3.5 s, fits within the last).
    gap_bound: float = 12.0
    lease: float = 3.0  # once_per lease
    skew: float = 0.5  # once_per skew allowance
    once_interval: float = 1.0
    quiet_margin: float = 1.0  # extra calm needed around a window before it must run
    liveness_at: float = 0.5  # how long before the end of the calm phase a leader must be in place
    expiry_bound: float = 1.0  # how soon a holder whose session was expired by force must let go


@dataclass(slots=True)
class Term:
    id: str
    p: str
    inc: int
    role: str
    res: str
    tok: int
    start: float
    end: float
    closed: str  # "end": logged; "death": the process died; "open": neither
    why: str | None = None
    win: float | None = None
    outcome: str | None = None
    asked: float | None = None  # once_per: when the caller entered (the lock may be held since)

    @property
    def proc(self) -> tuple[str, int]:
        return (self.p, self.inc)


@dataclass(frozen=True, slots=True)
class Overlap:
    res: str
    first: str
    second: str
    start: float
    length: float
    excuse: str | None = None


@dataclass(slots=True)
class Report:
    seed: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    aimed: Counter[str] = field(default_factory=Counter)  # aim -> faults that hit its holder
    terms: Counter[str] = field(default_factory=Counter)
    java: dict[str, str] = field(default_factory=dict)  # Java participant -> its role
    java_skipped: str | None = None  # why there were none
    java_terms: Counter[str] = field(default_factory=Counter)  # resource -> terms held in Java
    java_handovers: Counter[str] = field(default_factory=Counter)  # resource -> language changes
    # Curator 5.4 latch leaderships on a node of an earlier session (CURATOR-696), refused
    java_stale_leads: int = 0
    overlaps: list[Overlap] = field(default_factory=list)
    excused: list[Overlap] = field(default_factory=list)
    expiry_races: list[Overlap] = field(default_factory=list)
    stale_accepted: list[Record] = field(default_factory=list)
    writes_accepted: int = 0
    writes_refused: int = 0
    token_order: list[tuple[str, str, str]] = field(default_factory=list)
    token_order_excused: int = 0
    windows_run: int = 0
    double_windows: list[tuple[int, list[str]]] = field(default_factory=list)
    firings: int = 0
    double_firings: list[tuple[float, list[str]]] = field(default_factory=list)
    long_gaps: list[tuple[str, float, float]] = field(default_factory=list)  # res, from, length
    wake_bound: float = 0.0
    gap_bound: float = 0.0
    owed_windows: int = 0
    missed_windows: list[int] = field(default_factory=list)
    unconfirmed_runs: int = 0
    jobs_submitted: int = 0
    jobs_lost: list[str] = field(default_factory=list)
    jobs_run: int = 0
    jobs_failed: int = 0
    jobs_run_twice: int = 0
    jobs_enabled: bool = False
    errors: list[Record] = field(default_factory=list)
    crashes: list[Record] = field(default_factory=list)
    liveness: list[str] = field(default_factory=list)
    gaps: dict[str, float] = field(default_factory=dict)
    coord_errors: Counter[str] = field(default_factory=Counter)
    stalls: int = 0
    longest_stall: float = 0.0
    caches_enabled: bool = False
    cache_views: int = 0  # caches entered (each a first full read)
    cache_events: int = 0  # node events they published
    cache_resyncs: int = 0  # FRESH after a STALE: a re-read after a lost connection
    cache_backwards: list[str] = field(default_factory=list)  # an event older than one served
    cache_final_checked: int = 0  # final views compared with the server's
    cache_final: list[str] = field(default_factory=list)  # a final view unlike the server's
    recipes: RecipeFindings = field(default_factory=RecipeFindings)  # membership, counters...
    # "Digests are not matching" lines in the members' logs: the server's own check found
    # its members' data trees apart (a ZooKeeper fault, not a violation by itself).
    server_digest_mismatches: int = 0

    @property
    def longest_gap(self) -> float:
        return max(self.gaps.values(), default=0.0)

    @property
    def violations(self) -> int:
        return (
            len(self.overlaps)
            + len(self.stale_accepted)
            + len(self.token_order)
            + len(self.double_windows)
            + len(self.double_firings)
            + len(self.long_gaps)
            + len(self.missed_windows)
            + len(self.jobs_lost)
            + len(self.errors)
            + len(self.crashes)
            + len(self.liveness)
            + len(self.cache_backwards)
            + len(self.cache_final)
            + self.recipes.violations
        )

    @property
    def ok(self) -> bool:
        return self.violations == 0

    def _java_line(self) -> str:
        if not self.java:
            why = (self.java_skipped or "none of their roles chosen").removeprefix(
                "Java participants "
            )
            return f"Java participants: none ({why})"
        java = sorted(k for k, n in self.java_terms.items() if n)
        return (
            "Java participants (Curator): "
            + ", ".join(f"{name} {role}" for name, role in sorted(self.java.items()))
            + "; their terms: "
            + (", ".join(f"{res} {self.java_terms[res]}" for res in java) or "none")
            + "; hand-overs between the languages: "
            + (", ".join(f"{res} {self.java_handovers[res]}" for res in java) or "none")
            + (
                f"; leaderships refused on a node of an earlier session (Curator 5.4's"
                f" CURATOR-696): {self.java_stale_leads}"
                if self.java_stale_leads
                else ""
            )
        )

    def format(self) -> str:
        """The campaign's summary, as printed at the end of a run."""
        cfg = self.config
        lines = [
            f"chaos campaign: seed {self.seed}, {cfg.get('seconds', '?')} s of faults + "
            f"{cfg.get('calm', '?')} s calm, {cfg.get('participants', '?')} participants, "
            f"session timeout {cfg.get('session_timeout', '?')} s",
            "faults injected: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none")
            + f" (total {sum(self.faults.values())}); hit a holder of: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.aimed.items())) or "none"),
            "terms: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.terms.items())) or "none")
            + f" (total {sum(self.terms.values())})",
            self._java_line(),
            f"overlaps outside pauses: {len(self.overlaps)}"
            f"   (while a holder was frozen or woken < {self.wake_bound:.2f} s ago: "
            f"{len(self.excused)}, longest "
            f"{max((o.length for o in self.excused), default=0.0):.3f} s; "
            f"as a forced expiry reached both holders: {len(self.expiry_races)}, longest "
            f"{max((o.length for o in self.expiry_races), default=0.0):.3f} s)",
            f"stale writes accepted: {len(self.stale_accepted)}"
            f"   (writes accepted {self.writes_accepted}, refused as stale {self.writes_refused})",
            f"token order violations: {len(self.token_order)}"
            f"   (stale terms begun by a woken holder or in a forced expiry: "
            f"{self.token_order_excused})",
            f"once_per windows: {self.windows_run} ran, {len(self.double_windows)} ran twice, "
            f"{self.owed_windows} owed, {len(self.missed_windows)} missed, "
            f"{self.unconfirmed_runs} unconfirmed",
            f"cron firings: {self.firings}, scheduled times run twice: {len(self.double_firings)}",
            (
                f"jobs: {self.jobs_submitted} submitted, {len(self.jobs_lost)} lost, "
                f"{self.jobs_failed} failed, {self.jobs_run} runs "
                f"({self.jobs_run_twice} jobs run more than once: at-least-once)"
                if self.jobs_enabled
                else "jobs: scheduler not part of this campaign"
            ),
            f"unexpected errors: {len(self.errors)}, crashes or hangs: {len(self.crashes)}, "
            f"calm-phase liveness failures: {len(self.liveness)}",
            f"longest holderless gap: {self.longest_gap:.2f} s ("
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.gaps.items()))
            + f"); longer than the bound ({self.gap_bound:.1f} s): "
            f"{len(self.long_gaps)}",
            f"participant stalls (descheduled, not SIGSTOPped): {self.stalls}, longest "
            f"{self.longest_stall:.2f} s",
            (
                f"caches: {self.cache_views} entered, {self.cache_events} node events, "
                f"{self.cache_resyncs} re-reads after a lost connection; versions gone back: "
                f"{len(self.cache_backwards)}; final views equal to the server's: "
                f"{self.cache_final_checked - len(self.cache_final)} of "
                f"{self.cache_final_checked}"
                if self.caches_enabled
                else "caches: not part of this campaign"
            ),
            *(
                [
                    f"ZooKeeper's own digest check logged {self.server_digest_mismatches} "
                    "mismatches: its members' data trees diverged (see docs/reliability.md)"
                ]
                if self.server_digest_mismatches
                else []
            ),
            "coordination errors seen by participants: "
            + (", ".join(f"{k} {n}" for k, n in sorted(self.coord_errors.items())) or "none"),
        ]
        lines[-1:-1] = [line for line in self.recipes.lines() if not line.startswith("  ")]
        for o in self.overlaps[:10]:
            lines.append(
                f"  OVERLAP {o.res}: {o.first} / {o.second} at {o.start:.3f} for {o.length:.3f} s"
            )
        for w in self.stale_accepted[:10]:
            lines.append(f"  STALE WRITE ACCEPTED {w}")
        for res, a, b in self.token_order[:10]:
            lines.append(f"  TOKEN ORDER {res}: {a} then {b}")
        for win, ids in self.double_windows[:10]:
            lines.append(f"  WINDOW RAN TWICE #{win}: {ids}")
        for at, ids in self.double_firings[:10]:
            lines.append(f"  CRON TIME RAN TWICE {at}: {ids}")
        for res, at, length in self.long_gaps[:10]:
            lines.append(f"  NO HOLDER {res} from {at:.3f} for {length:.2f} s")
        for win in self.missed_windows[:10]:
            lines.append(f"  WINDOW MISSED #{win}")
        for job in self.jobs_lost[:10]:
            lines.append(f"  JOB LOST {job}")
        for e in self.errors[:10]:
            lines.append(f"  ERROR {e.get('p')}.{e.get('inc')} {e.get('role')}: {e.get('exc')}")
        for c in self.crashes[:10]:
            lines.append(f"  CRASH/HANG {c}")
        for text in self.liveness[:10]:
            lines.append(f"  LIVENESS {text}")
        for text in self.cache_backwards[:10]:
            lines.append(f"  CACHE WENT BACK {text}")
        for text in self.cache_final[:10]:
            lines.append(f"  CACHE FINAL VIEW {text}")
        lines.extend(line for line in self.recipes.lines() if line.startswith("  "))
        verdict = "OK" if self.ok else "FAILED"
        lines.append(f"verdict: {verdict} ({self.violations} violations), seed {self.seed}")
        return "\n".join(lines)
