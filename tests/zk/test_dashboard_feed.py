"""The dashboard without a browser: its one watcher (a path that appears later, bursts), its routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx
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


@pytest.mark.anyio
async def test_the_page_and_its_assets_take_nothing_from_the_request(
    coordinator: aiocoord.Coordinator,
) -> None:
    """The query string can change neither what is served nor its type (no reflected content)."""
    fastapi = pytest.importorskip("fastapi", reason="the dashboard needs the fastapi extra")
    from aiocoord.integrations.dashboard import dashboard_router

    app = fastapi.FastAPI()
    app.include_router(dashboard_router("/", coord=coordinator))
    transport = httpx.ASGITransport(app=app)
    with anyio.fail_after(10):
        async with httpx.AsyncClient(transport=transport, base_url="http://dash") as http:
            hostile = {"media_type": "text/html", "body": "<script>alert(1)</script>"}
            for route, media_type in [
                ("/", "text/html"),
                ("/dashboard.js", "text/javascript"),
                ("/dashboard.css", "text/css"),
            ]:
                plain = await http.get(route)
                probed = await http.get(route, params=hostile)
                assert plain.status_code == probed.status_code == 200
                assert probed.headers["content-type"].startswith(media_type)
                assert probed.content == plain.content and b"alert(1)" not in probed.content
                assert "script-src 'self'" in probed.headers["content-security-policy"]
            # The lifespan did not run (no server): the event stream says so instead of hanging.
            missing = await http.get("/events")
            assert missing.status_code == 503 and "include_router" in missing.json()["error"]
