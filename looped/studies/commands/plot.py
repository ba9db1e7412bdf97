"""The paper's figures from run directories.

    looped plot --runs runs/           # Fig. 2, 3, 8 analogs from any run directories
    looped plot --runs runs/ --out figures/full
    looped plot --runs results/demo.json --demo-json   # redraw the demo's figures

The figures are drawn by `looped.studies.report.runs` (and `looped.studies.report.bios` for a demo.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from looped import plotting
from looped.commands.common import described
from looped.studies.report import bios, runs


def main(argv: list[str]) -> int:
    parser = described("looped plot", __doc__)
    add = parser.add_argument
    add("--runs", nargs="+", required=True, help="run directories, or folders holding them")
    add("--out", default="figures/runs", help="where to write PNGs (default figures/runs)")
    add("--demo-json", action="store_true", help="--runs is a demo.json: redraw its figures")
    args = parser.parse_args(argv)
    plotting.files_only()
    if args.demo_json:
        paths = bios.paper_figures(json.loads(Path(args.runs[0]).read_text()), args.out)
    else:
        paths = runs.figures(args.runs, args.out)
    for p in paths:
        print(p)
    return 0
