"""The checker's rules for membership, counters and double barriers (see `checker`).

Pure functions over the events of the ``members``, ``count`` and ``barrier``
roles (`roles`), given the campaign rebuilt by `checker`; their findings go
to `RecipeFindings`, a part of the `Report`.  Every list of findings is a
violation and must be empty.

**Membership** (``group``: a `group_member` of ``/group``; ``sd``: a
`service_discovery` registration): a participant is *settled* at time t when
for the whole of ``[t - settle, t]`` its process was up, had a usable
connection that did not change (no SUSPENDED, no reconnection, no new
session), was not frozen (SIGSTOP or stall), no participant fault hit it and
no ensemble fault happened; ``settle`` is the session timeout plus
`member_grace` (2 s for the campaign's 3 s).  Sampled every 0.25 s:

- *missing*: a settled watcher's view (its latest, polled every 0.1 s)
  must be fresh and list every settled member that joined before ``t -
  settle``.  A member that got a new session has its node again within a
  session timeout (the old session's ephemeral node, if the client gave up
  on it before the server did, goes within one), and the watcher's cache
  shows it within milliseconds; the grace is for a loaded machine.
- *ghosts*: a settled watcher's view must not list a member whose process
  died (SIGKILL, a crash, an exit) more than ``session timeout +
  member_grace`` before: the server expires the dead session one session
  timeout after it last heard from it, rounded up to its tick (0.2 s), and
  its watch event reaches the watcher in milliseconds.  An ensemble fault
  (a restarted member, a new leader) between the death and then moves the
  deadline to its end plus the same bound: a new leader gives every session
  a fresh timeout.

**Counters** (``shared``: a `shared_count`, ``long``: an `atomic_long`;
every increment is ``add(1)``):

- *doubled*: two acknowledged increments that returned the same value (a
  lost update: two compare-and-sets on one version);
- *order*: an acknowledged increment that began after another was
  acknowledged must return a larger value (writes are linearizable); a value
  read on a session must not be smaller than one that session saw (read or
  returned) before the read began;
- *final*: the value read after the calm phase (`counter_final`) must lie
  in ``[acked, acked + unknown]`` and be at least the largest value
  returned: an increment whose call raised (``cunk``) or never returned (a
  killed process) may have landed or not.

**Double barriers** (a round ``k`` of `BARRIER_MEMBERS` at
``/barrier/r<k>``).  What Curator's ``DistributedDoubleBarrier`` promises,
and `double_barrier` with it, under faults: ``enter()`` returns only once
`members` participant nodes were there together at one read (or once the
``ready`` node, made by one who saw them, is there); ``leave()`` returns
only once every participant node is gone.  A node goes when its
participant leaves, gives up entering, or loses its session: expiry lets
the others out early, which is promised (Curator's leave copes the same
way), so it is excused, not a violation.  Checked:

- *early enters*: a participant passed ``enter()`` (``bin``) before
  `members` distinct participants had begun to join that round (``bjoin``,
  logged before the node is created).  No excuse: a node exists only after
  its ``bjoin``.
- *early leaves*: a participant's ``leave()`` returned (``bout``) although
  from the moment it began to leave (``bleave``) until then some other
  participant's node was certainly there at every instant: a node is
  certainly there from its participant's ``bin`` (created before
  ``enter()`` returned) until its ``bleave``, unless its process died, and
  unless its session may have ended (a forced expiry, a network pause or
  SIGSTOP past the session timeout, a stall past two thirds of it, a kill,
  a connection event saying LOST or a new session, from its join until a
  session timeout after the ``bout``): then only until a session timeout
  before the first such sign.  A leave that only such a session end lets
  out early is counted apart (excused).  A late arrival is not a rival: it
  goes in at once while ``ready`` is there (``members`` is a threshold),
  even when the others are already leaving, so its node may appear only
  after theirs were all gone, and they rightly left then.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .records import Record

if TYPE_CHECKING:
    from .checker import _Campaign

__all__ = ("RecipeFindings", "check_recipes")

SAMPLE = 0.25  # membership views are checked this often (s)
ENSEMBLE_KINDS = ("member_restart", "leader_kill")
USABLE = ("CONNECTED", "RECONNECTED")
SESSION_FAULTS = ("expire", "net_pause_long", "stop_long", "kill")

Proc = tuple[str, int]


@dataclass(slots=True)
class RecipeFindings:
    """What the membership, counter and barrier rules found (see the module docstring)."""

    members_enabled: bool = False
    member_settle: float = 0.0
    member_samples: int = 0  # (watcher, kind, time) triples checked
    member_listings: int = 0  # (watcher, member) pairs found listed as they must be
    members_missing: list[str] = field(default_factory=list)
    members_ghosts: list[str] = field(default_factory=list)
    counters_enabled: bool = False
    counter_begun: dict[str, int] = field(default_factory=dict)
    counter_acked: dict[str, int] = field(default_factory=dict)
    counter_final: dict[str, int] = field(default_factory=dict)
    counter_reads: int = 0
    counters_doubled: list[str] = field(default_factory=list)
    counters_order: list[str] = field(default_factory=list)
    counters_final: list[str] = field(default_factory=list)
    barriers_enabled: bool = False
    barrier_rounds: int = 0  # rounds someone joined
    barrier_full: int = 0  # rounds someone passed
    barrier_passes: int = 0
    barrier_outs: int = 0
    barrier_stuck: int = 0  # leaves that gave up waiting
    barrier_leave_excused: int = 0  # outs before a participant whose session ended had left
    barriers_early_enter: list[str] = field(default_factory=list)
    barriers_early_leave: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return sum(
            len(x)
            for x in (
                self.members_missing,
                self.members_ghosts,
                self.counters_doubled,
                self.counters_order,
                self.counters_final,
                self.barriers_early_enter,
                self.barriers_early_leave,
            )
        )

    def lines(self) -> list[str]:
        """The report's lines for these recipes, then one line per finding (at most 10 each)."""
        out: list[str] = []
        if self.members_enabled:
            out.append(
                f"membership: {self.member_samples} views checked (settled {self.member_settle:.1f}"
                f" s), {self.member_listings} listings as owed; live members missing: "
                f"{len(self.members_missing)}, dead members still listed: "
                f"{len(self.members_ghosts)}"
            )
        if self.counters_enabled:
            parts = []
            for c in sorted(self.counter_begun):
                acked, begun = self.counter_acked.get(c, 0), self.counter_begun[c]
                final = self.counter_final.get(c)
                shown = "not read" if final is None else str(final)
                parts.append(f"{c} {acked} acked + {begun - acked} unknown, final {shown}")
            out.append(
                "counters: "
                + ("; ".join(parts) or "no increment")
                + f"; {self.counter_reads} reads; doubled: {len(self.counters_doubled)}, "
                f"out of order: {len(self.counters_order)}, final outside its range: "
                f"{len(self.counters_final)}"
            )
        if self.barriers_enabled:
            out.append(
                f"barriers: {self.barrier_rounds} rounds joined, {self.barrier_full} passed, "
                f"{self.barrier_passes} enters, {self.barrier_outs} leaves "
                f"({self.barrier_stuck} gave up waiting, {self.barrier_leave_excused} early "
                f"past a lost session); early enters: {len(self.barriers_early_enter)}, "
                f"early leaves: {len(self.barriers_early_leave)}"
            )
        for label, found in (
            ("MEMBER MISSING", self.members_missing),
            ("MEMBER GHOST", self.members_ghosts),
            ("COUNTER DOUBLED", self.counters_doubled),
            ("COUNTER ORDER", self.counters_order),
            ("COUNTER FINAL", self.counters_final),
            ("BARRIER EARLY ENTER", self.barriers_early_enter),
            ("BARRIER EARLY LEAVE", self.barriers_early_leave),
        ):
            out.extend(f"  {label} {text}" for text in found[:10])
        return out


