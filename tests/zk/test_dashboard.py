"""The dashboard in a real headless Chromium: each recipe, live changes, SUSPENDED/LOST, escaping.

The page is served by uvicorn on this test's event loop and read by Debian's
Chromium (see `tests.browser`); a screenshot of each view is saved in
``build/screenshots/``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord.recipes.cas_lock import CasLock, once_per
from aiocoord.scheduler import Scheduler
from aiocoord.testing import FaultProxy, ZooKeeperServer
from tests.browser import LIVE, Page, card, chromium, needs_chromium, serving, value

fastapi = pytest.importorskip("fastapi", reason="the dashboard needs the fastapi extra")

from aiocoord.integrations.dashboard import dashboard_app, dashboard_router  # noqa: E402
from aiocoord.integrations.fastapi import lifespan  # noqa: E402

pytestmark = [pytest.mark.timeout(60), needs_chromium]


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(driver: Any) -> Page:
    return Page(driver)


# --- each recipe -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_page_renders_each_recipe(
    zk_server: ZooKeeperServer, zk_chroot: str, page: Page
) -> None:
    """Latch, locks, task leadership and a scheduler under one path, each in its own card."""
    hosts = zk_server.connect_string
    with anyio.fail_after(45):
        async with AsyncExitStack() as stack:
            coords = [
                await stack.enter_async_context(
                    aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0)
                )
                for _ in range(2)
            ]
            for i, c in enumerate(coords):
                await stack.enter_async_context(
                    aiocoord.leader_latch(c, "/app/leader", participant_id=f"pod-{i}")
                )
            lock = CasLock(coords[0], "/app/locks/report", owner="pod-0", lease=30)
            assert await lock.try_acquire()
            async with once_per(coords[1], "/app/locks/nightly", 3600, owner="pod-1") as slot:
                assert slot.acquired
            for c, (wid, version) in zip(coords, [("w-old", "1.0"), ("w-new", "1.1")], strict=True):
                await stack.enter_async_context(
                    aiocoord.task_leadership(
                        c, "/app/tasks", worker=aiocoord.Worker(version, id=wid), tasks=["a", "b"]
                    )
                )
            started, release = anyio.Event(), anyio.Event()
            sched = Scheduler(coords[0], "/app/jobs")

            @sched.job("block")
            async def block(n: int) -> int:
                started.set()
                await release.wait()
                return n

            @sched.job("fail")
            async def fail(n: int) -> int:
                raise LookupError(f"no row {n}")

            await stack.enter_async_context(sched.worker(capacity=4, worker_id="jobs-1"))
            stack.push_async_callback(_set, release)
            client = Scheduler(coords[1], "/app/jobs")
            for name in ("block", "fail", "later"):
                client.job(name)(block)
            with pytest.raises(aiocoord.JobFailed):
                await client.result(await client.submit("fail", {"n": 7}))
            await client.submit("block", {"n": 1})
            pending = await client.submit("later", {"n": 2})  # no worker runs it: stays pending
            await started.wait()

            async with serving(dashboard_app(coords[0], "/app"), page) as url:
                await page.open(url)
                await page.wait_text("#state", "CONNECTED")
                await page.wait_text(value("/app/leader", "leader"), "pod-0")
                latch = await page.text(card("/app/leader"))
                assert latch.index("pod-0") < latch.index("pod-1") and "curator" in latch
                await page.wait_text(value("/app/locks/report", "state"), "held by pod-0")
                await page.wait_text(f"{card('/app/locks/report')} .lease", "s left")
                await page.wait_text(card("/app/locks/nightly"), "last held by pod-1")
                assert "by pod-1" in await page.text(card("/app/locks/nightly"))
                await page.wait_text(value("/app/tasks", "task|a"), "w-new")
                await page.wait_text(value("/app/tasks", "task|b"), "w-new")
                tasks = await page.text(card("/app/tasks"))
                assert "w-old" in tasks and "1.0" in tasks and "1.1" in tasks
                await page.wait_text(value("/app/jobs", "failed"), "1 failed")
                await page.wait_text(value("/app/jobs", "pending"), "1")
                jobs = await page.text(card("/app/jobs"))
                assert "jobs-1" in jobs and pending in jobs
                assert (await page.text(card("/app/jobs") + " td:nth-child(3)")) == "1"  # running
                await page.wait_text("#session", f"0x{coords[0].session_id:x}")
                await page.screenshot("all")
                for name, path in [
                    ("latch", "/app/leader"),
                    ("lock", "/app/locks/report"),
                    ("tasks", "/app/tasks"),
                    ("scheduler", "/app/jobs"),
                ]:
                    await page.view(name)
                    shown = await page.js(
                        "return [...document.querySelectorAll('section.card')]"
                        ".map(c => c.dataset.path);"
                    )
                    assert path in shown and all(s.startswith("/app/") for s in shown)
                    await page.screenshot(name)
                await page.view("tree")
                await page.wait_text(".tree", "locks")
                await page.screenshot("tree")
            if lock.held:
                await lock.release()


async def _set(event: anyio.Event) -> None:
    event.set()


# --- live changes ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_leader_change_lock_and_task_hand_overs_appear_live(
    coordinator: aiocoord.Coordinator, page: Page
) -> None:
    """A leader change and a lock hand-over are on the page within 1 s, without a reload."""
    coord = coordinator
    with anyio.fail_after(40):
        first = aiocoord.LeaderLatch(coord, "/app/leader", participant_id="pod-a")
        second = aiocoord.LeaderLatch(coord, "/app/leader", participant_id="pod-b")
        await first.start()
        await second.start()
        lock_a = CasLock(coord, "/app/lock", owner="pod-a", lease=30)
        lock_b = CasLock(coord, "/app/lock", owner="pod-b", lease=30)
        assert await lock_a.try_acquire()
        try:
            async with serving(dashboard_app(coord, "/app"), page) as url:
                await page.open(url)
                await page.wait_text(value("/app/leader", "leader"), "pod-a")
                await page.wait_text(value("/app/lock", "state"), "held by pod-a")
                await page.js("window.notReloaded = true;")

                began = time.monotonic()
                await first.aclose()
                await page.wait_text(value("/app/leader", "leader"), "pod-b", LIVE - _since(began))
                await page.wait_text("#changes", "leader pod-a → pod-b", LIVE)

                began = time.monotonic()
                await lock_a.release()
                assert await lock_b.try_acquire()
                await page.wait_text(
                    value("/app/lock", "state"), "held by pod-b", LIVE - _since(began)
                )
                await page.wait_text("#changes", "pod-b (token 0x", LIVE)  # acquired or taken over
                assert await page.js("return window.notReloaded === true;")

                # Task leadership: a newer worker joins and the older one hands its tasks over.
                old = aiocoord.Worker("1.0", id="w-old")
                async with aiocoord.task_leadership(coord, "/app/tasks", worker=old, tasks=["t"]):
                    await page.wait_text(value("/app/tasks", "task|t"), "w-old")
                    new = aiocoord.Worker("2.0", id="w-new")
                    async with aiocoord.task_leadership(
                        coord, "/app/tasks", worker=new, tasks=["t"]
                    ):
                        await page.wait_text(value("/app/tasks", "task|t"), "w-new")
                        await page.wait_text("#changes", "task t: handed over w-old → w-new (2.0)")
                        await page.wait_text("#changes", "worker w-new (2.0) joined")
                        await page.screenshot("changes")
                assert await page.js("return window.notReloaded === true;")
        finally:
            await second.aclose()
            for held in (lock_a, lock_b):
                if held.held:
                    await held.release()


def _since(began: float) -> float:
    return time.monotonic() - began


# --- untrusted data ----------------------------------------------------------------------------

HOSTILE = "<script>window.pwned = 1</script>"
HOSTILE_NODE = "<img src=x onerror=window.pwned=2>"
HOSTILE_DATA = '"><svg onload=window.pwned=3>'


@pytest.mark.anyio
async def test_hostile_names_and_data_are_shown_as_text(
    coordinator: aiocoord.Coordinator, page: Page
) -> None:
    coord = coordinator
    with anyio.fail_after(30):
        await coord.client.create(f"/app/{HOSTILE_NODE}", HOSTILE_DATA.encode(), make_parents=True)
        lock = CasLock(coord, "/app/lock", owner=HOSTILE_DATA, lease=30)
        assert await lock.try_acquire()
        try:
            async with aiocoord.leader_latch(coord, "/app/leader", participant_id=HOSTILE):
                async with serving(dashboard_app(coord, "/app"), page) as url:
                    await page.open(url)
                    await page.wait_text(value("/app/leader", "leader"), HOSTILE)
                    await page.wait_text(value("/app/lock", "state"), f"held by {HOSTILE_DATA}")
                    await page.view("tree")
                    await page.wait_text(".tree", HOSTILE_NODE)
                    await page.wait_text(".tree", HOSTILE_DATA)
                    await page.screenshot("hostile")
                    assert await page.js("return window.pwned === undefined;")
                    injected = await page.js(
                        "return document.querySelectorAll('main script, main img, main svg, "
                        "aside script, aside img, aside svg').length;"
                    )
                    assert injected == 0
        finally:
            if lock.held:
                await lock.release()


# --- SUSPENDED and LOST ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_suspended_and_lost_are_shown_and_the_view_catches_up(
    zk_server: ZooKeeperServer, zk_chroot: str, coordinator: aiocoord.Coordinator, page: Page
) -> None:
    """The page says SUSPENDED, then LOST; back on a new session it shows what changed meanwhile."""
    with FaultProxy(*zk_server.address) as proxy, anyio.fail_after(40):
        watched = aiocoord.connect(proxy.connect_string, namespace=zk_chroot, session_timeout=2.0)
        async with watched as coord:
            first = aiocoord.LeaderLatch(coordinator, "/app/leader", participant_id="pod-a")
            await first.start()
            async with aiocoord.leader_latch(coordinator, "/app/leader", participant_id="pod-b"):
                async with serving(dashboard_app(coord, "/app"), page) as url:
                    await page.open(url)
                    await page.wait_text(value("/app/leader", "leader"), "pod-a")
                    await page.wait_text("#state", "CONNECTED")
                    assert await page.js("return document.getElementById('banner').hidden;")

                    proxy.reject_new()
                    proxy.cut()
                    await page.wait_text("#state", "SUSPENDED")
                    await page.wait_text("#banner", "may be out of date")
                    await page.screenshot("suspended")
                    await first.aclose()  # the leader changes while the dashboard cannot see it
                    await page.wait_text("#state", "LOST")
                    await page.wait_text("#banner", "out of date")
                    assert await page.js("return document.body.classList.contains('stale');")
                    assert await page.text(value("/app/leader", "leader")) == "pod-a"
                    await page.screenshot("lost")

                    proxy.reject_new(False)
                    await page.wait_text("#state", "RECONNECTED")
                    await page.wait_text(value("/app/leader", "leader"), "pod-b")
                    assert await page.js("return document.getElementById('banner').hidden;")
                    assert not await page.js("return document.body.classList.contains('stale');")
                    await page.wait_text("#changes", "connection LOST")


# --- the router in an application ---------------------------------------------------------------


@pytest.mark.anyio
async def test_router_under_a_prefix_with_the_apps_coordinator_one_watch_for_all_viewers(
    zk_server: ZooKeeperServer, zk_chroot: str, page: Page
) -> None:
    import httpx

    app = fastapi.FastAPI(lifespan=lifespan(zk_server.connect_string, namespace=zk_chroot))
    app.include_router(dashboard_router("/app"), prefix="/ops/dashboard")
    with anyio.fail_after(30):
        async with aiocoord.connect(zk_server.connect_string, namespace=zk_chroot) as coord:
            async with aiocoord.leader_latch(coord, "/app/leader", participant_id="pod-1"):
                async with serving(app, page) as url:
                    await page.open(url + "ops/dashboard")  # no trailing slash: redirected
                    await page.wait_text(value("/app/leader", "leader"), "pod-1")
                    assert await page.js("return location.pathname;") == "/ops/dashboard/"
                    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
                        state = (await http.get("ops/dashboard/state")).json()
                        assert state["path"] == "/app" and state["state"] == "CONNECTED"
                        async with http.stream("GET", "ops/dashboard/events") as events:
                            lines = aiter(events.aiter_lines())
                            while not (line := await anext(lines)).startswith("data: "):
                                pass
                            assert json.loads(line[6:])["tree"]["path"] == "/app"
                            watches = app.state.aiocoord.coord.client._session.watches
                            assert len(watches.persistent_keys()) == 1  # two viewers, one watch
                        page_js = await http.get("ops/dashboard/dashboard.js")
                        assert page_js.headers["content-type"].startswith("text/javascript")
                        assert "innerHTML" not in page_js.text
                        csp = (await http.get("ops/dashboard/")).headers["content-security-policy"]
                        assert "script-src 'self'" in csp and "unsafe-inline" not in csp


def test_router_checks_its_arguments() -> None:
    with pytest.raises(aiocoord.InvalidPathError):
        dashboard_router("no-slash")
    with pytest.raises(ValueError, match="depth"):
        dashboard_router("/", depth=-1)
