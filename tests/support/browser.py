"""Opening a report in a real headless Chromium (Debian's ``chromium`` driven by
playwright's Python API), and what a person would see of its gallery.

``.ci/run`` installs the browser where it can (root and apt-get); elsewhere the tests
that need it skip, naming what is missing.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def chromium_or_skip() -> str:
    """The Chromium executable, or a skip that says what to install."""
    pytest.importorskip("playwright.sync_api", reason='playwright is not installed (pip install ".[dev]")')
    found = next((shutil.which(name) for name in CHROMIUM_NAMES if shutil.which(name)), None)
    if found is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium; .ci/run installs it when "
                    "it runs as root with apt-get)")
    return found


@contextmanager
def open_report(path: Path, width: int = 1400, height: int = 1000):
    """``(page, problems)`` for the report at ``path`` opened from disk; ``problems``
    collects console errors, uncaught script errors and failed requests."""
    from playwright.sync_api import sync_playwright

    executable = chromium_or_skip()
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url[:80]}"))
            page.goto(Path(path).resolve().as_uri())
            page.wait_for_load_state("load")
            yield page, problems
        finally:
            browser.close()


def shown_gallery_images(page) -> list[dict]:
    """Every image of the gallery's shown cards, each scrolled into view (they load
    lazily) and waited for: ``naturalWidth`` 0 means a broken image."""
    return page.evaluate("""async () => {
        const images = Array.from(document.querySelectorAll('#cards .card:not([hidden]) img'));
        for (const img of images) {
            img.scrollIntoView();
            if (!img.complete) await new Promise(done => { img.onload = img.onerror = done; });
        }
        return images.map(i => ({alt: i.alt, width: i.naturalWidth, src: (i.getAttribute('src') || '').slice(0, 22)}));
    }""")


def status(page) -> str:
    return page.locator("#gallery-status").inner_text()