def check_recipes(camp: _Campaign, findings: RecipeFindings) -> None:
    """Apply the three rule sets to `camp`, filling `findings`."""
    roles = str(camp.config.get("roles", "")).split(",")
    timeout = float(camp.config.get("session_timeout", 3.0))
    grace = float(camp.config.get("member_grace", 2.0))
    findings.members_enabled = "members" in roles or bool(camp.by_kind["mview"])
    findings.counters_enabled = "count" in roles or bool(camp.by_kind["cadd"])
    findings.barriers_enabled = "barrier" in roles or bool(camp.by_kind["bjoin"])
    if findings.members_enabled:
        _members(camp, findings, timeout, grace)
    if findings.counters_enabled:
        _counters(camp, findings)
    if findings.barriers_enabled:
        members = int(camp.config.get("barrier_members", 3))
        _barriers(camp, findings, members, timeout)


def _proc(r: Record) -> Proc:
    return (str(r["p"]), int(r["inc"]))


def _overlaps(spans: list[tuple[float, float]], a: float, b: float) -> bool:
    return any(t0 <= b and t1 >= a for t0, t1 in spans)


# --- membership ----------------------------------------------------------------------------


class _Timeline:
    """Who was settled when (see the module docstring), from the campaign's events."""

    def __init__(self, camp: _Campaign, settle: float) -> None:
        self.camp = camp
        self.settle = settle
        self.conns: dict[Proc, list[tuple[float, str]]] = defaultdict(list)
        for r in camp.by_kind["conn"]:
            self.conns[_proc(r)].append((float(r["t"]), str(r["state"])))
        self.conn_times = {p: [t for t, _ in cs] for p, cs in self.conns.items()}
        self.hits: dict[Proc, list[tuple[float, float]]] = defaultdict(list)
        self.ensemble: list[tuple[float, float]] = []
        for r in camp.by_kind["fault"]:
            span = (float(r["t0"]), float(r["t1"]))
            if r["kind"] in ENSEMBLE_KINDS:
                self.ensemble.append(span)
            elif r.get("p") is not None:
                self.hits[(str(r["p"]), int(r["inc"]))].append(span)

    def settled(self, proc: Proc, t: float) -> bool:
        a = t - self.settle
        camp = self.camp
        if camp.starts.get(proc, math.inf) > a or camp.deaths.get(proc, math.inf) <= t:
            return False
        if _overlaps(self.ensemble, a, t) or _overlaps(self.hits[proc], a, t):
            return False
        if _overlaps(camp.stops.get(proc, []), a, t):
            return False
        times = self.conn_times.get(proc, [])
        i = bisect.bisect_right(times, a)
        if i == 0 or self.conns[proc][i - 1][1] not in USABLE:
            return False
        return i == bisect.bisect_right(times, t)  # no connection event since

    def dead_by(self, proc: Proc, bound: float) -> float:
        """When a dead member must be gone from every settled view (inf: not dead)."""
        died = self.camp.deaths.get(proc, math.inf)
        if math.isinf(died):
            return died
        deadline = died + bound
        moved = True
        while moved:  # an ensemble fault between the death and the deadline moves it on
            moved = False
            for t0, t1 in self.ensemble:
                if t0 <= deadline and t1 >= died and t1 + bound > deadline:
                    deadline, moved = t1 + bound, True
        return deadline


