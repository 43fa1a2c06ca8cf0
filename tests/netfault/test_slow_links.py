"""Every client link slow and lossy for a while: 200 ms ± 100 ms each way and 5 % loss.

Nothing is cut, so nothing may be lost: no client may go LOST (its session
lives: TCP retransmits what the link drops, and the delays stay far below the
read timeout), and the latch stays safe.  The delay needs netem in the
kernel (`netem_unavailable` says why not); the loss alone runs everywhere.
The impairment lasts ``AIOCOORD_NETFAULT_SECONDS`` (default 30).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab, netem_unavailable

from .safety import events, terms, violations
from .scene import Scene

pytestmark = [pytest.mark.netfault, pytest.mark.ensemble, pytest.mark.slow]

T = 6.0  # the clients' session timeout (s)
CLIENTS = ("c1", "c2", "c3")


def test_slow_lossy_links_lose_nothing(lab: NetworkLab, tmp_path: Path) -> None:
    reason = netem_unavailable()
    if reason is not None:
        pytest.skip(reason)
    impaired(lab, tmp_path, delay=0.2, jitter=0.1, loss=0.05)


def test_lossy_links_lose_nothing(lab: NetworkLab, tmp_path: Path) -> None:
    impaired(lab, tmp_path, loss=0.05)


def impaired(lab: NetworkLab, tmp_path: Path, **impairment: float) -> None:
    """Run three clients, impair their links for a while, check that nothing was lost."""
    seconds = float(os.environ.get("AIOCOORD_NETFAULT_SECONDS", "30"))
    with lab.ensemble(3) as zk:
        scene = Scene(lab, tmp_path, T)
        for name in CLIENTS:
            scene.client(name, zk.members)
        for name in CLIENTS:
            scene.wait(
                f"{name} connected",
                lambda rs, name=name: events(rs, name, "conn", state="CONNECTED") or None,  # type: ignore[misc]
                30,
            )
        scene.wait("a leader", lambda rs: terms(rs, "latch") or None, 30)
        t0 = time.monotonic()
        lab.impair(list(CLIENTS), **impairment)
        # The scenario is the impaired period itself: it lasts a fixed time.
        time.sleep(seconds)
        lab.clear_impairments()
        t1 = time.monotonic()
        time.sleep(T)  # a session hurt during the impairment would be declared LOST by now
        codes = scene.stop()
        records = scene.records()

    detail = scene.logs()
    lost = [
        (name, round(float(r["t"]) - t0, 2))
        for name in CLIENTS
        for r in events(records, name, "conn", state="LOST")
    ]
    assert lost == [], (lost, detail)
    assert violations(records, T) == [], detail
    assert all(code == 0 for code in codes.values()), (codes, detail)
    suspended = sum(
        1
        for name in CLIENTS
        for r in events(records, name, "conn", state="SUSPENDED")
        if t0 <= float(r["t"]) <= t1
    )
    during = [t for t in terms(records) if t.end >= t0 and t.start <= t1]
    turns = sum(1 for t in during if t.res == "mutex")
    print(
        f"{seconds:.0f}s of {impairment} on {len(CLIENTS)} client links: "
        f"0 LOST, {suspended} SUSPENDED, {len(during) - turns} latch terms, {turns} mutex turns"
    )
