"""Why does uniform 1..16 learn slower than a fixed K at small scale? Evidence, not a guess.

    looped diagnose                    # bios demo preset, 3 seeds, ~20 min on 2 cores: runs/diagnose/
    looped diagnose --quick            # every code path at toy size, under a minute
    looped diagnose --reference        # the committed evidence: results/diagnose.json, figures/
    looped diagnose --steps 240 --seeds 1 model.d_model=128    # flags and overrides anywhere

The runs and probes are `looped.studies.diagnose`'s; tables and figures `looped.studies.report.diagnose`'s.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from looped.config import to_yaml
from looped.errors import UserError
from looped.studies.commands.common import positive, study_dirs, study_parser
from looped.studies.diagnose import QUICK, DiagnoseSettings, plan, run_diagnose, runs_of


def settings_from(args: argparse.Namespace) -> DiagnoseSettings:
    """The command line's settings, the probes clipped to the run and its last step probed."""
    s = replace(QUICK if args.quick else DiagnoseSettings())
    s.overrides = s.overrides + list(args.overrides)
    s.steps = positive("--steps", args.steps) or s.steps
    s.seeds = positive("--seeds", args.seeds) or s.seeds
    s.workers = args.workers or s.workers
    s.probe_at = (*(x for x in s.probe_at if x < s.steps), s.steps)
    return s


def main(argv: list[str]) -> int:
    parser = study_parser(
        "looped diagnose",
        __doc__,
        reference="results/diagnose.json and figures/",
        quick="toy size, under a minute",
        overrides="config overrides for every run",
    )
    parser.add_argument("--steps", type=int, help="optimizer steps per run (default 150)")
    parser.add_argument("--seeds", type=int, help="seeds per variant (default 3)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    settings = settings_from(args)
    if args.print_config:
        print(to_yaml(runs_of("uniform", plan(settings))[0].cfg), end="")
        return 0
    if args.reference and args.out:
        raise UserError("--reference writes results/ and figures/; leave out --out")
    out, results, figures = study_dirs(args, "diagnose")
    figures = figures if args.reference else out / "figures"  # else a folder beside the runs
    run_diagnose(settings, out, results / "diagnose.json", figures, quiet=args.quiet)
    return 0
