"""The dashboard's one watcher, without a browser: a path that appears later, and bursts read once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.integrations._dashboard_feed import DashboardFeed

Document = dict[str, Any]


async def until(feed: DashboardFeed, ok: Callable[[Document], bool]) -> Document:
    """The first document (the current one included) for which `ok` holds."""
    document = feed.document
    while not ok(document):
        document = await feed.next_document(document["seq"])
    return document


@pytest.mark.anyio
async def test_a_path_that_does_not_exist_yet_shows_up_once_created(
    coordinator: aiocoord.Coordinator,
) -> None:
    feed = DashboardFeed(coordinator, "/later")
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(feed.run)
            missing = await until(feed, lambda d: d["read_at"] is not None)
            assert missing["tree"] is None and missing["error"] == "/later does not exist (yet)"
            assert missing["state"] == "CONNECTED"
            async with aiocoord.leader_latch(coordinator, "/later/leader", participant_id="p-1"):
                found = await until(feed, lambda d: d["tree"] is not None and d["tree"]["children"])
                assert found["error"] is None
                (latch,) = found["tree"]["children"]
                assert (latch["kind"], latch["leader"]) == ("leader_latch", "p-1")
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_burst_of_changes_is_read_a_few_times_not_once_per_change(
    coordinator: aiocoord.Coordinator,
) -> None:
    await coordinator.client.create("/app", b"")
    feed = DashboardFeed(coordinator, "/app")
    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            await tg.start(feed.run)
            first = await until(feed, lambda d: d["read_at"] is not None)
            for i in range(60):
                await coordinator.client.create(f"/app/n-{i:02}", b"x")
            last = await until(feed, lambda d: len(d["tree"]["children"]) == 60)
            assert last["seq"] - first["seq"] < 20  # each document is one read here
            assert last["changes"] == []  # plain nodes are not changes of a recipe
            tg.cancel_scope.cancel()
