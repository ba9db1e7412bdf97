"""Rewrite the generated tables of the docs from results/, or redraw the figures.

looped report            # README.md, docs/*.md, notebooks/README.md from results/*.json
looped report --results runs/demo/demo.json   # ... the bios tables from your demo
looped report --check    # exit 1 if a doc differs from what the files say (CI runs this)
looped report --figures  # redraw every figure in figures/ from results/ (no training)
"""

from __future__ import annotations

import sys
from pathlib import Path

from looped import plotting
from looped.commands.common import described
from looped.errors import UserError
from looped.studies.report import render


def main(argv: list[str] | None = None) -> int:
    parser = described("looped report", __doc__)
    add = parser.add_argument
    add("--root", default=".", help="project root (README.md, docs/, results/)")
    add("--check", action="store_true", help="fail if a doc is out of date")
    add("--results", help="demo results to render (default ROOT/results/demo.json, the reference)")
    add("--figures", action="store_true", help="redraw figures/ from results/ (no training)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    results = Path(args.results) if args.results else None
    if results is not None and not results.is_file():
        made = "`looped demo` writes runs/demo/demo.json"
        raise UserError(f"--results {results}: no such file; {made}")
    if args.figures:
        plotting.files_only()
        for path in render.figures(root):
            print(path)
        return 0
    stale = render.write_docs(root, results, check=args.check)
    if args.check and stale:
        print(f"{', '.join(stale)} out of date with results/; run `looped report`", file=sys.stderr)
        return 1
    return 0
