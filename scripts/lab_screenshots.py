"""Screenshots of the notebooks and docs as JupyterLab shows them, taken in headless Chromium:
what a reader sees before any kernel runs (static outputs, widget notes, figure widths).

    apt-get install chromium && pip install playwright      # the browser is Debian's
    python scripts/lab_screenshots.py --out /tmp/screens     # one PNG per screenful

It starts `jupyter lab` on a free port at the repository root (no token, no browser), opens each
notebook and README.md / docs/*.md in turn, and scrolls through each one a screen at a time.
Nothing in the repository is written; look at the PNGs, not at an exit status.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [  # this machine's closed network: no background connections, no sandbox
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install_overrides() -> None:
    """`make lab`'s settings (Markdown opens as its preview, paired .py as notebooks), in the
    environment's share/ where JupyterLab reads them."""
    target = Path(sys.prefix) / "share/jupyter/lab/settings/overrides.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text((ROOT / "notebooks/jupyterlab-overrides.json").read_text())


def start_lab(port: int) -> subprocess.Popen:
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
         "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={ROOT}",
         "--allow-root"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=1)
            return lab
        except OSError:
            time.sleep(0.5)
    lab.kill()
    raise SystemExit("jupyter lab did not start within 60 s")


def shoot(page: Page, url: str, stem: Path, screens: int) -> list[Path]:
    """Open `url`, then one screenshot per screenful, scrolling the active document's panel."""
    page.goto(url)
    page.wait_for_selector(
        ".jp-Notebook .jp-Cell, .jp-RenderedMarkdown h1", state="attached", timeout=120_000
    )
    page.wait_for_timeout(3000)  # figures and tables settle after the first cell shows
    shots = []
    for i in range(screens):
        path = stem.with_name(f"{stem.name}_{i:02d}.png")
        page.screenshot(path=str(path))
        shots.append(path)
        moved = page.evaluate(
            """() => {
                const panes = [...document.querySelectorAll(
                    '.jp-WindowedPanel-outer, .jp-MarkdownViewer, .jp-RenderedMarkdown')];
                const el = panes.find(p => p.offsetParent && p.scrollHeight > p.clientHeight);
                if (!el) return false;
                const before = el.scrollTop;
                el.scrollTop += el.clientHeight * 0.9;
                return el.scrollTop > before;
            }"""
        )
        if not moved:
            break
        page.wait_for_timeout(1500)
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/looped-screens", help="where the PNGs go")
    parser.add_argument("--screens", type=int, default=30, help="most screenfuls per document")
    parser.add_argument("--width", type=int, default=1280, help="browser window width (px)")
    parser.add_argument("--only", default="", help="only documents whose path holds this text")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    install_overrides()
    port = free_port()
    lab = start_lab(port)
    docs = [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
    docs += ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
    docs = [d for d in docs if args.only in d]
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_FLAGS)
            page = browser.new_page(viewport={"width": args.width, "height": 900})
            for doc in docs:
                url = f"http://127.0.0.1:{port}/lab/tree/{doc}"
                shots = shoot(page, url, out / Path(doc).stem, args.screens)
                print(f"{doc}: {len(shots)} screenshots")
            browser.close()
    finally:
        lab.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
