"""Screenshots of the notebooks and docs as a reader sees them, taken in headless Chromium at a
laptop's window (1280x900 by default). Two places a reader meets them:

- `lab`: JupyterLab, as `make lab` opens it (its settings overrides: Markdown opens as its
  preview, paired .py as notebooks), before any cell runs: static outputs, widget notes, figure
  widths. Each document opens in a fresh workspace, one PNG per screenful; each tab title that
  JupyterLab truncates is reported.
- `web`: a Markdown page on the web, rendered to HTML with GitHub-like styling (markdown-it-py,
  CommonMark and tables; GitHub's README column, 16 px text): its first screen.

    apt-get install chromium && pip install playwright      # the browser is Debian's
    python scripts/screenshots.py lab --out /tmp/screens                 # every notebook and doc
    python scripts/screenshots.py lab notebooks/05_end_to_end.ipynb --out /tmp/screens
    python scripts/screenshots.py lab README.md --out /tmp/readme.png    # a .png: first screen
    python scripts/screenshots.py web README.md --out /tmp/readme_web.png

Nothing in the repository is written (`lab` installs `make lab`'s settings overrides into the
environment's share/, as `make lab` does). Look at the PNGs; the exit status is 1 only when a
tab title is truncated.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [  # this machine's closed network: no background connections, no sandbox
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
# GitHub's Markdown styling, the parts a README uses: its column, type, tables, code and images
CSS = """
body { margin: 0; background: #fff; color: #1f2328;
  font: 16px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }
.markdown-body { box-sizing: border-box; max-width: 980px; margin: 0 auto; padding: 45px; }
h1, h2 { font-weight: 600; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em;
  margin: 24px 0 16px; line-height: 1.25; }
h1 { font-size: 2em; margin-top: 0; } h2 { font-size: 1.5em; }
p, ul, ol, table, pre { margin: 0 0 16px; }
ul { padding-left: 2em; } li + li { margin-top: .25em; }
a { color: #0969da; text-decoration: none; }
code { font: 85% ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  background: #818b981f; padding: .2em .4em; border-radius: 6px; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; line-height: 1.45; overflow: auto; }
pre code { background: none; padding: 0; font-size: 85%; }
table { display: block; width: max-content; max-width: 100%; overflow: auto;
  border-collapse: collapse; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; } th { font-weight: 600; }
tr:nth-child(2n) { background: #f6f8fa; }
img { max-width: 100%; }
"""
# scroll the active document's panel by 90% of a screen; false when it cannot move further
SCROLL = """() => {
    const panes = [...document.querySelectorAll(
        '.jp-WindowedPanel-outer, .jp-MarkdownViewer, .jp-RenderedMarkdown')];
    const el = panes.find(p => p.offsetParent && p.scrollHeight > p.clientHeight);
    if (!el) return false;
    const before = el.scrollTop;
    el.scrollTop += el.clientHeight * 0.9;
    return el.scrollTop > before;
}"""
# the main area's tab titles, and the ones whose label is wider than the tab leaves it
TABS = """() => [...document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tabLabel')].map(
    l => ({title: l.textContent, needs: l.scrollWidth, has: l.clientWidth}))"""


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


def screens(page: Page, shots: list[Path]) -> list[Path]:
    """One screenshot per path in `shots`, scrolling the active document a screen between them;
    stops at the document's end."""
    taken = []
    for path in shots:
        page.screenshot(path=str(path))
        taken.append(path)
        if path is shots[-1] or not page.evaluate(SCROLL):
            break
        page.wait_for_timeout(1500)
    return taken


def lab(page: Page, port: int, doc: str, shots: list[Path]) -> list[str]:
    """Open `doc` in JupyterLab in a fresh workspace, take its screens; the truncated tab titles."""
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{doc}?reset")
    page.wait_for_selector(
        ".jp-Notebook .jp-Cell, .jp-RenderedMarkdown h1", state="attached", timeout=120_000
    )
    page.wait_for_timeout(3000)  # figures and tables settle after the first cell shows
    cut = [f"{t['title']} ({t['needs']} px wide, shown in {t['has']})"
           for t in page.evaluate(TABS) if t["needs"] > t["has"]]  # fmt: skip
    print(f"{doc}: {len(screens(page, shots))} screenshot(s), tab titles {page.evaluate(TABS)}")
    return cut


def web(page: Page, doc: Path, out: Path) -> None:
    """Render `doc` as the web shows Markdown and screenshot its first screen into `out`."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(doc.read_text())
    base = doc.resolve().parent.as_uri() + "/"  # relative links and images resolve as on the web
    html = (
        f'<!doctype html><html><head><meta charset="utf-8"><base href="{base}">'
        f'<style>{CSS}</style></head><body><article class="markdown-body">{body}</article>'
        "</body></html>"
    )
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "page.html").write_text(html)
        page.goto((Path(tmp) / "page.html").as_uri())
        page.wait_for_load_state("load")
        page.screenshot(path=str(out))
    print(f"{doc.relative_to(ROOT)}: {out}")


def shot_paths(doc: str, out: Path, most: int) -> list[Path]:
    """`out` itself when it names a .png (the first screen only), else numbered PNGs inside it."""
    if out.suffix == ".png":
        return [out]
    return [out / f"{Path(doc).stem}_{i:02d}.png" for i in range(most)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("where", choices=["lab", "web"], help="JupyterLab, or the web's Markdown")
    parser.add_argument("docs", nargs="*", help="paths in the repository (lab: default all)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/looped-screens"),
                        help="a folder for the PNGs, or a .png for one document's first screen")  # fmt: skip
    parser.add_argument("--screens", type=int, default=30, help="most screenfuls per document")
    parser.add_argument("--size", default="1280x900", help="the window, WIDTHxHEIGHT in px")
    args = parser.parse_args()
    docs = args.docs or (
        ["README.md"] if args.where == "web" else
        [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("*.ipynb"))]
        + ["README.md", *(f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md")))]
    )  # fmt: skip
    if args.out.suffix == ".png" and len(docs) != 1:
        parser.error("a .png --out takes one document")
    (args.out.parent if args.out.suffix == ".png" else args.out).mkdir(parents=True, exist_ok=True)
    width, height = (int(n) for n in args.size.split("x"))
    cut: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": width, "height": height})
        if args.where == "web":
            for doc in docs:
                out = args.out if args.out.suffix == ".png" else args.out / f"{Path(doc).stem}.png"
                web(page, ROOT / doc, out)
        else:
            install_overrides()
            port = free_port()
            server = start_lab(port)
            try:
                for doc in docs:
                    cut += lab(page, port, doc, shot_paths(doc, args.out, args.screens))
            finally:
                server.terminate()
        browser.close()
    for title in cut:
        print(f"truncated tab title: {title}")
    return 1 if cut else 0


if __name__ == "__main__":
    raise SystemExit(main())
