"""Screenshots of an ``lmms-genbench report`` page, as README's docs/report*.png were made.

    python scripts/report_screenshot.py report.html docs/

writes ``report.png`` (the top of the page: runs, the first task's scores and curve) and
``report-gallery.png`` (the first cards of the gallery), both 1200 × 900 in 256 colours, with Debian's
``chromium`` driven by playwright (``pip install ".[dev]"``; ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="the report's HTML file")
    parser.add_argument("out", type=Path, help="folder for report.png and report-gallery.png")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("report_screenshot: no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        page.goto(args.page.resolve().as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=args.out / "report.png")
        page.evaluate("document.getElementById('gallery').scrollIntoView()")
        # the thumbnails load lazily: wait for those on screen
        page.wait_for_function(
            "Array.from(document.images).filter(i => { const r = i.getBoundingClientRect();"
            " return i.getAttribute('src') && r.bottom > 0 && r.top < innerHeight; }).every(i => i.complete)")
        page.screenshot(path=args.out / "report-gallery.png")
        browser.close()
    from PIL import Image

    for name in ("report.png", "report-gallery.png"):
        # 256 colours: a third of the bytes, and a page of text and thumbnails looks the same
        with Image.open(args.out / name) as shot:
            palette = shot.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        palette.save(args.out / name, optimize=True)
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
