"""The client's member is cut off from the other two: it loses quorum, the client moves on.

A follower that no longer hears its leader stops serving and drops its
clients.  The client must reach a majority member within its session
timeout (same session: RECONNECTED, not LOST), its term must end on
SUSPENDED, and the latch must have a holder on the majority side again.

The short scenario of the tier (``SHORT``): the default suite runs it too,
wherever a `NetworkLab` can run (and skips it, with the reason, elsewhere);
about 15 s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab

from .safety import events, terms, violations
from .scene import Scene

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]
SHORT = True  # also in the default suite (see conftest)

T = 6.0  # the clients' session timeout (s)
SLACK = 1.0  # scheduling on a loaded 2-core machine (s)


def test_member_cut_off_from_its_quorum(lab: NetworkLab, tmp_path: Path) -> None:
    with lab.ensemble(3) as zk:
        leader = zk.leader()
        assert leader is not None
        cut = next(m for m in zk.members if m is not leader)  # a follower: its peers keep a quorum
        majority = [m for m in zk.members if m is not cut]
        scene = Scene(lab, tmp_path, T)
        scene.client("c1", [cut, *majority], ordered=True)  # on the member about to be cut off
        scene.wait("c1 leading", lambda rs: events(rs, "c1", "term") or None, 30)
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
        scene.wait(
            "a new term",
            lambda rs: [t for t in terms(rs) if t.start > t_cut] or None,
            2 * T,
        )
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
    held = [t for t in terms(records) if t.p == "c1" and t.start < t_cut]
    assert len(held) == 1 and held[0].closed, held
    ended = held[0].end - suspended
    assert -0.2 <= ended <= SLACK, f"c1's term ended {ended:+.2f}s from its SUSPENDED"
    new = [t for t in terms(records) if t.start > t_cut]
    assert new, "no holder after the cut"
    assert violations(records, T) == [], detail
    assert codes == {"c1": 0, "c2": 0}, detail
    print(
        f"SUSPENDED {suspended - t_cut:.2f}s after the cut, term ended {ended:+.3f}s from it, "
        f"RECONNECTED to {back['addr']} {moved:.2f}s after the cut; "
        f"next term ({new[0].p}) {new[0].start - t_cut:.2f}s after the cut"
    )
