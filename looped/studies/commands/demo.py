"""The scaled-down reproduction: small looped models on synthetic biographies and on text.

looped demo                  # bios 3 seeds, text 1 seed, into runs/demo/, beside the reference
looped demo --quick          # the same code path at toy size, under a minute: runs/demo-quick/
looped demo --sweep          # first the LR sweeps (both tracks), then each schedule's best LR
looped demo --full           # also the depth-specialisation runs (Fig. 5)
looped demo --catch-up 2,3   # also uniform at 2x and 3x the budget: what it needs to catch up
looped demo --reference      # regenerate results/demo*.json and figures/ (--sweep --full)
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from pathlib import Path

from looped.commands.common import Parser
from looped.config import load_config, to_yaml
from looped.errors import UserError
from looped.studies.bios import FULL_DEPTH_KS, QUICK, DemoSettings
from looped.studies.commands.common import number_list, positive, study_dirs, study_parser
from looped.studies.demo import (
    QUICK_TEXT,
    REFERENCE,
    TEXT,
    calibrate,
    expected_time,
    run_demo,
    write_timing,
)
from looped.studies.textstudy import BlockSettings


def _parser() -> Parser:
    parser = study_parser(
        "looped demo",
        __doc__,
        out="results directory: runs, demo.json, figures (default runs/demo[-quick])",
        reference="the committed reference: results/demo.json and figures/, with the LR sweeps "
        "and the depth runs (--sweep --full) as the docs show them; then run `looped report`",
        quick="toy size, under a minute (what the tests run)",
        overrides="config overrides for every run",
    )
    add = parser.add_argument
    add("--figures", help="figures directory (default: OUT/figures)")
    add("--seeds", type=int, help="seeds of the bios track (default 3)")
    add("--text-seeds", type=int, help="seeds of the text track (default 1; --reference runs 3)")
    sweep = "first sweep the LRs (bios: each schedule's on seed 0; text: one, on seed 100)"
    add("--sweep", action="store_true", help=sweep + "; else the LRs the reference's sweep chose")
    add("--no-text", action="store_true", help="the bios grid only (no text track)")
    add("--full", action="store_true", help="also Fig. 5's depth runs (fixed K=1, 2, 8)")
    add("--time-to", help="also write each phase's time to this JSON (see results/demo_time.json)")
    add("--catch-up", help="also uniform at these multiples of the budget (seed 0), e.g. 2,3")
    add("--fresh", action="store_true", help="retrain every run instead of reusing finished ones")
    add("--quiet", action="store_true", help="no progress bars")
    return parser


def _settings(args: argparse.Namespace) -> DemoSettings:
    """The bios track's settings from the command line (bad values refused, one line each)."""
    base = QUICK if args.quick else DemoSettings()
    settings = DemoSettings(**{**asdict(base), "overrides": base.overrides + args.overrides})
    settings.seeds = positive("--seeds", args.seeds) or settings.seeds
    settings.text_seeds = positive("--text-seeds", args.text_seeds) or settings.text_seeds
    settings.workers = args.workers or settings.workers
    if args.catch_up:
        settings.catch_up = number_list("--catch-up", args.catch_up, example="2,3")
        if any(b <= 1 for b in settings.catch_up):
            raise UserError(
                f"--catch-up {args.catch_up}: multiples must be above 1 (the grid already has 100%)"
            )
    settings.sweep, settings.text = args.sweep or args.reference, not args.no_text
    if args.full or args.reference:  # the reference shows Fig. 5 and the chosen LRs' sweeps
        settings.depth_ks = FULL_DEPTH_KS
    if args.reference and args.text_seeds is None:  # the docs' text figures band 3 seeds
        settings.text_seeds = 3
    return settings


def _text_settings(args: argparse.Namespace) -> BlockSettings:
    """The text track's settings: overrides configure the bios grid, and a `dtype=` both tracks."""
    text = QUICK_TEXT if args.quick else TEXT
    if dtype := [o.split("=", 1)[1] for o in args.overrides if o.startswith("dtype=")]:
        text = replace(text, setup=replace(text.setup, dtype=dtype[-1]))
    return text


def _without_time_to(argv: list[str]) -> list[str]:
    """The command line as a reader would type it: without where its timing was written."""
    drop = {i + 1 for i, arg in enumerate(argv) if arg == "--time-to"}
    drop |= {i for i, arg in enumerate(argv) if arg == "--time-to" or arg.startswith("--time-to=")}
    return [arg for i, arg in enumerate(argv) if i not in drop]


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = _settings(args)
    if args.print_config:  # the config every run starts from; seed, schedule and budget vary
        print(to_yaml(load_config(settings.preset, settings.overrides)), end="")
        return 0
    if args.reference and args.out:
        raise UserError("--reference writes results/ and figures/; leave out --out")
    out = REFERENCE.parent if args.reference else study_dirs(args, "demo")[0]
    figures = Path(args.figures or ("figures" if args.reference else out / "figures"))
    text = _text_settings(args)
    step_s = calibrate(settings)  # about a second: how fast this machine trains the demo
    if not args.quiet:
        print(expected_time(settings, step_s, args.quick), flush=True)
    result = run_demo(settings, out, figures, fresh=args.fresh, quiet=args.quiet, text=text)
    if args.time_to:
        command = " ".join(["looped demo", *_without_time_to(argv)])
        write_timing(result, settings, out, command, step_s, Path(args.time_to))
    return 0
