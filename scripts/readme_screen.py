"""The first screen of a rendered Markdown page, as a reader on the web sees it: the page rendered
to HTML with GitHub-like styling (markdown-it-py, CommonMark and tables; GitHub's README column,
16 px text) and screenshotted by headless Chromium at a laptop's window size.

    apt-get install chromium                                   # the browser is Debian's
    python scripts/readme_screen.py --out /tmp/readme.png      # README.md at 1280x900
    python scripts/readme_screen.py docs/RESULTS.md --size 1280x900 --out /tmp/results.png

Nothing in the repository is written; look at the PNG, not at an exit status. For the page as
JupyterLab shows it, see scripts/lab_screenshots.py.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = [  # this machine's closed network: no background connections, no sandbox
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
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


def html_of(doc: Path) -> str:
    """The page as HTML; relative links and images resolve against the page's folder."""
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(doc.read_text())
    base = doc.resolve().parent.as_uri() + "/"
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><base href="{base}">'
        f'<style>{CSS}</style></head><body><article class="markdown-body">{body}</article>'
        "</body></html>"
    )


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    raise SystemExit("no Chromium on PATH: apt-get install -y chromium")


def screenshot(doc: Path, out: Path, size: str = "1280x900") -> Path:
    """Render `doc` and screenshot its first screen at `size` (WIDTHxHEIGHT) into `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html_of(doc))
        w, h = size.split("x")
        cmd = [chromium(), *CHROMIUM_FLAGS, f"--window-size={w},{h}",
               f"--screenshot={out.resolve()}", f"--user-data-dir={tmp}/profile", page.as_uri()]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("doc", nargs="?", default="README.md", help="a Markdown page of the repo")
    ap.add_argument("--out", type=Path, default=Path("readme_screen.png"))
    ap.add_argument("--size", default="1280x900", help="the window, WIDTHxHEIGHT in px")
    args = ap.parse_args()
    print(screenshot(ROOT / args.doc, args.out, args.size))


if __name__ == "__main__":
    main()
