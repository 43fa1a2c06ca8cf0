"""A client blackholed: packets silently dropped, no RST, no FIN; it must notice by its own timers.

Both directions cut, then (a second case) only what the servers send it: its
pings still reach the server, whose answers never arrive.  Either way the
client must go SUSPENDED within 2/3 of the session timeout (its read
timeout), end its term there, go LOST at the session timeout, and its term
must end before the server expires the session (which the other client sees
as its own election).  After healing it comes back with a new session.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab

from ..chaos.records import Record
from .figures import report
from .safety import events, terms, violations
from .scene import Scene

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]

T = 6.0  # the clients' session timeout (s)
SLACK = 0.5  # timer ticks and scheduling on a loaded 2-core machine (s)


@pytest.mark.parametrize("direction", ["both", "server-to-client"])
def test_blackholed_client_lets_go_by_its_own_timers(
    lab: NetworkLab, tmp_path: Path, direction: str
) -> None:
    with lab.ensemble(3) as zk:
        scene = Scene(lab, tmp_path, T)
        scene.client("c1", zk.members)
        scene.wait("c1 leading", lambda rs: events(rs, "c1", "term", res="latch") or None, 30)
        scene.client("c2", zk.members)
        scene.wait(
            "c2 connected", lambda rs: events(rs, "c2", "conn", state="CONNECTED") or None, 30
        )

        t_cut = time.monotonic()
        if direction == "both":
            lab.partition(["c1"], zk.members)
        else:
            lab.blackhole(zk.members, "c1")

        def after_cut(rs: list[Record], p: str, kind: str, **match: object) -> list[Record]:
            return [r for r in events(rs, p, kind, **match) if float(r["t"]) > t_cut]

        scene.wait("c1 LOST", lambda rs: after_cut(rs, "c1", "conn", state="LOST") or None, 2 * T)
        scene.wait("c2 leading", lambda rs: events(rs, "c2", "term", res="latch") or None, 3 * T)
        lab.heal()
        scene.wait(
            "c1 on a new session",
            lambda rs: after_cut(rs, "c1", "conn", state="RECONNECTED", new=True) or None,
            2 * T,
        )
        codes = scene.stop()
        records = scene.records()

    detail = scene.logs()
    states = [
        (r["state"], round(float(r["t"]) - t_cut, 2)) for r in after_cut(records, "c1", "conn")
    ]
    assert [s for s, _ in states][:2] == ["SUSPENDED", "LOST"], (states, detail)
    suspended = float(after_cut(records, "c1", "conn", state="SUSPENDED")[0]["t"])
    lost = float(after_cut(records, "c1", "conn", state="LOST")[0]["t"])
    # The last answer heard came at most one ping interval (T/3) before the cut.
    assert T / 3 - 0.1 <= suspended - t_cut <= 2 * T / 3 + SLACK, states
    assert 2 * T / 3 - 0.1 <= lost - t_cut <= T + SLACK, states
    # Every hold of c1 alive at SUSPENDED (the latch's term, a mutex turn) ends there.
    alive = [t for t in terms(records) if t.p == "c1" and t.start < suspended < t.end + 0.2]
    assert all(t.closed and t.end <= suspended + SLACK for t in alive), (alive, suspended)
    c1 = [t for t in terms(records, "latch") if t.p == "c1" and t.start < t_cut]
    assert len(c1) == 1 and c1[0].closed, c1
    assert -0.2 <= c1[0].end - suspended <= SLACK, (c1, suspended)
    c2 = [t for t in terms(records, "latch") if t.p == "c2"]
    assert c2, "c2 never led"
    # The server expired c1's session (c2 elected) after c1 had let go.
    assert c1[0].end < c2[0].start, (c1, c2)
    assert violations(records, T) == [], detail
    assert codes == {"c1": 0, "c2": 0}, detail
    report(
        f"blackhole, {direction}",
        suspended=suspended - t_cut,
        term_end=c1[0].end - suspended,
        lost=lost - t_cut,
        expired=c2[0].start - t_cut,
        violations=0,
    )
    print(
        f"{direction}: SUSPENDED {suspended - t_cut:.2f}s after the cut, term ended "
        f"{c1[0].end - suspended:+.3f}s from it, LOST {lost - t_cut:.2f}s; "
        f"the server expired the session (c2 elected) {c2[0].start - t_cut:.2f}s after the cut, "
        f"{c2[0].start - c1[0].end:.2f}s after c1 let go"
    )
