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
from looped.commands.common import Parser, described
from looped.errors import UserError
from looped.studies.report import render


def _parser() -> Parser:
    parser = described("looped report", __doc__)
    parser.add_argument("--root", default=".", help="project root (README.md, docs/, results/)")
    parser.add_argument("--check", action="store_true", help="fail if a doc is out of date")
    parser.add_argument(
        "--results",
        default=None,
        help="demo results to render (default: ROOT/results/demo.json, the committed reference)",
    )
    parser.add_argument(
        "--figures", action="store_true", help="redraw figures/ from results/ (no training)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    root = Path(args.root)
    results = Path(args.results) if args.results else None
    if results is not None and not results.is_file():
        raise UserError(
            f"--results {results}: no such file; `looped demo` writes runs/demo/demo.json"
        )
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
