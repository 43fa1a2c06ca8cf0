"""Clock skew for the CAS lock and `once_per`: client processes whose wall clock is off.

The lock's rule (docs/cas-lock.md): the holder writes ``lease_expires`` =
its wall clock + ``lease``; a contender takes over once its own wall clock is
past ``lease_expires + skew``; the holder, which cannot renew, cancels its
body ``lease - skew`` after its last landed write, on its monotonic clock.
With ``d`` = the contender's clock minus the holder's, the contender takes
over at ``t_w + lease + skew - d`` and the holder has let go by
``t_w + lease - skew``: safe while ``d < 2 * skew`` (the documented bound,
clocks agreeing within ``skew``, keeps a margin of ``skew - d``).  Beyond
it the two bodies overlap for about ``d - 2 * skew`` (no fencing in the
lock itself: the contender's token is still the larger, so a store that
refuses smaller tokens refuses the old holder).  And a clock off by more
than ``2/3 lease + skew`` takes over a lease its holder is renewing: the
holder learns it at its next renewal (a third of the lease later) and its
body is cancelled then.

Each case runs two processes (``libfaketime`` shifts their wall clock;
their monotonic clocks, on which they log, stay the machine's) under lease
3 s and skew 0.5 s: a holder that takes the lock (or a ``once_per`` window,
whose job runs long) and holds it, a contender that waits for it (or calls
``once_per`` every 0.2 s); then the holder is cut off from the ensemble
(`NetworkLab.partition`), so it cannot renew, or left healthy.  A third kind
of case runs three ``once_per`` callers, clocks ``-d``, ``0`` and ``+d``, on
2 s windows: no window runs twice and none starts more than ``d`` early.

On demand (``-m netfault``), skipped with the reason where a `NetworkLab`
or libfaketime cannot run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab, ZooKeeperEnsemble

from ..chaos.records import Record
from .figures import report
from .safety import Term, events, terms, violations
from .scene import Scene
from .skew import faketime_env, faketime_unavailable, measured_offsets

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]

T = 8.0  # the clients' session timeout (s): LOST comes after the lease deadline
LEASE = 3.0
SKEW = 0.5
SLACK = 0.5  # scheduling on a loaded 2-core machine (s)
YEAR = 365 * 86400.0  # a once_per window no case straddles


@pytest.fixture(autouse=True)
def _faketime() -> None:
    reason = faketime_unavailable()
    if reason is not None:
        pytest.skip(f"no clock skew here: {reason}")


@dataclass(frozen=True, slots=True)
class Case:
    """A holder with clock ``holder`` and a contender with clock ``contender`` (s off true)."""

    name: str
    holder: float
    contender: float
    cut: bool  # the holder cut off from the ensemble once the contender waits

    @property
    def d(self) -> float:
        return self.contender - self.holder


def clocked(role: str, path: str, *extra: str) -> list[str]:
    return ["--role", role, "--path", path, "--lease", str(LEASE), "--skew", str(SKEW), *extra]


def check_clocks(records: Sequence[Record], wanted: dict[str, float], since: float) -> None:
    """Each process ran on its wanted wall clock and on the shared monotonic clock."""
    offsets = measured_offsets(records)
    for name, offset in wanted.items():
        assert abs(offsets[name] - offset) < 0.1, (name, offsets[name], offset)
        start = events(records, name, "start")[0]
        assert since - 1 <= float(start["t"]) <= time.monotonic(), start  # not a faked monotonic


def two_holders(
    lab: NetworkLab, zk: ZooKeeperEnsemble, directory: Path, case: Case, role: str
) -> tuple[Term, Term, list[Record]]:
    """Run ``case`` for the lock (``role`` lock) or a long once_per job (``role`` once).

    Returns the holder's term, the contender's first term and every record.
    """
    directory.mkdir()
    h, c = f"{case.name}-h", f"{case.name}-c"
    path = f"/{role}-{case.name}"
    scene = Scene(lab, directory, T)
    since = time.monotonic()
    if role == "lock":
        holder = clocked("lock", path, "--terms", "1")
        contender = clocked("lock", path, "--terms", "1", "--hold", "1.0")
    else:
        window = ["--interval", str(YEAR), "--terms", "1"]
        holder = clocked("once", path, *window)
        contender = clocked("once", path, *window, "--hold", "1.0", "--every", "0.2")
    scene.client(h, zk.members, module="tests.netfault.clocked", args=holder,
                 env=faketime_env(case.holder))  # fmt: skip
    scene.wait(f"{h} holding", lambda rs: events(rs, h, "term") or None, 30)
    scene.client(c, zk.members, module="tests.netfault.clocked", args=contender,
                 env=faketime_env(case.contender))  # fmt: skip
    scene.wait(f"{c} connected", lambda rs: events(rs, c, "conn", state="CONNECTED") or None, 30)
    time.sleep(1.0)  # the contender waits on the record (or calls once_per) a while
    if case.cut:
        lab.partition([h], zk.members)
    scene.wait(f"{c} holding", lambda rs: events(rs, c, "term") or None, 3 * LEASE)
    scene.wait(f"{h} let go", lambda rs: events(rs, h, "end") or None, 2 * LEASE)
    scene.wait(f"{c} done", lambda rs: events(rs, c, "end") or None, 2 * LEASE)
    lab.heal()
    codes = scene.stop()
    records = scene.records()
    detail = scene.logs()
    assert codes == {h: 0, c: 0}, (codes, detail)
    check_clocks(records, {h: case.holder, c: case.contender}, since)
    first, second = terms(records)[:2]
    assert (first.p, second.p) == (h, c), (first, second)
    # Whatever the clocks, the token of each new holder is larger: fencing still works.
    assert second.tok > first.tok, (first, second)
    return first, second, records


def lost_reason(records: Sequence[Record], term: Term) -> str:
    return next((str(r["reason"]) for r in records if r["k"] == "lost" and r["id"] == term.id), "")


WITHIN = [Case("ahead", 0.0, 0.4, cut=True), Case("behind", 0.4, 0.0, cut=True)]
BEYOND = [Case("far", 0.0, 2.0, cut=True), Case("lease", -4.0, 0.0, cut=False)]


@pytest.mark.parametrize("role", ["lock", "once"])
def test_within_the_skew_one_holder_at_a_time(lab: NetworkLab, tmp_path: Path, role: str) -> None:
    """Clocks off by less than ``skew``: the cut-off holder lets go before the other takes over."""
    with lab.ensemble(3) as zk:
        for case in WITHIN:
            first, second, records = two_holders(lab, zk, tmp_path / case.name, case, role)
            gap = second.start - first.end
            print(
                f"{role}, contender's clock {case.d:+.1f}s from the holder's: the holder "
                f"({lost_reason(records, first)}) let go {gap:.2f}s before the contender took over"
            )
            assert "lease ran out" in lost_reason(records, first), records
            # The margin is 2 * skew - d, less what the takeover takes (a read and a CAS).
            assert 2 * SKEW - case.d - SLACK <= gap <= 2 * SKEW - case.d + SLACK, gap
            assert violations(records, T) == []
            report(f"clock skew, {role}, within", d=case.d, gap=gap, overlap=0.0)


@pytest.mark.parametrize("role", ["lock", "once"])
def test_beyond_the_skew_two_holders_as_documented(
    lab: NetworkLab, tmp_path: Path, role: str
) -> None:
    """Clocks off by more than ``2 * skew``: the bodies overlap by about ``d - 2 * skew``;
    off by more than the lease, a renewing holder loses the lock at its next renewal."""
    with lab.ensemble(3) as zk:
        for case in BEYOND:
            first, second, records = two_holders(lab, zk, tmp_path / case.name, case, role)
            overlap = first.end - second.start
            reason = lost_reason(records, first)
            print(
                f"{role}, contender's clock {case.d:+.1f}s from the holder's "
                f"({'holder cut off' if case.cut else 'holder healthy'}): both ran for "
                f"{overlap:.2f}s; the holder: {reason}"
            )
            assert overlap > 0, (first, second)
            if case.cut:
                assert "lease ran out" in reason, reason
                expected = case.d - 2 * SKEW
                assert expected - SLACK <= overlap <= expected + SLACK, overlap
            else:
                # Taken over at once; found out at the next renewal, a third of the lease on.
                assert "lease ran out" not in reason, reason
                assert overlap <= LEASE / 3 + SLACK, overlap
            report(f"clock skew, {role}, beyond", d=case.d, gap=-overlap, overlap=overlap)


@pytest.mark.parametrize("offset", [0.4, 1.5])
def test_once_per_windows_start_at_most_the_offset_early(
    lab: NetworkLab, tmp_path: Path, offset: float
) -> None:
    """Three callers, clocks ``-d``, ``0``, ``+d``, 2 s windows: each window runs once at most,
    never twice at once, and no run starts more than its caller's ``d`` early."""
    interval, seconds = 2.0, 12.0
    clocks = {"minus": -offset, "zero": 0.0, "plus": offset}
    with lab.ensemble(3) as zk:
        scene = Scene(lab, tmp_path, T)
        since = time.monotonic()
        for name, clock in clocks.items():
            args = clocked("once", "/windows", "--interval", str(interval), "--hold", "0.3",
                           "--every", "0.1")  # fmt: skip
            scene.client(name, zk.members, module="tests.netfault.clocked", args=args,
                         env=faketime_env(clock))  # fmt: skip
        scene.wait("a run", lambda rs: terms(rs, "once") or None, 30)
        time.sleep(seconds)
        codes = scene.stop()
        records = scene.records()
    detail = scene.logs()
    assert all(code == 0 for code in codes.values()), (codes, detail)
    check_clocks(records, clocks, since)
    here = time.time() - time.monotonic()
    outcomes = {str(r["id"]): str(r["res"]) for r in records if r["k"] == "outcome"}
    runs = terms(records, "once")
    by_window: dict[float, list[str]] = {}
    early: list[float] = []
    for r in (r for r in records if r["k"] == "term"):
        by_window.setdefault(float(r["win"]), []).append(str(r["id"]))
        # How long before its window began (true time) the run started.
        ahead = float(r["win"]) - (float(r["t"]) + here)
        early.append(ahead)
        assert ahead <= clocks[str(r["p"])] + 0.1, (r, ahead)
    twice = {w: ids for w, ids in by_window.items() if sum(outcomes[i] == "ok" for i in ids) > 1}
    assert twice == {}, twice
    assert violations(records, T) == [], detail  # no two runs at once
    assert len(by_window) >= seconds / interval - 1, sorted(by_window)
    who = {p: sum(1 for t in runs if t.p == p) for p in clocks}
    print(
        f"once_per, clocks {-offset:+.1f}/0/{offset:+.1f}s, {interval:.0f}s windows: "
        f"{len(by_window)} windows, {len(runs)} runs ({who}), none twice; "
        f"earliest start {max(early):.2f}s before its window"
    )
    report(
        "clock skew, once_per windows",
        d=offset,
        windows=len(by_window),
        early=max(early),
        twice=len(twice),
    )
