"""The recipe probe: is uniform 1..16 slow to leave its early plateau because of our recipe?

    looped recipe                          # runs/recipe/: every cell, cheapest first; resumable
    looped recipe --cells d32 --workers 2  # one cell now, the rest later
    looped recipe --collect                # train nothing: the rows of what finished
    looped recipe --reference --collect    # results/recipe.json and figures/recipe_escape.png
    looped recipe --quick                  # toy size on the standard library, every code path

Uniform alone, at three of the map's cells (where it escaped late, and one where it did not), on
seeds the map never reports. Each run crosses a warmup (10 steps, or 2% or 5% of the run), an
init of the residual output projections (the block counted once, or once per application up to
16: `model.init_loops`) and an LR. Each row records the escape step (the first logged step whose
training loss falls below the bigram table's test NLL) and the validation NLL averaged over
serving depths 1..16. `choose` names the recipe whose uniform trains best on validation.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from looped import paper
from looped.config import warmup_of
from looped.runtime.metrics import read_metrics
from looped.studies import map as text_map
from looped.studies.engine import escape_step, fingerprint, name_of
from looped.studies.results import diverged, own_wall
from looped.studies.runner import Planned, execute
from looped.studies.textsetup import TextSetup, baselines, ensure_corpus, run_config


@dataclass(frozen=True)
class Cell:
    name: str  # the map block it probes
    d_model: int  # width of the looped layer
    tokenizer: str  # the block's BPE
    tpp: float  # its length, in training tokens per non-embedding parameter
    lrs: tuple[float, ...] = (3e-3, 1e-2)  # peak LRs crossed with the recipes


# Cheapest first: d32 (uniform slowest), d64 BPE-512 (uniform on time), d128 BPE-4096 (late).
CELLS = (
    Cell("d32", 32, "bpe:512", 160),
    Cell("d64", 64, "bpe:512", 160),
    Cell("d128-bpe4096", 128, "bpe:4096", 20),  # its shorter length: 1,042 steps
)


@dataclass
class RecipeSettings:
    cells: tuple[Cell, ...] = CELLS
    warmups: tuple[float, ...] = (10, 0.02, 0.05)  # an int: steps; a fraction: of the run
    inits: tuple[int, ...] = (1, 16)  # model.init_loops
    seeds: tuple[int, ...] = (200, 201)  # never reported by any map cell
    corpus: str = text_map.CORPUS  # as the map's
    setup: TextSetup = field(default_factory=lambda: TextSetup(dtype="fp32"))  # batch, windows
    workers: int = 2  # single-threaded worker processes


QUICK = RecipeSettings(
    cells=(Cell("d16", 16, "bpe:512", 8, (1e-2,)),),
    warmups=(4, 0.05),
    inits=(1, 16),
    seeds=(200, 201),
    corpus="stdlib",
    setup=replace(text_map.QUICK.setup),
)


def recipe_of(warmup: float, init: int) -> str:
    """A recipe's short name: `w10_i1` (10 warmup steps, block counted once), `w5pct_i16`."""
    w = f"{round(warmup * 100)}pct" if isinstance(warmup, float) else str(warmup)
    return f"w{w}_i{init}"


def cell_setup(cell: Cell, settings: RecipeSettings) -> TextSetup:
    block = text_map.Block(cell.name, cell.d_model, cell.tokenizer, (cell.tpp,))
    return replace(
        settings.setup, d_model=cell.d_model, n_head=block.n_head, tokenizer=cell.tokenizer
    )


def cell_runs(cell: Cell, settings: RecipeSettings, corpus: dict, rank: int) -> list[Planned]:
    """Every (warmup, init, LR, seed) run of a cell, uniform 1..16, from scratch."""
    setup = cell_setup(cell, settings)
    block = text_map.Block(cell.name, cell.d_model, cell.tokenizer, (cell.tpp,))
    steps = text_map.steps_for(block, setup)[0]
    runs = []
    for warmup in settings.warmups:
        frac = warmup if isinstance(warmup, float) else 0.0
        for init in settings.inits:
            mine = replace(setup, warmup_frac=frac, init_loops=init)
            mine = mine if frac else replace(mine, warmup_steps=int(warmup))
            for lr in cell.lrs:
                for seed in settings.seeds:
                    kw = {"schedule": paper.UNIFORM, "lr": lr, "seed": seed, "steps": steps}
                    name = f"{cell.name}_{name_of(paper.UNIFORM, lr, seed, steps)}"
                    name += "_" + recipe_of(warmup, init)
                    cfg = run_config(mine, corpus, **kw)
                    runs.append(
                        Planned(name, cfg, paper.UNIFORM, steps, may_diverge=True, priority=rank)
                    )
    return runs


