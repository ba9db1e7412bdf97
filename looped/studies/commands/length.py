"""`looped length`: fixed-first's gap to uniform 1..16 as training lengthens, at equal tokens.

    looped length                     # runs/length/: 5 lengths to 1,920 steps, seeds in rounds
    looped length --quick             # every code path at toy size, a few minutes
    looped length --reference         # write results/length.json and figures/length_gap.png
    looped length --collect           # no training: the results of the runs finished so far
    looped length --corpus DIR        # the same study on your text (`looped data text` or any
                                      # `datasets` source, split here by near-duplicate family)
    looped length --resume-from results/length.json   # on a fresh machine: reuse its scored runs
    looped length --d-model 128 --lengths 120,240,480 --max-seeds 4   # a second width
    looped length --arms k2 --resume-from results/length.json --dtype fp32   # one arm now

The method is in `looped.studies.length`; a rerun reuses every finished run.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from looped import paper
from looped.commands.common import number_list
from looped.errors import UserError
from looped.studies.commands.common import study_dirs, study_lock, study_parser, text_study_flags
from looped.studies.length import MICRO, QUICK, LengthSettings, run_study
from looped.studies.report.length import fig_gap
from looped.studies.results import write_result
from looped.studies.textsetup import TextSetup


def parser() -> argparse.ArgumentParser:
    p = study_parser(
        "looped length",
        __doc__,
        reference="results/length.json and figures/length_gap.png (another width: length_dW)",
        quick="toy size, every code path",
    )
    text_study_flags(p, "length", seeds=16)
    p.add_argument("--lengths", help="training lengths in steps, e.g. 120,240,480,960,1920")
    p.add_argument("--lrs", help="the shared LR's sweep, e.g. 1e-3,3e-3,1e-2")
    p.add_argument("--lr-lengths", help="lengths the LR is chosen at (longer: the last's LR)")
    p.add_argument("--d-model", type=int, help="width of the looped layer (default 64)")
    p.add_argument(
        "--dtype",
        choices=("auto", "fp32", "bf16"),
        help="the runs' precision (default auto: bf16 where the CPU has a fast path); a study "
        "resumed on another machine keeps the dtype it was trained in",
    )
    p.add_argument(
        "--arms",
        help=f"the schedules set against uniform, of {','.join(ARMS)} (default all): train one "
        "arm now, collect them all later",
    )
    return p


# the arms set against uniform, by short name, in the study's order
ARMS = {"k4": paper.RECIPES_1B[1], "k2": paper.RECIPE_200M, "micro": MICRO}


def _arms(text: str) -> tuple[str, ...]:
    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names or any(a not in ARMS for a in names):
        raise UserError(f"--arms {text}: name arms among {','.join(ARMS)}, e.g. --arms k2")
    return (paper.UNIFORM, *(spec for a, spec in ARMS.items() if a in names))


def settings_from(a: argparse.Namespace) -> LengthSettings:
    """The settings the command line asks for, each problem refused in one line."""
    s = replace(QUICK if a.quick else LengthSettings(), corpus=a.corpus, resume_from=a.resume_from)
    s.workers = a.workers or s.workers
    lengths = number_list("--lengths", a.lengths, int)
    lr_lengths = number_list("--lr-lengths", a.lr_lengths, int)
    lrs = number_list("--lrs", a.lrs)
    if lengths:
        s.lengths = lengths
        s.lr_lengths = tuple(n for n in s.lr_lengths if n in lengths) or lengths
    s.lr_lengths, s.lrs = lr_lengths or s.lr_lengths, lrs or s.lrs
    if len(s.lengths) < 2 or min(s.lengths) < 4 or len(s.lrs) < 1:
        raise UserError("--lengths needs two or more lengths of at least 4 steps, --lrs one LR")
    if not set(s.lr_lengths) <= set(s.lengths):
        raise UserError("--lr-lengths must be among --lengths")
    s.tuned_at = s.tuned_at if s.tuned_at in s.lengths else 0  # robustness needs its length
    s.max_seeds = a.max_seeds or s.max_seeds
    if a.d_model is not None and (a.d_model < 1 or a.d_model % s.setup.n_head):
        raise UserError(
            f"--d-model {a.d_model}: give a positive width divisible by {s.setup.n_head} heads"
        )  # --quick honours it too: a mode never drops a flag silently
    d_model = a.d_model if a.d_model is not None else s.setup.d_model
    s.setup = replace(s.setup, d_model=d_model, dtype=a.dtype or "auto")
    s.schedules = _arms(a.arms) if a.arms else s.schedules
    return s


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    settings = settings_from(a)
    out, results, figures = study_dirs(a, "length")
    with study_lock(out, a.collect, "looped length"):
        result = run_study(settings, out, train=not a.collect)
    d = settings.setup.d_model
    stem = "length" if d == TextSetup().d_model or a.quick else f"length_d{d}"
    write_result(results / f"{stem}.json", result)
    print(f"wrote {fig_gap(result, figures / f'{stem}_gap.png')}")
    return 0