def _members(camp: _Campaign, f: RecipeFindings, timeout: float, grace: float) -> None:
    settle = timeout + grace
    f.member_settle = settle
    line = _Timeline(camp, settle)
    joined: dict[tuple[Proc, str], list[list[float]]] = defaultdict(list)  # [join, leave]
    for r in sorted(
        camp.by_kind["mjoin"] + camp.by_kind["mleave"], key=lambda r: (float(r["t"]), r["k"])
    ):
        spans = joined[(_proc(r), str(r["kind"]))]
        if r["k"] == "mjoin":
            spans.append([float(r["t"]), math.inf])
        elif spans and math.isinf(spans[-1][1]):
            spans[-1][1] = float(r["t"])
    for (proc, _), spans in joined.items():
        for span in spans:
            span[1] = min(span[1], camp.deaths.get(proc, math.inf))
    views: dict[tuple[Proc, str], tuple[list[float], list[Record]]] = {}
    for r in camp.by_kind["mview"]:  # sorted by time
        times, rs = views.setdefault((_proc(r), str(r["kind"])), ([], []))
        times.append(float(r["t"]))
        rs.append(r)
    phase = camp.phases.get("faults")
    if phase is None:
        return
    ghost_bound = timeout + grace

    def member(key: tuple[Proc, str], t: float) -> bool:
        return any(a <= t - settle and t < b for a, b in joined.get(key, []))

    open_missing: set[tuple[Proc, str, Proc]] = set()
    open_ghost: set[tuple[Proc, str, str]] = set()
    t = phase + settle
    while t <= camp.end:
        settled = {proc for proc in camp.starts if line.settled(proc, t)}
        missing_now: set[tuple[Proc, str, Proc]] = set()
        ghost_now: set[tuple[Proc, str, str]] = set()
        for (watcher, kind), (times, rs) in views.items():
            if watcher not in settled or not member((watcher, kind), t):
                continue
            i = bisect.bisect_right(times, t)
            if i == 0:
                continue
            view = rs[i - 1]
            listed = set(view["members"])
            f.member_samples += 1
            for m in settled:
                if not member((m, kind), t):
                    continue
                if f"{m[0]}.{m[1]}" in listed and view.get("fresh"):
                    f.member_listings += 1
                    continue
                key = (watcher, kind, m)
                missing_now.add(key)
                if key not in open_missing:
                    f.members_missing.append(
                        f"{kind}: {watcher[0]}.{watcher[1]} at {t:.2f} does not list "
                        f"{m[0]}.{m[1]} ({'stale' if not view.get('fresh') else 'fresh'} view of "
                        f"{float(view['t']):.2f}: {sorted(listed)})"
                    )
            for mid in listed:
                name, _, inc = mid.rpartition(".")
                if not inc.isdigit():
                    continue
                deadline = line.dead_by((name, int(inc)), ghost_bound)
                if t > deadline:
                    gkey = (watcher, kind, mid)
                    ghost_now.add(gkey)
                    if gkey not in open_ghost:
                        died = camp.deaths[(name, int(inc))]
                        f.members_ghosts.append(
                            f"{kind}: {watcher[0]}.{watcher[1]} at {t:.2f} lists {mid}, "
                            f"dead since {died:.2f} (due to go by {deadline:.2f})"
                        )
        open_missing, open_ghost = missing_now, ghost_now  # one finding per episode
        t += SAMPLE


