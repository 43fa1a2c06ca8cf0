"""The hand-off stage benchmark keeps working: tiny parameters, on the test server."""

from __future__ import annotations

from aiocoord.testing import ZooKeeperServer


def test_the_stages_come_in_order_and_the_library_is_left_as_it_was(
    zk_server: ZooKeeperServer,
) -> None:
    from aiocoord.recipes._queue import Waiter
    from aiocoord.zk._connection import Connection
    from benchmarks import handoff_stages as bench

    before = (Connection._write, Connection._dispatch, Waiter._predecessor_gone)
    hosts = zk_server.connect_string
    rounds = bench.stages(hosts, 3, 3)
    assert (Connection._write, Connection._dispatch, Waiter._predecessor_gone) == before
    assert len(rounds) == 3
    for marks in rounds:
        times = [marks[stage] for stage in bench.STAGES]
        assert times == sorted(times), marks
        assert marks[bench.ANSWERED] > marks["delete written"]
        assert marks[bench.PAIRED] > 0
    floor = bench.python_floor(hosts, 3)
    assert len(floor["notification"]) == len(floor["reply"]) == 3
    table = bench.report(rounds, {"aiocoord ZkClient": floor, "Java client": "not measured"})
    assert table[0].startswith("3 of 3 hand-offs")
    assert any(line.startswith("floor, same sessions") for line in table)
    row = next(line for line in table if line.startswith("wait() returns"))
    assert len(row.split()) == 6, row  # two words, then medians and p90s since release and alone
    assert any(line.startswith("Java client") and "not measured" in line for line in table)
