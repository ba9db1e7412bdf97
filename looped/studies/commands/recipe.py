"""`looped recipe`: the recipe probe: warmup, residual init and LR against uniform's slow start.

    looped recipe                          # runs/recipe/: every cell, cheapest first; resumable
    looped recipe --cells d32 --workers 2  # one cell now, the rest later
    looped recipe --collect                # train nothing: the rows of what finished
    looped recipe --reference --collect    # results/recipe.json and figures/recipe_escape.png
    looped recipe --quick                  # toy size on the standard library, every code path

The method is in `looped.studies.recipe`; a rerun reuses every finished run.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from looped.errors import UserError
from looped.studies.commands.common import study_dirs, study_lock, study_parser
from looped.studies.recipe import QUICK, RecipeSettings, run_probe
from looped.studies.results import write_result


def parser() -> argparse.ArgumentParser:
    p = study_parser(
        "looped recipe",
        __doc__,
        reference="results/recipe.json and figures/recipe_escape.png",
        quick="toy size on the standard library, every code path",
    )
    names = ",".join(c.name for c in RecipeSettings().cells)
    p.add_argument("--cells", help=f"cells to run, of {names}")
    p.add_argument("--collect", action="store_true", help="train nothing: what finished")
    return p


def settings_from(a: argparse.Namespace) -> RecipeSettings:
    s = replace(QUICK if a.quick else RecipeSettings())
    s.workers = a.workers or s.workers
    if a.cells:
        known = {c.name: c for c in s.cells}
        names = [n.strip() for n in a.cells.split(",") if n.strip()]
        if not names or any(n not in known for n in names):
            raise UserError(f"--cells {a.cells}: name cells among {','.join(known)}")
        s.cells = tuple(known[n] for n in names)
    return s


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    settings = settings_from(a)
    out, results, _ = study_dirs(a, "recipe")
    with study_lock(out, a.collect, "looped recipe"):
        result = run_probe(settings, out, train=not a.collect)
    write_result(results / "recipe.json", result)
    return 0