# --- counters ------------------------------------------------------------------------------


def _counters(camp: _Campaign, f: RecipeFindings) -> None:
    begun: dict[str, int] = defaultdict(int)
    for r in camp.by_kind["cadd"]:
        begun[str(r["c"])] += 1
    acks: dict[str, list[Record]] = defaultdict(list)
    for r in camp.by_kind["cack"]:
        acks[str(r["c"])].append(r)
    f.counter_begun = dict(begun)
    f.counter_acked = {c: len(rs) for c, rs in acks.items()}
    f.counter_reads = len(camp.by_kind["cread"])
    for c, rs in sorted(acks.items()):
        by_value: dict[int, list[str]] = defaultdict(list)
        for r in rs:
            by_value[int(r["v"])].append(str(r["n"]))
        for v, keys in sorted(by_value.items()):
            if len(keys) > 1:
                f.counters_doubled.append(f"{c}: value {v} returned to {keys}")
        # Linearizable writes: an add begun after another returned must return more.
        done = sorted((float(r["t"]), int(r["v"])) for r in rs)
        ends = [t for t, _ in done]
        best: list[int] = []
        for _, v in done:
            best.append(max(v, best[-1]) if best else v)
        for r in rs:
            i = bisect.bisect_left(ends, float(r["t0"]))
            if i and int(r["v"]) <= best[i - 1]:
                f.counters_order.append(
                    f"{c}: {r['n']} begun at {float(r['t0']):.3f} returned {r['v']}, after "
                    f"{best[i - 1]} was returned"
                )
    # Per session: a value read is never below one that session saw before the read began.
    seen: dict[tuple[Proc, Any, str], list[tuple[float, float, int, str]]] = defaultdict(list)
    for r in [*camp.by_kind["cack"], *camp.by_kind["cread"]]:
        if r.get("sid") is None:
            continue
        what = "read" if r["k"] == "cread" else f"add {r['n']}"
        seen[(_proc(r), r["sid"], str(r["c"]))].append(
            (float(r["t0"]), float(r["t"]), int(r["v"]), what)
        )
    for (proc, _, c), obs in seen.items():
        obs.sort(key=lambda o: o[1])
        ends = [o[1] for o in obs]
        best = []
        for o in obs:
            best.append(max(o[2], best[-1]) if best else o[2])
        for t0, t1, v, what in obs:
            i = bisect.bisect_left(ends, t0)
            if what == "read" and i and v < best[i - 1]:
                f.counters_order.append(
                    f"{c}: {proc[0]}.{proc[1]} read {v} at {t1:.3f} after seeing {best[i - 1]}"
                )
    finals = camp.by_kind["counter_final"]
    if not finals:
        return
    f.counter_final = {str(c): int(v) for c, v in finals[-1]["values"].items()}
    for c in sorted(set(begun) | set(f.counter_final)):
        final = f.counter_final.get(c)
        acked, total = f.counter_acked.get(c, 0), begun.get(c, 0)
        top = max((int(r["v"]) for r in acks.get(c, [])), default=0)
        if final is None:
            f.counters_final.append(f"{c}: not read at the end")
        elif not acked <= final <= total or final < top:
            f.counters_final.append(
                f"{c}: final {final}, not in [{acked} acked, {total} begun] "
                f"or below the largest value returned ({top})"
            )


