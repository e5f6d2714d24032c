"""A real headless Chromium on loopback pages: the DOM after the page's scripts ran (`page_dom`), its text
(`page_text`), or a screenshot (`screenshot`). Chromium's own headless mode, no driver: each call is one
`chromium --headless=new` process with a fresh profile, so every page is the browser's first visit (no
localStorage from an earlier page). `--virtual-time-budget` lets the page's scripts and requests run for
that much virtual time (idle waits are skipped: a page that settles in 2 s of work returns in 2 s).
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")
BUDGET_MS = 60_000  # MLflow's charts load their plotting code lazily: 15 s of virtual time left them spinning


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, NAMES) if path), None)


def _chromium(chromium: str, url: str, *options: str, size: tuple[int, int], budget_ms: int) -> str:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = subprocess.run(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
             f"--window-size={size[0]},{size[1]}", *options, url],
            capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def page_dom(chromium: str, url: str, size: tuple[int, int] = (1400, 2400), budget_ms: int = BUDGET_MS) -> str:
    """The page's DOM once its scripts ran."""
    return _chromium(chromium, url, "--dump-dom", size=size, budget_ms=budget_ms)


def page_text(dom: str) -> str:
    """What the page shows as text: the DOM without its scripts, styles and tags, whitespace collapsed."""
    dom = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


def screenshot(chromium: str, url: str, path: Path, size: tuple[int, int] = (1400, 900),
               budget_ms: int = BUDGET_MS) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _chromium(chromium, url, f"--screenshot={path}", size=size, budget_ms=budget_ms)
    assert path.is_file() and path.stat().st_size > 0, path
    return path
