"""Every client link slow and lossy for a while: 200 ms ± 100 ms each way and 5 % loss.

Nothing is cut, so nothing may be lost: no client may go LOST (its session
lives: TCP retransmits what the link drops, and the delays stay far below the
read timeout), and the latch and the mutex stay safe.  The delay is ``tc
netem`` where the kernel has it, else each client's delay relay
(`NetworkLab.node` with ``relay=True``: every chunk of its ZooKeeper
connection held back 200 ± 100 ms each way, in order); the loss is dropped
packets of the client's real link either way.  The impairment lasts
``AIOCOORD_NETFAULT_SECONDS`` (default 60); the mutex turns per second in
it are printed beside those of a healthy period before it (a third as
long, at most 20 s), and so are the reads per second of all clients
together (each client reads one node in a loop, one read in flight).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from aiocoord.testing import NetworkLab

from .figures import report
from .safety import events, terms, violations
from .scene import Scene

T = 6.0  # the clients' session timeout (s)
SECONDS = float(os.environ.get("AIOCOORD_NETFAULT_SECONDS", "60"))  # the impaired period

pytestmark = [
    pytest.mark.netfault,
    pytest.mark.ensemble,
    pytest.mark.slow,
    pytest.mark.timeout(240 + 2 * SECONDS),
]
CLIENTS = ("c1", "c2", "c3")


def test_slow_lossy_links_lose_nothing(lab: NetworkLab, tmp_path: Path) -> None:
    impaired(lab, tmp_path, "slow and lossy links", delay=0.2, jitter=0.1, loss=0.05)


def test_lossy_links_lose_nothing(lab: NetworkLab, tmp_path: Path) -> None:
    impaired(lab, tmp_path, "lossy links", loss=0.05)


def impaired(lab: NetworkLab, tmp_path: Path, scenario: str, **impairment: float) -> None:
    """Run three clients, impair their links for a while, check that nothing was lost."""
    seconds = SECONDS
    healthy = min(seconds / 3, 20.0)
    relay = lab.delays_by_relay and bool(impairment.get("delay") or impairment.get("jitter"))
    with lab.ensemble(3) as zk:
        scene = Scene(lab, tmp_path, T)
        for name in CLIENTS:
            scene.client(name, zk.members, relay=relay, args=["--reads"])
        for name in CLIENTS:
            scene.wait(
                f"{name} connected",
                lambda rs, name=name: events(rs, name, "conn", state="CONNECTED") or None,  # type: ignore[misc]
                30,
            )
        scene.wait("a leader", lambda rs: terms(rs, "latch") or None, 30)
        t_healthy = time.monotonic()
        time.sleep(healthy)
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
    found = violations(records, T)
    suspended = sum(
        1
        for name in CLIENTS
        for r in events(records, name, "conn", state="SUSPENDED")
        if t0 <= float(r["t"]) <= t1
    )

    def turns(a: float, b: float) -> int:
        return sum(1 for t in terms(records, "mutex") if a <= t.start < b)

    def reads(a: float, b: float) -> float:
        """Reads answered per second, all clients together, over the seconds logged within
        [a + 1, b] (the first second after a change is left out: the relay takes up to 50 ms to
        apply it, and some reads answered at the old pace before)."""
        answered: dict[str, int] = {}
        spans: dict[str, float] = {}
        for r in records:
            if r["k"] == "reads" and a + 1 <= float(r["t0"]) and float(r["t"]) <= b:
                p = str(r["p"])
                answered[p] = answered.get(p, 0) + int(r["n"])
                spans[p] = spans.get(p, 0.0) + float(r["t"]) - float(r["t0"])
        return sum(answered[p] / spans[p] for p in answered if spans[p] > 0)

    during = [t for t in terms(records) if t.end >= t0 and t.start <= t1]
    latch_terms = sum(1 for t in during if t.res == "latch")
    rate, base = turns(t0, t1) / (t1 - t0), turns(t_healthy, t0) / (t0 - t_healthy)
    read_rate, read_base = reads(t0, t1), reads(t_healthy, t0)
    delayed_by = ("relay" if relay else "netem") if "delay" in impairment else "-"
    print(
        f"{seconds:.0f}s of {impairment} on {len(CLIENTS)} client links (delay by {delayed_by}): "
        f"{len(lost)} LOST, {suspended} SUSPENDED, {len(found)} violations, "
        f"{latch_terms} latch terms, mutex {rate:.2f} turns/s (healthy before: {base:.2f}/s), "
        f"{read_rate:.1f} reads/s (healthy before: {read_base:.1f}/s)"
    )
    assert lost == [], (lost, detail)
    assert found == [], detail
    assert all(code == 0 for code in codes.values()), (codes, detail)
    report(
        scenario,
        seconds=seconds,
        lost=len(lost),
        suspended=suspended,
        violations=len(found),
        turns_per_s=rate,
        healthy_turns_per_s=base,
        reads_per_s=read_rate,
        healthy_reads_per_s=read_base,
    )