# --- barriers ------------------------------------------------------------------------------


def _barriers(camp: _Campaign, f: RecipeFindings, members: int, timeout: float) -> None:
    by_round: dict[int, dict[str, dict[Proc, float]]] = defaultdict(lambda: defaultdict(dict))
    for kind in ("bjoin", "bin", "bleave", "bout", "bstuck", "bnot"):
        for r in camp.by_kind[kind]:
            by_round[int(r["r"])][kind].setdefault(_proc(r), float(r["t"]))
    f.barrier_rounds = len(by_round)
    lost = _session_ends(camp)
    for k, ev in sorted(by_round.items()):
        joins = sorted(ev["bjoin"].values())
        if ev["bin"]:
            f.barrier_full += 1
        f.barrier_passes += len(ev["bin"])
        f.barrier_outs += len(ev["bout"])
        f.barrier_stuck += len(ev["bstuck"])
        for proc, t in sorted(ev["bin"].items(), key=lambda x: x[1]):
            before = bisect.bisect_right(joins, t)
            if before < members:
                f.barriers_early_enter.append(
                    f"round {k}: {proc[0]}.{proc[1]} entered at {t:.3f} after {before} of "
                    f"{members} had begun to join"
                )
        for proc, out in sorted(ev["bout"].items(), key=lambda x: x[1]):
            began = ev["bleave"].get(proc, ev["bin"].get(proc, out))
            held, excused = _held(camp, ev, proc, began, out, lost, timeout)
            there = _covering(held, began, out)
            if there is not None and not _watched_another(camp, ev, proc, there, began, out):
                (p, i), a, b = there
                f.barriers_early_leave.append(
                    f"round {k}: {proc[0]}.{proc[1]} left at {out:.3f} (leaving since "
                    f"{began:.3f}) while a node was there throughout: {p}.{i} [{a:.3f}, {b:.3f}]"
                )
            elif excused and _covering(excused, began, out) is not None:
                f.barrier_leave_excused += 1


