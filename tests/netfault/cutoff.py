"""The scenario of a member cut off from the other two, shared by the follower and leader cases."""

from __future__ import annotations

import time
from pathlib import Path

from aiocoord.testing import NetworkLab

from .figures import report
from .safety import Term, events, terms, violations
from .scene import Scene

__all__ = ("SLACK", "T", "cut_off_member")

T = 6.0  # the clients' session timeout (s)
SLACK = 1.0  # scheduling on a loaded 2-core machine (s)
KEEP = 2 / 3  # the default keeps a right through SUSPENDED until KEEP * T after the last answer


def cut_off_member(lab: NetworkLab, tmp_path: Path, which: str) -> None:
    """Cut the member c1 is connected to (the ensemble's ``which``: follower or leader) off
    from the other two; check that c1 moves on and the latch stays safe."""
    with lab.ensemble(3) as zk:
        leader = zk.leader()
        assert leader is not None
        # A follower cut off leaves its peers a quorum; a leader cut off leaves two that elect.
        followers = [m for m in zk.members if m is not leader]
        cut = leader if which == "leader" else followers[0]
        majority = [m for m in zk.members if m is not cut]
        scene = Scene(lab, tmp_path, T)
        scene.client("c1", [cut, *majority], ordered=True)  # on the member about to be cut off
        scene.wait("c1 leading", lambda rs: events(rs, "c1", "term", res="latch") or None, 30)
        scene.client("c2", majority)
        scene.wait(
            "c2 connected", lambda rs: events(rs, "c2", "conn", state="CONNECTED") or None, 30
        )
        first = events(scene.records(), "c1", "conn", state="CONNECTED")[0]
        assert first["addr"] == cut.connect_string

        t_cut = time.monotonic()
        lab.partition([cut], majority)
        print(f"cut {cut.name} off from {[m.name for m in majority]}")

        def reconnected(rs: list[dict[str, object]]) -> dict[str, object] | None:
            later = [r for r in events(rs, "c1", "conn") if float(r["t"]) > t_cut]
            return next((r for r in later if r["state"] in ("RECONNECTED", "LOST")), None)

        back = scene.wait("c1 back", reconnected, T + 10)

        def holder(rs: list[dict[str, object]]) -> list[Term] | None:
            """A new term, or c1's term kept through a reconnect on the same session."""
            latch = terms(rs, "latch")
            kept = [t for t in latch if t.p == "c1" and t.start < t_cut and not t.closed]
            return [t for t in latch if t.start > t_cut] or kept or None

        scene.wait("a holder after the cut", holder, 2 * T)
        lab.heal()
        codes = scene.stop()
        records = scene.records()

    detail = scene.logs()
    after = [r for r in events(records, "c1", "conn") if float(r["t"]) > t_cut]
    assert after and after[0]["state"] == "SUSPENDED", (after, detail)
    suspended = float(after[0]["t"])
    assert back["state"] == "RECONNECTED" and back["new"] is False, (after, detail)
    moved = float(back["t"]) - t_cut  # type: ignore[arg-type]
    assert moved < T, f"c1 took {moved:.2f}s to reach a majority member"
    assert back["addr"] in [m.connect_string for m in majority], back
    # Every hold of c1 alive at SUSPENDED (the latch's term, a mutex turn) either ended
    # by the default's deadline (the session's provable life) or was kept through the
    # reconnect on the same session: never held past the deadline while cut off.
    reconnected_at = float(back["t"])  # type: ignore[arg-type]
    alive = [t for t in terms(records) if t.p == "c1" and t.start < suspended < t.end + 0.2]
    deadline = suspended + KEEP * T + SLACK
    assert all(t.end <= deadline or t.end >= reconnected_at for t in alive), (alive, suspended)
    held = [t for t in terms(records, "latch") if t.p == "c1" and t.start < t_cut]
    assert len(held) == 1, held
    kept = held[0].end >= reconnected_at
    ended = held[0].end - suspended
    assert kept or -0.2 <= ended <= KEEP * T + SLACK, (
        f"c1's term ended {ended:+.2f}s from SUSPENDED"
    )
    new = [t for t in terms(records, "latch") if t.start > t_cut]
    assert new or kept, "no holder after the cut"
    assert violations(records, T) == [], detail
    assert codes == {"c1": 0, "c2": 0}, detail
    report(
        f"{which} cut off",
        suspended=suspended - t_cut,
        term_end=ended,
        moved=moved,
        next_term=new[0].start - t_cut if new else None,
        kept=kept,
        violations=0,
    )
    print(
        f"{which} cut off: SUSPENDED {suspended - t_cut:.2f}s after the cut, "
        + (
            "term kept through the reconnect (same session), "
            if kept
            else f"term ended {ended:+.3f}s from it, "
        )
        + f"RECONNECTED to {back['addr']} {moved:.2f}s after the cut"
        + (f"; next term ({new[0].p}) {new[0].start - t_cut:.2f}s after the cut" if new else "")
    )
