"""The dashboard's cron and mutex cards in a real headless Chromium (see `tests.browser`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio
import pytest

import aiocoord
from aiocoord import Cron, Firing, Worker
from aiocoord.scheduler import Scheduler
from aiocoord.testing import ZooKeeperServer
from aiocoord.zk import CreateMode
from tests.browser import Page, card, chromium, needs_chromium, serving, value

fastapi = pytest.importorskip("fastapi", reason="the dashboard needs the fastapi extra")

from aiocoord.integrations.dashboard import dashboard_app  # noqa: E402

pytestmark = [pytest.mark.timeout(60), needs_chromium]


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    with chromium() as browser:
        yield browser


@pytest.mark.anyio
async def test_cron_and_mutex_cards(
    zk_server: ZooKeeperServer, zk_chroot: str, driver: Any
) -> None:
    page = Page(driver)
    hosts = zk_server.connect_string
    fired = anyio.Event()
    with anyio.fail_after(45):
        async with (
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as one,
            aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as two,
        ):
            await one.client.create("/app/cron/jobs/broken", b"[1, 2", make_parents=True)
            cron = Cron(one, "/app/cron", worker=Worker("1.0", id="w1"))

            @cron.job(every=timedelta(seconds=0.25))
            async def tick(firing: Firing) -> None:
                fired.set()

            async with (
                cron,
                aiocoord.mutex(one, "/app/lock", participant_id="pod-1") as held,
                anyio.create_task_group() as tg,
            ):
                waiter = aiocoord.Mutex(two, "/app/lock", participant_id="pod-2")
                tg.start_soon(waiter.acquire)
                await fired.wait()
                await one.client.create(
                    "/app/lock/x-lock-", b"\xff", mode=CreateMode.EPHEMERAL_SEQUENTIAL
                )
                async with serving(dashboard_app(one, "/app"), page) as url:
                    await page.open(url)
                    await page.wait_text(value("/app/cron", "job|tick"), "w1 (1.0)")
                    await page.wait_text(value("/app/cron", "last|tick"), "ok")
                    shown = await page.text(card("/app/cron"))
                    assert "every 0:00:00.250000 [UTC]" in shown
                    assert "invalid record" in shown and "broken" in shown
                    await page.wait_text(value("/app/lock", "holder"), "pod-1")
                    await page.wait_text(card("/app/lock"), "pod-2")
                    lock = await page.text(card("/app/lock"))
                    assert f"0x{held.token:x}" in lock and "invalid id" in lock
                    assert "2 waiting" in lock
                    await page.view("cron")
                    await page.screenshot("cron")
                    await page.view("lock")
                    await page.screenshot("mutex")
                tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_every_card_fits_at_1280_px_with_default_ids(
    zk_server: ZooKeeperServer, zk_chroot: str, driver: Any
) -> None:
    """The cron card scrolled sideways at 1400 px with a default worker id (a UUID): the next
    firing and the schedule were out of view."""
    page = Page(driver)
    hosts = zk_server.connect_string
    fired = anyio.Event()
    with anyio.fail_after(45):
        async with aiocoord.connect(hosts, namespace=zk_chroot, session_timeout=4.0) as one:
            cron = Cron(  # the default worker id: a UUID
                one, "/app/cron", worker=Worker("1.0"), timezone="America/Argentina/Buenos_Aires"
            )

            @cron.job(every=timedelta(seconds=0.25))
            async def refresh_the_reporting_warehouse(firing: Firing) -> None:
                fired.set()

            sched = Scheduler(one, "/app/jobs")

            @sched.job("resize")
            async def resize(n: int) -> int:
                return n

            async with (
                cron,
                aiocoord.mutex(one, "/app/lock"),
                aiocoord.leader_latch(one, "/app/leader"),
                aiocoord.task_leadership(
                    one, "/app/tasks", worker=Worker("1.0"), tasks=["a-rather-long-task-name"]
                ),
                sched.worker(),
            ):
                await fired.wait()
                await page.resize(1280)
                try:
                    async with serving(dashboard_app(one, "/app"), page) as url:
                        await page.open(url)
                        await page.wait_text(
                            value("/app/cron", "last|refresh_the_reporting_warehouse"), "ok"
                        )
                        await page.wait_text(card("/app/tasks"), "a-rather-long-task-name")
                        assert await page.overflowing() == []
                        for view in ("cron", "lock", "latch", "tasks", "scheduler"):
                            await page.view(view)
                            assert await page.overflowing() == [], view
                        await page.view("cron")
                        await page.screenshot("cron-1280")
                finally:
                    await page.resize(1440)
