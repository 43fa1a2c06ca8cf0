"""The campaign checker's excuse for overlaps: only while a holder is frozen, plus a bounded wake.

Synthetic logs (no server).  The bound is a third of the session timeout
(1 s for the 3 s the campaign uses); a freeze or a stall excuses only the
instants it covers, never an overlap longer than it or long after it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.chaos.checker import check
from tests.chaos.records import Record
from tests.chaos.report import Report


class Log:
    def __init__(self, session_timeout: float = 3.0) -> None:
        self.records: list[Record] = []
        self.add("config", 0.0, seed=1, roles="latch", session_timeout=session_timeout)
        self.add("phase", 0.0, name="faults", wall=1_000_000.0)
        self.n = 0

    def add(self, event: str, t: float, /, **data: Any) -> Log:
        self.records.append({"k": event, "t": t, **data})
        return self

    def start(self, *ps: str) -> Log:
        for p in ps:
            self.add("start", 0.0, p=p, inc=0, wall=1_000_000.0)
            self.add("conn", 0.01, p=p, inc=0, state="CONNECTED")
        return self

    def term(self, p: str, start: float, end: float, tok: int) -> str:
        self.n += 1
        tid = f"{p}.0.{self.n}"
        self.add("term", start, p=p, inc=0, id=tid, role="latch", res="latch", tok=tok)
        self.add("end", end, p=p, inc=0, id=tid, why="cancelled")
        return tid

    def stall(self, p: str, t0: float, t1: float) -> Log:
        return self.add("stall", t1, p=p, inc=0, t0=t0, t1=t1)

    def sigstop(self, p: str, t0: float, t1: float) -> Log:
        self.add("proc", t0, p=p, inc=0, ev="sigstop")
        return self.add("proc", t1, p=p, inc=0, ev="sigcont")

    def check(self, end: float = 30.0) -> Report:
        self.add("phase", end, name="stop", wall=1_000_000.0 + end)
        return check(random.sample(self.records, len(self.records)))


def latch_defect() -> Log:
    """What a latch that never cancels its body on SUSPENDED/LOST leaves: a 10-15 s overlap."""
    log = Log().start("p1", "p2")
    log.term("p1", 1.0, 16.0, 10)  # never cancelled: ran on until the process left
    log.term("p2", 4.0, 25.0, 20)  # elected once p1's session expired
    return log


def test_a_long_overlap_fails() -> None:
    report = latch_defect().check()
    assert len(report.overlaps) == 1 and report.overlaps[0].length == pytest.approx(12.0)
    assert not report.ok


def test_two_short_stalls_do_not_excuse_a_long_overlap() -> None:
    """The case that used to pass: two 0.31 s stalls added to the logs of the latch defect.

    The old excuse (a freeze anywhere in ``[a.start - 1 s, b.start]``) turned
    this FAILED into OK.
    """
    log = latch_defect()
    log.stall("p1", 2.0, 2.31)  # before the overlap, while p1 held the latch
    log.stall("p2", 3.5, 3.81)  # just before p2's term began
    report = log.check()
    assert len(report.overlaps) == 1 and not report.excused
    assert not report.ok
    assert report.stalls == 2  # descheduling, reported


def test_a_stall_inside_the_overlap_excuses_nothing_beyond_it() -> None:
    log = latch_defect()
    log.stall("p1", 4.1, 4.41)  # inside the 12 s overlap: covers 0.3 s + 1 s of it
    assert not log.check().ok


def test_a_freeze_long_before_the_overlap_excuses_nothing() -> None:
    log = Log().start("p1", "p2")
    log.sigstop("p1", 1.0, 5.0)
    log.term("p1", 0.5, 9.0, 10)
    log.term("p2", 7.0, 20.0, 20)  # 2 s after p1 woke: p1 had 1 s to let go
    report = log.check()
    assert len(report.overlaps) == 1 and not report.excused


def test_an_overlap_while_frozen_and_just_after_waking_is_excused() -> None:
    log = Log().start("p1", "p2")
    log.sigstop("p1", 1.0, 6.0)  # longer than the session timeout: p1's session expired
    log.term("p1", 0.5, 6.9, 10)  # woke at 6.0 and let go within the bound (1 s)
    log.term("p2", 4.5, 20.0, 20)
    report = log.check()
    assert report.ok, report.format()
    assert len(report.excused) == 1 and report.excused[0].length == pytest.approx(2.4)
    assert report.stalls == 0  # a SIGSTOP is not descheduling


def test_a_woken_holder_that_lets_go_too_late_is_not_excused() -> None:
    log = Log().start("p1", "p2")
    log.sigstop("p1", 1.0, 6.0)
    log.term("p1", 0.5, 7.2, 10)  # 1.2 s after waking: past the bound
    log.term("p2", 4.5, 20.0, 20)
    assert len(log.check().overlaps) == 1


def test_the_wake_bound_is_a_third_of_the_session_timeout() -> None:
    for timeout, ok in ((3.0, False), (6.0, True)):  # 1 s, 2 s
        log = Log(session_timeout=timeout).start("p1", "p2")
        log.sigstop("p1", 1.0, 6.0)
        log.term("p1", 0.5, 7.5, 10)
        log.term("p2", 4.5, 20.0, 20)
        report = log.check()
        assert report.ok is ok, report.format()
        assert report.wake_bound == pytest.approx(timeout / 3)


def test_a_stale_term_begun_on_waking_is_excused_only_within_the_bound() -> None:
    log = Log().start("p1", "p2")
    log.sigstop("p1", 1.0, 5.0)
    log.term("p2", 3.0, 20.0, 20)
    log.term("p1", 5.1, 5.3, 10)  # on stale state, old token, let go at once
    report = log.check()
    assert report.ok and report.token_order_excused == 1

    log = Log().start("p1", "p2")
    log.sigstop("p1", 1.0, 5.0)
    log.term("p2", 3.0, 20.0, 20)
    log.term("p1", 6.5, 6.6, 10)
    report = log.check()
    assert len(report.overlaps) == 1 and len(report.token_order) == 1


def test_a_holderless_gap_longer_than_the_bound_is_a_violation() -> None:
    log = Log().start("p1", "p2")
    log.term("p1", 1.0, 2.0, 10)
    log.term("p2", 15.0, 30.0, 20)  # 13 s without a leader: more than 4 session timeouts
    report = log.check()
    assert [(res, round(length)) for res, _, length in report.long_gaps] == [("latch", 13)]
    assert not report.ok and "NO HOLDER latch" in report.format()


def test_a_scheduled_time_run_twice() -> None:
    log = Log().start("p1", "p2")
    for p, t, tok in (("p1", 1.0, 10), ("p2", 1.5, 20), ("p2", 2.1, 20)):
        at = 1_000_001.0 if t < 2 else 1_000_002.0
        log.add("term", t, p=p, inc=0, id=f"{p}.{t}", role="cron", res="cron", tok=tok, win=at)
        log.add("end", t + 0.1, p=p, inc=0, id=f"{p}.{t}", why="exit")
    report = log.check(end=3.0)
    assert report.firings == 3
    assert report.double_firings == [(1_000_001.0, ["p1.1.0", "p2.1.5"])]
    assert not report.ok and "CRON TIME RAN TWICE" in report.format()


def lease(log: Log, p: str, start: float, end: float, tok: int) -> None:
    log.n += 1
    tid = f"{p}.0.{log.n}"
    log.add("term", start, p=p, inc=0, id=tid, role="sem", res="sem", tok=tok)
    log.add("end", end, p=p, inc=0, id=tid, why="cancelled")


@pytest.mark.parametrize("frozen", [True, False])
def test_one_lease_too_many_is_excused_by_whichever_holder_was_frozen(frozen: bool) -> None:
    """Three leases of two at once: the frozen holder explains it, even when it is not the
    oldest (the oldest was blamed alone before, and the overlap counted as a violation)."""
    log = Log().start("p1", "p2", "p3")
    log.records[0]["sem_leases"] = 2
    lease(log, "p2", 1.0, 10.0, 10)  # never frozen
    lease(log, "p1", 2.0, 12.0, 20)
    if frozen:
        log.sigstop("p1", 3.0, 11.5)  # its lease node went with its session meanwhile
    lease(log, "p3", 4.0, 6.0, 30)
    report = log.check()
    if frozen:
        assert report.ok and not report.overlaps and len(report.excused) == 1
        assert report.excused[0].first == "p1.0.2"
    else:
        assert not report.ok and len(report.overlaps) == 1
