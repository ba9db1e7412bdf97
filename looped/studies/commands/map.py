"""`looped map`: where fixed-first holds, by model width, vocabulary and length, on one pass.

    looped map                                   # runs/map/: every block, priority order
    looped map --blocks d32,d64 --workers 2      # some blocks now, the rest in a later session
    looped map --collect                         # train nothing: the results of what finished
    looped map --resume-from results/map.json    # on a fresh machine: reuse its scored runs
    looped map --reference --collect             # write results/map.json and figures/map_*.png
    looped map --quick                           # toy size on the standard library, every path
    looped map --gpu --out runs/map-gpu          # a GPU: widths to 512, lengths over 100x
    looped map --probe                           # the recipe probe: uniform's warmup, residual
                                                 # init and LR, unreported seeds; recipe.json
    looped map --probe --blocks late-w2pct_i1-lr0.001,...   # the late-start probe's candidates
    looped map --recipe w2pct_i16                # the map under another recipe: map-w2pct_i16.json

The method is in `looped.studies.map`; a rerun reuses every finished run.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from looped.errors import UserError
from looped.studies.commands.common import study_dirs, study_lock, study_parser
from looped.studies.map import (
    BLOCKS,
    GPU,
    PROBE,
    QUICK,
    QUICK_PROBE,
    MapSettings,
    check_resume,
    choose_late,
    choose_recipe,
    own_recipes,
    run_map,
    time_blocks,
    with_recipe,
)
from looped.studies.report.map import figures as map_figures
from looped.studies.report.recipe import fig_escape, probe_rows
from looped.studies.results import write_result


def parser() -> argparse.ArgumentParser:
    p = study_parser(
        "looped map",
        __doc__,
        reference="results/map.json and figures/map_gap.png, map_frontier.png",
        quick="toy size on the standard library, every code path",
    )
    add = p.add_argument
    add("--corpus", help="a named corpus, a `looped data text` directory or a `datasets` source")
    add("--max-seeds", type=int, help="stop adding seed rounds past this many (8)")
    add(
        "--lrs",
        help="the LR sweep, comma-separated (1e-3,3e-3,1e-2; a choice at an edge extends it)",
    )
    add("--collect", action="store_true", help="train nothing: the results of what finished")
    add("--resume-from", help="earlier map.json files, comma-separated: their scored runs reused")
    blocks = ",".join(b.name for b in BLOCKS)
    add("--blocks", help=f"blocks to run, of {blocks} (--gpu: d64..d512)")
    add("--gpu", action="store_true", help="the GPU map: widths to 512, 100x lengths")
    probe = "the recipe probe: uniform at three cells under each warmup and residual init, "
    probe += "LR seeds only; writes recipe.json with the recipe its validation NLL chooses"
    add("--probe", action="store_true", help=probe)
    recipe = "the map under a recipe: w<steps>_i<loops> or w<N>pct_i<loops> (warmup, block "
    recipe += "applications the residual init counts); its own runs and map-RECIPE.json"
    add("--recipe", help=recipe)
    timing = "train nothing: time a step at every K=1..16 for each width REPS times, and add "
    timing += "each arm's wall-clock saving over its seeds' exact draws to map.json"
    add("--time", type=int, metavar="REPS", help=timing)
    return p


def settings_from(a: argparse.Namespace) -> MapSettings:
    """The settings the command line asks for, each problem refused in one line."""
    if a.quick and a.gpu:
        raise UserError("--quick and --gpu are two sizes; give one")
    if a.probe and a.gpu:
        raise UserError("--probe runs on the CPU map's cells; leave out --gpu")
    if a.probe and a.recipe:
        raise UserError("--probe crosses the recipes itself; leave out --recipe")
    sizes = (QUICK_PROBE, PROBE) if a.probe else (QUICK, GPU if a.gpu else MapSettings())
    s = replace(sizes[0] if a.quick else sizes[1], resume_from=a.resume_from)
    s.corpus = a.corpus or s.corpus
    s.workers = a.workers or s.workers
    if a.blocks:
        names = [n.strip() for n in a.blocks.split(",") if n.strip()]
        known = {b.name: b for b in s.blocks}
        if not names or any(n not in known for n in names):
            raise UserError(f"--blocks {a.blocks}: name blocks among {','.join(known)}")
        s.blocks = tuple(known[n] for n in names)
    s.max_seeds = a.max_seeds or s.max_seeds
    s.lrs = lrs_from(a.lrs) if a.lrs else s.lrs
    return with_recipe(s, a.recipe) if a.recipe else s


def lrs_from(text: str) -> tuple[float, ...]:
    """--lrs 3.33e-4,1e-3 -> (0.000333, 0.001): a sweep that leaves out an LR an earlier sweep
    of the same runs already lost (the sweep's runs are the costliest of a block)."""
    try:
        lrs = tuple(sorted({float(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        lrs = ()
    if not lrs or any(not 0 < lr < 1 for lr in lrs):
        raise UserError(f"--lrs {text}: give learning rates between 0 and 1, e.g. --lrs 1e-3,3e-3")
    return lrs


def stem(a: argparse.Namespace, settings: MapSettings) -> str:
    """The results file's and the figures' name: recipe, map, or map-RECIPE (another recipe)."""
    if a.probe:
        return "recipe"
    recipe = next((b.recipe for b in settings.blocks if b.recipe), "")
    return f"map-{recipe}" if recipe else "map"


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    settings = settings_from(a)
    check_resume(settings)  # before any corpus is tokenized (minutes)
    out, results, figures = study_dirs(a, "map")
    path = results / f"{stem(a, settings)}.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    if a.time is not None:
        if a.time < 2:
            raise UserError(f"--time {a.time}: a spread needs 2 or more repeats, e.g. --time 5")
        # a width timed again replaces its own entry; the others keep theirs (each says its machine)
        timed = old.get("wallclock", {}) | time_blocks(settings, out, a.time)
        write_result(path, old | {"wallclock": timed})
        return 0
    with study_lock(out, a.collect, "looped map"):
        result = run_map(settings, out, train=not a.collect, name=path.name)
    # a block the file holds and --blocks left out this time stays as it was
    result["blocks"] = {**old.get("blocks", {}), **result["blocks"]}
    if a.probe:
        # the choice reads every probe block, not only those --blocks trained this time
        every = replace(settings, blocks=(QUICK_PROBE if a.quick else PROBE).blocks)
        result["chosen_recipe"] = chosen = choose_recipe(result["blocks"], every)
        result["own_recipes"] = own_recipes(result["blocks"], every, (chosen or {}).get("recipe"))
        result["late_start"] = choose_late(result["blocks"], every)
    if "wallclock" in old:  # measured apart, kept across collections
        result["wallclock"] = old["wallclock"]
    write_result(path, result)
    drawn = map_figures(result, figures, path.stem)  # none while every block is in its LR sweep
    if a.probe and probe_rows(result):
        drawn.append(fig_escape(result, figures / "recipe_escape.png"))
    for path in drawn:
        print(f"wrote {path}")
    return 0
