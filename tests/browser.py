"""A real headless Chromium for the dashboard's tests, and uvicorn serving on the test's loop.

Debian's ``chromium`` is driven through ``chromium-driver`` (both installed by
``scripts/setup``); every browser call runs in a worker thread so the loop
keeps serving the page.  Waiting for the page is event-driven: a script in the
page resolves when a MutationObserver sees the expected text, or fails at its
deadline.  Screenshots go to ``build/screenshots/`` (or ``$AIOCOORD_SCREENSHOTS``).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

uvicorn = pytest.importorskip("uvicorn", reason="the dashboard needs the fastapi extra")
webdriver = pytest.importorskip("selenium.webdriver", reason="browser tests need selenium (dev)")

__all__ = ("LIVE", "ROOT", "Page", "card", "chromium", "needs_chromium", "serving", "value")

ROOT = Path(__file__).resolve().parents[1]
SHOTS = Path(os.environ.get("AIOCOORD_SCREENSHOTS", ROOT / "build" / "screenshots"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
LIVE = 1.0  # a change must be on the page this soon, without a reload

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (scripts/setup installs them)",
)

T = TypeVar("T")

_WAIT = """
const [selector, text, done] = arguments;
const found = () => [...document.querySelectorAll(selector)].some(n => n.textContent.includes(text));
if (found()) { done(true); return; }
const watcher = new MutationObserver(() => {
  if (found()) { watcher.disconnect(); done(true); }
});
watcher.observe(document.documentElement,
  {subtree: true, childList: true, characterData: true, attributes: true});
"""


_OVERFLOW = """
const wide = (n) => n.scrollWidth > n.clientWidth + 1;
const out = [];
if (wide(document.documentElement)) out.push("the page");
for (const c of document.querySelectorAll("section.card")) {
  if (wide(c) || [...c.querySelectorAll(".scroll")].some(wide)) out.push(c.dataset.path);
}
return out;
"""


class Page:
    """One Chromium tab, driven from worker threads."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def _run(self, func: Callable[[], T]) -> T:
        return await anyio.to_thread.run_sync(func)

    async def open(self, url: str) -> None:
        await self._run(lambda: self.driver.get(url))

    async def js(self, script: str, *args: Any) -> Any:
        return await self._run(lambda: self.driver.execute_script(script, *args))

    async def wait_text(self, selector: str, text: str, timeout: float = 10.0) -> None:
        """Return once an element matching `selector` contains `text`; fail after `timeout`."""

        def wait() -> None:
            self.driver.set_script_timeout(max(timeout, 0.01))
            self.driver.execute_async_script(_WAIT, selector, text)

        with anyio.fail_after(timeout + 5):
            await self._run(wait)

    async def text(self, selector: str) -> str:
        found: str = await self.js(
            "const n = document.querySelector(arguments[0]); return n ? n.textContent : null;",
            selector,
        )
        return found

    async def view(self, name: str) -> None:
        await self.js("location.hash = arguments[0];", name)
        await self.wait_text("nav a.active", "", timeout=2)
        assert await self.js("return document.body.dataset.view;") == name

    async def screenshot(self, name: str) -> Path:
        path = SHOTS / f"{name}.png"

        def save() -> int:
            SHOTS.mkdir(parents=True, exist_ok=True)
            self.driver.save_screenshot(str(path))
            return path.stat().st_size

        assert await self._run(save) > 0
        return path

    async def resize(self, width: int, height: int = 1000) -> None:
        """Set the window's size (the module's browser is shared: put it back after)."""
        await self._run(lambda: self.driver.set_window_size(width, height))

    async def overflowing(self) -> list[str]:
        """What scrolls sideways on the page: the page itself, or a card (by its path)."""
        found: list[str] = await self.js(_OVERFLOW)
        return found

    async def leave(self) -> None:
        """Close the page's event stream (a server shutting down waits for open streams)."""
        await self.open("about:blank")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium session (a module-scoped fixture's worth: starting one takes a while)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1440,1000")
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    browser = webdriver.Chrome(options=options, service=service)
    try:
        yield browser
    finally:
        browser.quit()


@asynccontextmanager
async def serving(app: Any, page: Page) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port on this loop; yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [listener])
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await page.leave()
            server.should_exit = True


def card(path: str) -> str:
    return f'section.card[data-path="{path}"]'


def value(path: str, field: str) -> str:
    return f'[data-key="{path}|{field}"]'
