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
    parser.add_argument(
        "--runs", nargs="+", required=True, help="run directories, or folders holding them"
    )
    parser.add_argument(
        "--out", default="figures/runs", help="where to write PNGs (default figures/runs)"
    )
    parser.add_argument(
        "--demo-json",
        action="store_true",
        help="--runs is a demo.json file: redraw the demo figures",
    )
    args = parser.parse_args(argv)
    plotting.files_only()
    if args.demo_json:
        paths = bios.paper_figures(json.loads(Path(args.runs[0]).read_text()), args.out)
    else:
        paths = runs.figures(args.runs, args.out)
    for p in paths:
        print(p)
    return 0
