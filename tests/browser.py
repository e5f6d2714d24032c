"""A real headless Chromium on loopback pages, driven over its DevTools protocol: `open_page` loads a page
and waits (in real time) until its DOM shows what the caller waits for, then returns the DOM and, if
asked, writes a screenshot; `page_text` is what the page shows as text.

Chromium's own headless mode, no driver: one `chromium --headless=new` process per page with a fresh
profile, so every page is the browser's first visit (no localStorage from an earlier page). The protocol
is spoken over a websocket with aiohttp (installed with MLflow). Waiting for what the page should show,
not for a fixed budget of virtual time (`--virtual-time-budget`): MLflow's metric charts load their
plotting code lazily, and under virtual time they were still spinning in about a third of the loads.
"""

from __future__ import annotations

import asyncio
import base64
import html
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

NAMES = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_S = 90.0  # a loaded 2-core machine takes seconds to parse MLflow's scripts


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, NAMES) if path), None)


def page_text(dom: str) -> str:
    """What the page shows as text: the DOM without its scripts, styles and tags, whitespace collapsed."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def open_page(chromium: str, url: str, ready: Callable[[str], bool] = lambda dom: True,
              size: tuple[int, int] = (1400, 900), screenshot: Path | None = None,
              timeout_s: float = TIMEOUT_S) -> str:
    """The page's DOM once `ready(page_text(DOM))` holds (or `timeout_s` passed: the caller's assertions
    then say what is missing), a second later still (a last chart drawn); its screenshot to `screenshot`."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-", ignore_cleanup_errors=True) as profile:
        browser = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}", "--remote-debugging-port=0", f"--window-size={size[0]},{size[1]}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port_file = Path(profile) / "DevToolsActivePort"  # Chromium writes its port there
            deadline = time.monotonic() + timeout_s
            while not port_file.is_file() or not port_file.read_text().strip():
                assert browser.poll() is None and time.monotonic() < deadline, "chromium did not start"
                time.sleep(0.1)
            port = int(port_file.read_text().split()[0])
            return asyncio.run(_load(port, url, ready, screenshot, deadline))
        finally:  # the browser and its renderer, GPU and utility processes (its own process group)
            os.killpg(browser.pid, signal.SIGTERM)
            try:
                browser.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(browser.pid, signal.SIGKILL)
                browser.wait()


async def _load(port: int, url: str, ready: Callable[[str], bool], screenshot: Path | None,
                deadline: float) -> str:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://127.0.0.1:{port}/json/list") as response:
            page = next(t for t in await response.json() if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = itertools.count(1)

            async def call(method: str, **params: Any) -> dict:
                number = next(ids)
                await ws.send_json({"id": number, "method": method, "params": params})
                async for message in ws:  # events arrive in between: skip them
                    answer = message.json()
                    if answer.get("id") == number:
                        assert "error" not in answer, answer
                        return answer["result"]
                raise ConnectionError("chromium closed the DevTools connection")

            async def dom() -> str:  # "" while the page is between documents (navigating)
                found = await call("Runtime.evaluate", expression="document.documentElement.outerHTML",
                                   returnByValue=True)
                return found.get("result", {}).get("value") or ""

            await call("Page.navigate", url=url)
            while not ready(page_text(await dom())) and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
            await asyncio.sleep(1.0)
            if screenshot is not None:
                shot = await call("Page.captureScreenshot", format="png")
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
            return await dom()
