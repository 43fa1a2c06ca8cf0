"""The campaign checker's membership, counter and barrier rules, on synthetic logs (no server).

See `tests.chaos.recipe_checks`: live members listed by every settled
watcher, dead ones gone within the session timeout and a grace; counters
neither losing nor doubling an increment; nobody through a barrier before
`members` joined, nor out before everyone who entered began to leave.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.chaos.checker import check
from tests.chaos.records import Record

pytestmark = pytest.mark.unit

PROCS = (("p1", 0), ("p2", 0))


def log(*events: tuple[str, float, str, dict[str, Any]], end: float = 20.0) -> list[Record]:
    """A campaign of two participants up and connected from t=0 to `end`, plus `events`.

    Each event is (kind, t, "p1.0" or "" for the orchestrator, fields).
    """
    records: list[Record] = [
        {
            "k": "config",
            "t": 0.0,
            "seed": 1,
            "roles": "members,count,barrier",
            "session_timeout": 3.0,
            "member_grace": 2.0,
            "barrier_members": 2,
        },
        {"k": "phase", "t": 0.0, "name": "faults", "wall": 1_000_000.0},
        {"k": "phase", "t": end, "name": "stop", "wall": 1_000_000.0 + end},
    ]
    for name, number in PROCS:
        records.append({"k": "start", "t": 0.0, "p": name, "inc": number})
        records.append({"k": "conn", "t": 0.1, "p": name, "inc": number, "state": "CONNECTED"})
    for kind, t, who, data in events:
        record: Record = {"k": kind, "t": t, **data}
        if who:
            name, inc = who.split(".")
            record.update(p=name, inc=int(inc))
        records.append(record)
    return records


def members(*extra: tuple[str, float, str, dict[str, Any]], p1_sees: list[str]) -> list[Record]:
    """Both join the group at 0.5; p2 always lists both, p1 lists `p1_sees` from 0.6."""
    return log(
        ("mjoin", 0.5, "p1.0", {"kind": "group"}),
        ("mjoin", 0.5, "p2.0", {"kind": "group"}),
        ("mview", 0.6, "p1.0", {"kind": "group", "members": p1_sees, "fresh": True}),
        ("mview", 0.6, "p2.0", {"kind": "group", "members": ["p1.0", "p2.0"], "fresh": True}),
        *extra,
    )


def test_every_settled_watcher_listing_every_settled_member_passes() -> None:
    report = check(members(p1_sees=["p1.0", "p2.0"]))
    assert report.ok, report.format()
    assert report.recipes.member_samples > 0 and report.recipes.member_listings > 0


def test_a_live_member_missing_from_a_settled_view_is_one_finding_per_episode() -> None:
    report = check(members(p1_sees=["p1.0"]))
    assert [m.split(" at ")[0] for m in report.recipes.members_missing] == ["group: p1.0"]
    assert "does not list p2.0" in report.recipes.members_missing[0]


def test_a_member_recently_reconnected_is_not_owed_yet() -> None:
    # p2's connection changed at 17.0: it is not settled again before 22.0 (3 s + 2 s).
    report = check(
        members(
            ("conn", 17.0, "p2.0", {"state": "SUSPENDED"}),
            ("conn", 17.5, "p2.0", {"state": "RECONNECTED"}),
            ("mview", 17.1, "p1.0", {"kind": "group", "members": ["p1.0"], "fresh": True}),
            p1_sees=["p1.0", "p2.0"],
        )
    )
    assert report.ok, report.format()


@pytest.mark.parametrize(("listed_until", "ok"), [(9.9, True), (10.5, False)])
def test_a_dead_member_must_be_gone_within_the_session_timeout_and_grace(
    listed_until: float, ok: bool
) -> None:
    # p3.0 (another watcher's member) was killed at 5.0: due to go from views by 10.0.
    report = check(
        members(
            ("start", 0.0, "p3.0", {}),
            ("proc", 5.0, "p3.0", {"ev": "sigkill"}),
            (
                "mview",
                1.0,
                "p2.0",
                {"kind": "group", "members": ["p1.0", "p2.0", "p3.0"], "fresh": True},
            ),
            (
                "mview",
                1.1,
                "p2.0",
                {"kind": "group", "members": ["p1.0", "p2.0", "p3.0"], "fresh": True},
            ),
            (
                "mview",
                listed_until,
                "p2.0",
                {"kind": "group", "members": ["p1.0", "p2.0"], "fresh": True},
            ),
            p1_sees=["p1.0", "p2.0"],
        )
    )
    ghosts = report.recipes.members_ghosts
    assert (not ghosts) is ok, report.format()
    assert report.recipes.members_missing == []
    if not ok:
        assert "lists p3.0, dead since 5.00 (due to go by 10.00)" in ghosts[0]


def test_an_ensemble_fault_after_a_death_moves_the_deadline() -> None:
    report = check(
        members(
            ("start", 0.0, "p3.0", {}),
            ("proc", 5.0, "p3.0", {"ev": "sigkill"}),
            ("fault", 8.0, "", {"kind": "leader_kill", "target": "zk", "t0": 8.0, "t1": 9.0}),
            (
                "mview",
                1.0,
                "p2.0",
                {"kind": "group", "members": ["p1.0", "p2.0", "p3.0"], "fresh": True},
            ),
            ("mview", 13.5, "p2.0", {"kind": "group", "members": ["p1.0", "p2.0"], "fresh": True}),
            p1_sees=["p1.0", "p2.0"],
        )
    )
    assert report.recipes.members_ghosts == [], report.format()


def add(t0: float, t: float, who: str, c: str, n: str, v: int | None, sid: int = 1) -> Any:
    if v is None:
        return [("cadd", t0, who, {"c": c, "n": n}), ("cunk", t, who, {"c": c, "n": n})]
    return [
        ("cadd", t0, who, {"c": c, "n": n}),
        ("cack", t, who, {"c": c, "n": n, "v": v, "t0": t0, "sid": sid}),
    ]


def final(value: int) -> tuple[str, float, str, dict[str, Any]]:
    return ("counter_final", 19.0, "", {"values": {"shared": value}})


@pytest.mark.parametrize(("value", "ok"), [(2, True), (3, True), (1, False), (4, False)])
def test_the_final_count_lies_between_the_acked_and_the_begun(value: int, ok: bool) -> None:
    events = [
        *add(1.0, 1.1, "p1.0", "shared", "a", 1),
        *add(2.0, 2.1, "p2.0", "shared", "b", 2),
        *add(3.0, 3.1, "p2.0", "shared", "c", None),
        final(value),
    ]
    report = check(log(*events))
    assert report.ok is ok, report.format()
    assert (report.recipes.counter_acked, report.recipes.counter_begun) == (
        {"shared": 2},
        {"shared": 3},
    )


def test_two_increments_returning_one_value_are_a_lost_update() -> None:
    events = [
        *add(1.0, 1.2, "p1.0", "shared", "a", 1),
        *add(1.1, 1.3, "p2.0", "shared", "b", 1),
        final(1),
    ]
    report = check(log(*events))
    assert report.recipes.counters_doubled == ["shared: value 1 returned to ['a', 'b']"]
    assert report.recipes.counters_final  # 1 is below the 2 acked


def test_an_increment_begun_after_another_returned_must_return_more() -> None:
    events = [*add(1.0, 1.1, "p1.0", "shared", "a", 5), *add(2.0, 2.1, "p2.0", "shared", "b", 4)]
    report = check(log(*events))
    assert report.recipes.counters_order == [
        "shared: b begun at 2.000 returned 4, after 5 was returned"
    ]


def test_a_read_below_what_its_session_saw_before_is_out_of_order() -> None:
    events = [
        *add(1.0, 1.1, "p1.0", "shared", "a", 5),
        ("cread", 2.0, "p1.0", {"c": "shared", "v": 5, "t0": 2.0, "sid": 1}),
        ("cread", 3.0, "p1.0", {"c": "shared", "v": 3, "t0": 3.0, "sid": 2}),  # a new session
        ("cread", 4.0, "p1.0", {"c": "shared", "v": 4, "t0": 4.0, "sid": 1}),
    ]
    report = check(log(*events))
    assert report.recipes.counters_order == ["shared: p1.0 read 4 at 4.000 after seeing 5"]


def barrier(*events: tuple[str, float, str]) -> list[Record]:
    return log(*((kind, t, who, {"r": 7}) for kind, t, who in events))


def test_a_round_in_together_and_out_together_passes() -> None:
    report = check(
        barrier(
            ("bjoin", 1.0, "p1.0"),
            ("bjoin", 1.5, "p2.0"),
            ("bin", 1.6, "p1.0"),
            ("bin", 1.6, "p2.0"),
            ("bleave", 2.0, "p1.0"),
            ("bleave", 2.5, "p2.0"),
            ("bout", 2.6, "p1.0"),
            ("bout", 2.6, "p2.0"),
        )
    )
    assert report.ok, report.format()
    assert (report.recipes.barrier_full, report.recipes.barrier_passes) == (1, 2)


def test_entering_before_members_joined_is_early() -> None:
    report = check(barrier(("bjoin", 1.0, "p1.0"), ("bin", 1.2, "p1.0"), ("bjoin", 1.5, "p2.0")))
    assert report.recipes.barriers_early_enter == [
        "round 7: p1.0 entered at 1.200 after 1 of 2 had begun to join"
    ]


def test_leaving_while_another_node_is_there_throughout_is_early_unless_its_session_ended() -> None:
    events = [
        ("bjoin", 1.0, "p1.0"),
        ("bjoin", 1.5, "p2.0"),
        ("bin", 1.6, "p1.0"),
        ("bin", 1.6, "p2.0"),
        ("bleave", 2.0, "p1.0"),
        ("bout", 2.1, "p1.0"),
        ("bleave", 2.5, "p2.0"),
    ]
    report = check(barrier(*events))
    assert report.recipes.barriers_early_leave == [
        "round 7: p1.0 left at 2.100 (leaving since 2.000) while a node was there throughout: "
        "p2.0 [1.600, 2.500]"
    ]
    expired = ("fault", 1.9, "p2.0", {"kind": "expire", "target": "p2", "t0": 1.9, "t1": 1.95})
    report = check([*barrier(*events), *log(expired)[-1:]])
    assert report.recipes.barriers_early_leave == [] and report.recipes.barrier_leave_excused == 1


def test_a_late_arrival_that_went_in_while_the_others_were_leaving_holds_nobody_back() -> None:
    # Seed 41: p2 went in through `ready` after p1 had begun to leave; p1's node and the
    # others' may all have been gone before p2's was made, and p1 rightly left then.
    report = check(
        barrier(
            ("bjoin", 1.0, "p1.0"),
            ("bin", 1.6, "p1.0"),
            ("bleave", 2.0, "p1.0"),
            ("bjoin", 1.9, "p2.0"),
            ("bin", 2.05, "p2.0"),
            ("bout", 2.1, "p1.0"),
            ("bleave", 2.3, "p2.0"),
            ("bout", 2.4, "p2.0"),
        )
    )
    assert report.recipes.barriers_early_leave == [], report.format()


def test_a_leaver_may_return_when_the_last_node_it_saw_go_was_followed_by_a_late_one() -> None:
    # Seed 142: p2's node went at 2.30 and p3's, a late arrival through `ready`, was made at
    # 2.28: no one node was there throughout p1's leave, though some node always was.
    report = check(
        barrier(
            ("bjoin", 1.0, "p1.0"),
            ("bjoin", 1.1, "p2.0"),
            ("bin", 1.6, "p1.0"),
            ("bin", 1.6, "p2.0"),
            ("bleave", 2.0, "p1.0"),
            ("bjoin", 2.2, "p3.0"),
            ("bin", 2.28, "p3.0"),
            ("bleave", 2.3, "p2.0"),
            ("bout", 2.35, "p1.0"),
            ("bleave", 2.5, "p3.0"),
        )
    )
    assert report.recipes.barriers_early_leave == [], report.format()


def test_a_leaver_may_return_while_one_node_is_left_once_the_lowest_it_waited_on_went() -> None:
    # Seed 161: p2 deleted its node and waited on the lowest (p1); p1 went, p2 listed
    # again and saw only p3's node: Curator's leave() returns then, and so does ours.
    events = [
        ("bjoin", 1.0, "p1.0"),
        ("bjoin", 1.1, "p2.0"),
        ("bjoin", 1.2, "p3.0"),
        ("bin", 1.6, "p1.0"),
        ("bin", 1.6, "p2.0"),
        ("bin", 1.6, "p3.0"),
        ("bleave", 2.0, "p2.0"),
        ("bleave", 2.05, "p1.0"),
        ("bout", 2.1, "p1.0"),
        ("bout", 2.15, "p2.0"),
        ("bleave", 2.5, "p3.0"),
    ]
    assert check(barrier(*events)).recipes.barriers_early_leave == []
    # Without a third node to wait on, p3's node there throughout holds p2 back.
    alone = [e for e in events if e[2] != "p1.0"]
    assert len(check(barrier(*alone)).recipes.barriers_early_leave) == 1