def row_of(p: Planned, runs_dir: Path, bigram: float, cell: Cell) -> dict:
    """What a finished probe run shows: its recipe, its escape step and its validation NLL."""
    run_dir = runs_dir / p.name
    metrics = read_metrics(run_dir)
    train = [m for m in metrics if m["kind"] == "train"]
    optim = p.cfg.optim
    row = {
        "run": p.name,
        "config_sha": fingerprint(p.cfg),
        "cell": cell.name,
        "recipe": recipe_of(optim.warmup_frac or optim.warmup_steps, p.cfg.model.init_loops),
        "warmup_steps": warmup_of(optim, p.steps),
        "warmup_frac": optim.warmup_frac,
        "init_loops": p.cfg.model.init_loops,
        "lr": p.lr,
        "seed": p.seed,
        "steps": p.steps,
        "escape_step": escape_step(train, bigram),
        "own_wall": own_wall(train),
    }
    if diverged(run_dir):
        return row | {"val_nll": math.inf, "val_by_depth": {}}
    nll = [m for m in metrics if m["kind"] == "eval"][-1]["token_nll"]
    return row | {"val_nll": float(np.mean(list(nll.values()))), "val_by_depth": nll}


def run_probe(settings: RecipeSettings, out: Path, train: bool = True) -> dict:
    """Train every cell's runs (one pool, cheapest cell first) unless collecting, then the rows
    of every finished run, each (cell, recipe, LR) summed up, and the recipe they choose."""
    cells = []
    for rank, cell in enumerate(settings.cells):
        setup = cell_setup(cell, settings)
        corpus = ensure_corpus(setup, out, settings.corpus, quiet=False)
        bigram = baselines(setup, corpus, out / f"baselines-{cell.name}.json")["test"]["bigram"]
        cells.append((cell, bigram, cell_runs(cell, settings, corpus, rank)))
    if train:
        todo = [p for _, _, runs in cells for p in runs]
        execute(todo, out / "runs", settings.workers, fresh=False, quiet=False)
    rows = [
        row_of(p, out / "runs", bigram, cell)
        for cell, bigram, runs in cells
        for p in runs
        if (out / "runs" / p.name / "summary.json").is_file()
    ]
    bigrams = {cell.name: bigram for cell, bigram, _ in cells}
    complete = [
        c.name for c, _, runs in cells if len(runs) == sum(r["cell"] == c.name for r in rows)
    ]
    return {
        "meta": {"settings": asdict(settings), "bigram": bigrams, "complete": complete},
        "rows": rows,
        "summary": summarise(rows),
        "chosen": choose(summarise(rows), complete),
    }


def summarise(rows: list[dict]) -> list[dict]:
    """Each (cell, recipe, LR): its seeds' mean validation NLL and their escape steps."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["cell"], r["recipe"], r["lr"]), []).append(r)
    return [
        {
            "cell": cell,
            "recipe": recipe,
            "lr": lr,
            "seeds": [r["seed"] for r in rs],
            "val_nll": float(np.mean([r["val_nll"] for r in rs])),
            "escapes": [r["escape_step"] for r in rs],
        }
        for (cell, recipe, lr), rs in sorted(groups.items())
    ]


def choose(summary: list[dict], complete: list[str]) -> dict | None:
    """The recipe whose uniform trains best: at each complete cell, each recipe's best LR's mean
    validation NLL relative to the best recipe's there, averaged over the complete cells."""
    if not complete:
        return None
    best: dict[str, dict[str, float]] = {}
    for s in summary:
        if s["cell"] in complete:
            at = best.setdefault(s["recipe"], {})
            at[s["cell"]] = min(at.get(s["cell"], math.inf), s["val_nll"])
    top = {c: min(b[c] for b in best.values()) for c in complete}
    excess = {
        recipe: float(np.mean([b[c] / top[c] - 1 for c in complete])) for recipe, b in best.items()
    }
    return {"recipe": min(excess, key=excess.get), "excess": excess, "cells": complete}