def _held(
    camp: _Campaign,
    ev: dict[str, dict[Proc, float]],
    leaver: Proc,
    began: float,
    out: float,
    lost: dict[Proc, list[float]],
    timeout: float,
) -> tuple[list[tuple[Proc, float, float]], list[tuple[Proc, float, float]]]:
    """The others' nodes certainly there while `leaver` waited, and those excused.

    A participant's node is certainly there from its ``bin`` until its
    ``bleave`` (it is created before ``enter()`` returns, deleted after
    ``leave()`` is called), unless its process died or its session may have
    ended: then only until a session timeout before the first sign of that
    (its node may have gone as soon as the server last heard from it).
    Returns (certain spans, spans cut short by a session end, as they would
    have been without it).
    """
    held: list[tuple[Proc, float, float]] = []
    excused: list[tuple[Proc, float, float]] = []
    for other, passed in ev["bin"].items():
        if other == leaver:
            continue
        end = min(ev["bleave"].get(other, math.inf), camp.deaths.get(other, math.inf))
        joined = ev["bjoin"].get(other, passed)
        signs = [t for t in lost.get(other, []) if joined - timeout <= t <= out + timeout]
        cut = min(end, min(signs, default=math.inf) - timeout)
        if cut > passed:
            held.append((other, passed, cut))
        if cut < end and end > passed:
            excused.append((other, passed, end))
    return held, excused


def _covering(
    spans: list[tuple[Proc, float, float]], a: float, b: float
) -> tuple[Proc, float, float] | None:
    """One of `spans` that covers all of ``[a, b]``, if any.

    One node, not several in turn: a leaver that saw the lowest node go and
    then only a node that arrived late (through ``ready``, while the others
    were leaving) may return, as Curator's ``leave()`` does.
    """
    return next((s for s in spans if s[1] <= a and b <= s[2]), None)


def _watched_another(
    camp: _Campaign,
    ev: dict[str, dict[Proc, float]],
    leaver: Proc,
    there: tuple[Proc, float, float],
    began: float,
    out: float,
) -> bool:
    """Whether some third node may have existed during the leave (then leaving is allowed).

    Curator's ``leave()`` (and ours): a leaver that is not the lowest deletes
    its node and waits for the lowest to go; it then lists again and returns
    if one node is left, whoever's.  So it may return while one other node is
    still there, provided a third one (the lowest it waited on) went during
    its wait.  A third node may exist from its participant's join until its
    ``leave()`` returned (or its process died).
    """
    for other, joined in ev["bjoin"].items():
        if other in (leaver, there[0]):
            continue
        end = min(ev["bout"].get(other, math.inf), camp.deaths.get(other, math.inf))
        if joined <= out and end >= began:
            return True
    return False


def _session_ends(camp: _Campaign) -> dict[Proc, list[float]]:
    """Times at which a participant's session may have ended (its ephemeral nodes gone)."""
    out: dict[Proc, list[float]] = defaultdict(list)
    for r in camp.by_kind["fault"]:
        if r["kind"] in SESSION_FAULTS and r.get("p") is not None:
            out[(str(r["p"]), int(r["inc"]))] += [float(r["t0"]), float(r["t1"])]
    first: set[Proc] = set()
    for r in camp.by_kind["conn"]:  # sorted by time
        proc = _proc(r)
        new = bool(r.get("new")) and proc in first  # the process's first session is no loss
        first.add(proc)
        if r["state"] not in ("CONNECTED", "RECONNECTED", "SUSPENDED") or new:
            out[proc].append(float(r["t"]))
    for t0, t1, proc in camp.stalls:
        if t1 - t0 > 2 * float(camp.config.get("session_timeout", 3.0)) / 3:
            out[proc] += [t0, t1]
    return out
