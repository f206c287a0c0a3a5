"""Take the README's screenshot (docs/screenshot.png): the Attention page on the shipped Bible model.

    .venv/bin/python scripts/screenshot.py [--out docs/screenshot.png] [--text "..."] [--kind cross --layer 3 --head 2]

Starts `streamlit run app.py` (shipped checkpoints only), opens the Attention page in headless
Chromium at 1400x900 with a held-out sentence, waits until the head grid and the zoomed head are
drawn, scrolls them into view and saves the window. Re-run it when a better checkpoint ships.
The PNG is reduced to a 256-colour palette when it is over --max-kb.
"""
from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import browser as driver  # noqa: E402
from explorer.inspection.trace import KINDS  # noqa: E402
from explorer.store.run_files import RUNS_ENV  # noqa: E402

TEXT = "Y llamó Jehová Dios al hombre, y le dijo: ¿Dónde estás tú?"      # Gen 3:9, held out


def take(out: Path, text: str, checkpoint: str, view: dict, max_kb: int) -> int:
    from playwright.sync_api import sync_playwright

    env = {RUNS_ENV: tempfile.mkdtemp(prefix="screenshot_runs_")}
    with driver.streamlit_server("app.py", env=env) as server, sync_playwright() as playwright:
        browser = driver.launch_chromium(playwright)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{server.url}/attention?{urlencode({'ckpt': checkpoint, 'text': text, **view})}")
        page.wait_for_selector(".st-key-attn_zoom .js-plotly-plot svg.main-svg", timeout=300_000)
        page.wait_for_selector(".st-key-attn_grid .js-plotly-plot svg.main-svg", timeout=300_000)
        driver.wait_idle(page, 120)
        page.get_by_text("Attention", exact=True).first.scroll_into_view_if_needed()
        page.locator("[data-testid='stMain']").evaluate(
            "m => { const r = document.querySelector('[data-testid=stRadio]').getBoundingClientRect();"
            " (m.querySelector('[data-testid=stMainBlockContainer]')?.parentElement || m).scrollBy(0, r.top - 130); }")
        page.mouse.move(5, 890)                                      # no hover label in the picture
        png = page.screenshot()
        browser.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    if len(png) > max_kb * 1024:
        from PIL import Image

        image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=256, dither=Image.Dither.NONE)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
        png = buffer.getvalue()
    out.write_bytes(png)
    print(f"{out}: {len(png) / 1024:.0f} KB")
    return 0 if len(png) <= max_kb * 1024 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=driver.ROOT / "docs" / "screenshot.png")
    parser.add_argument("--text", default=TEXT)
    parser.add_argument("--checkpoint", default="bible-es-en")
    parser.add_argument("--kind", default="encoder", choices=KINDS,
                        help="attention shown (the early Bible checkpoint's cross-attention is still diffuse)")
    parser.add_argument("--layer", type=int, default=1, help="1-based, as in the app")
    parser.add_argument("--head", type=int, default=4, help="1-based, as in the app")
    parser.add_argument("--max-kb", type=int, default=400)
    args = parser.parse_args()
    problem = driver.chromium_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return take(args.out, args.text, args.checkpoint, {"kind": args.kind, "layer": args.layer, "head": args.head},
                args.max_kb)


if __name__ == "__main__":
    raise SystemExit(main())
