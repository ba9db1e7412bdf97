"""The bridge: fixed-first's gap to uniform 1..16 as training lengthens, at equal tokens.

    looped length                     # runs/length/: 6 lengths x 4 schedules x 3 seeds (~1.7 h)
    looped length --quick             # every code path at toy size, about two minutes
    looped length --reference         # write results/length.json and figures/length_gap.png
    looped length --workers 1         # leave a core free; finished runs are reused on a rerun

The paper measures fixed-first within 0.5% of uniform at 200M-1B parameters and billions of
tokens; a laptop sees a 90k-parameter model and a few million tokens, where uniform 1..16 lags.
This study asks whether that lag shrinks as training lengthens, and whether drawing a K per
micro-batch (so each step's gradient averages over depths) removes it:

1. Every schedule (uniform, uniform per micro-batch, fixed-first K=2 for 67%, K=4 for 80%) at
   every LR in the sweep, seeds 0 and 1, at every length. Warmup-stable-decay lets one run per
   (schedule, LR, seed) carry every shorter run: a shorter uniform run branches off at its decay,
   a shorter fixed-first run at its switch (`training.lineage.branch_point` checks both), so six lengths
   cost about 1.3 long runs.
2. Each (schedule, length) takes the LR with the lowest mean NLL over depths 1..16 on the
   validation windows, averaged over seeds 0 and 1; a choice at the sweep's edge is flagged.
3. Seed 2 at each chosen LR; then every chosen run is scored on the test windows, beside the
   unigram and bigram count tables on the same windows (`eval.baselines`).
4. Per length: each schedule's paired gap to uniform with its 95% interval and verdict
   (`eval.stats`); the trend of the signed gap against log2(tokens).

Resumable: a rerun reuses every finished run and retrains only what is missing.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

import looped.eval.stats as stats
from looped import paper
from looped.config import TrainConfig
from looped.errors import UserError
from looped.eval.heldout import heldout_nll
from looped.experiments.command import study_parser
from looped.experiments.plan import Planner
from looped.experiments.results import (
    diverged,
    machine_name,
    own_wall,
    write_result,
)
from looped.experiments.runner import RunSpec, execute
from looped.experiments.textsetup import TextSetup, baselines, ensure_corpus, run_config
from looped.experiments.textsetup import heldout_windows as split_batches
from looped.model import LoopedTransformer
from looped.report import length as report
from looped.report.length import LABELS
from looped.runtime.lock import dir_lock
from looped.runtime.metrics import read_metrics

MICRO = paper.UNIFORM_PER_MICRO  # uniform with a K per micro-batch (4 micro-batches)
SCHEDULES = (paper.UNIFORM, MICRO, paper.RECIPE_200M, paper.RECIPES_1B[1])


@dataclass
class LengthSettings:
    setup: TextSetup = field(default_factory=TextSetup)  # corpus, model, batch
    lengths: tuple[int, ...] = (30, 60, 120, 240, 360, 480)  # training lengths in steps (16x)
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # the sweep, at every length (an edge extends it)
    sweep_seeds: int = 2  # seeds each LR is chosen on (their mean validation NLL)
    seeds: int = 3  # seeds of every reported cell
    schedules: tuple[str, ...] = SCHEDULES
    workers: int = 2  # single-threaded worker processes


QUICK = LengthSettings(
    setup=TextSetup(
        d_model=32,
        n_head=2,
        batch_size=8,
        seq_len=64,
        warmup_steps=4,
        val_batches=2,
        test_batches=2,
    ),
    lengths=(8, 16, 32, 64),
    lrs=(3e-3, 1e-2, 3e-2),
    sweep_seeds=2,
    seeds=3,
)


def schedule_args(schedule: str) -> tuple[str, tuple[str, ...]]:
    """The trainer's schedule spec and extra overrides of a studied schedule."""
    if schedule == MICRO:
        return paper.UNIFORM, ("depth_per_micro=true", "grad_accum=4")
    return schedule, ()


def short(schedule: str) -> str:
    if schedule == MICRO:
        return "micro"
    if schedule.startswith("fixed-first"):
        k, frac = paper.fixed_phase(schedule)
        return f"ff{k}_{round(frac * 100)}"
    return "uniform"


def name_of(schedule: str, lr: float, seed: int, steps: int) -> str:
    return f"{short(schedule)}_lr{lr:g}_s{seed}_n{steps}"


@dataclass
class Planned:
    spec: RunSpec
    cfg: TrainConfig
    schedule: str  # the studied schedule (MICRO included)
    lr: float


Grid = dict[str, dict[float, tuple[int, ...]]]  # schedule -> LR -> the lengths trained at it


def full_grid(settings: LengthSettings) -> Grid:
    """Every schedule at every LR of the sweep, at every length."""
    lengths = tuple(sorted(settings.lengths))
    return {s: dict.fromkeys(settings.lrs, lengths) for s in settings.schedules}


def plan(
    settings: LengthSettings,
    corpus: dict,
    seeds: list[int],
    grid: Grid,
    runs_dir: Path | None = None,
) -> dict[str, Planned]:
    """Runs of (schedule, LR, seed) at each of the grid's lengths: the longest is trained, the
    shorter ones branch off it where they agree (exactly the runs trained from scratch).

    A length added after a trunk has finished branches at the latest checkpoint the trunk
    already holds before the two diverge (found in `runs_dir`), so the trunk is not retrained
    for one more checkpoint: the branch trains a few more steps, and is still the same run."""
    planner, runs = Planner(), {}
    for schedule, by_lr in grid.items():
        spec_s, extra = schedule_args(schedule)
        for lr, lengths in by_lr.items():
            for seed in seeds:
                trunk = None
                for steps in sorted(lengths, reverse=True):
                    cfg = run_config(
                        settings.setup,
                        corpus,
                        schedule=spec_s,
                        lr=lr,
                        seed=seed,
                        steps=steps,
                        extra=extra,
                    )
                    if schedule == MICRO:
                        cfg.batch_size //= 4  # the same tokens per step, in 4 micro-batches
                    name = name_of(schedule, lr, seed, steps)
                    spec = RunSpec(name, spec_s, seed, steps=steps, may_diverge=True)
                    parents = [trunk.spec.name] if trunk is not None else []
                    planner.add(spec, cfg, parents, runs_dir=runs_dir)
                    runs[spec.name] = Planned(spec, cfg, schedule, lr)
                    trunk = trunk or runs[spec.name]
    return runs


def train_all(runs: dict[str, Planned], runs_dir: Path, workers: int, quiet: bool) -> int:
    specs = [p.spec for p in runs.values()]
    return execute(
        specs, {p.spec.name: p.cfg for p in runs.values()}, runs_dir, workers, False, quiet
    )


def val_nll(run_dir: Path) -> float:
    """Mean NLL over serving depths 1..16 on the validation windows (the run's final eval);
    infinite for a run whose LR made it diverge."""
    if diverged(run_dir):
        return math.inf
    evals = [m for m in read_metrics(run_dir) if m["kind"] == "eval"]
    nll = evals[-1].get("token_nll", evals[-1].get("nll"))
    return float(np.mean(list(nll.values())))


def choose(runs: dict[str, Planned], runs_dir: Path) -> dict:
    """Per schedule and length: the LR with the lowest validation NLL averaged over the sweep's
    seeds (ties: the smaller LR), every LR's mean, and whether the choice sits at an edge of
    the LRs tried at that length ("low" or "high"; None inside)."""
    table: dict[tuple[str, int], dict[float, list[float]]] = {}
    for p in runs.values():
        vals = table.setdefault((p.schedule, p.spec.steps), {}).setdefault(p.lr, [])
        vals.append(val_nll(runs_dir / p.spec.name))
    return stats.choose_lrs(table)


def score(runs: dict[str, Planned], chosen: dict, runs_dir: Path, batches: list) -> list[dict]:
    """One row per reported run (each schedule and length at its chosen LR, every seed)."""
    rows = []
    for p in runs.values():
        pick = chosen[p.schedule][p.spec.steps]
        if p.lr != pick["lr"]:
            continue
        train = [m for m in read_metrics(runs_dir / p.spec.name) if m["kind"] == "train"]
        model = LoopedTransformer(p.cfg.model)
        rows.append(
            {
                "schedule": p.schedule,
                "label": LABELS[p.schedule],
                "steps": p.spec.steps,
                "seed": p.spec.seed,
                "lr": p.lr,
                "tokens": p.spec.steps * p.cfg.batch_size * p.cfg.grad_accum * p.cfg.seq_len,
                "params": model.num_params(),
                "params_non_embedding": model.num_params(non_embedding=True),
                "own_wall": own_wall(train),
                "val_nll": val_nll(runs_dir / p.spec.name),
                **heldout_nll(runs_dir / p.spec.name, p.cfg, batches),
            }
        )
    return sorted(rows, key=lambda r: (r["steps"], SCHEDULES.index(r["schedule"]), r["seed"]))


def extended(grid: Grid, chosen: dict) -> Grid:
    """The grid with one more LR (/3 or x3) beyond each edge a length chose, at that length only
    (a short run that wants a larger LR does not make the long runs train at it)."""
    out = {s: dict(by_lr) for s, by_lr in grid.items()}
    for s, by_len in chosen.items():
        for n, c in by_len.items():
            if c["edge"]:
                lr = float(f"{c['lr'] / 3 if c['edge'] == 'low' else c['lr'] * 3:.3g}")
                out[s][lr] = tuple(sorted({*out[s].get(lr, ()), int(n)}))
    return out


def sweep_and_choose(
    settings: LengthSettings, corpus: dict, runs_dir: Path, quiet: bool, rounds: int = 2
) -> tuple[dict[str, Planned], dict, int]:
    """The sweep on the sweep seeds and each (schedule, length)'s LR; a choice at an edge of
    the LRs tried at that length extends them on that side and chooses again (at most
    `rounds` times; a choice still at an edge is flagged in the results)."""
    grid = full_grid(settings)
    trained = 0
    for _ in range(rounds + 1):
        sweep = plan(settings, corpus, list(range(settings.sweep_seeds)), grid, runs_dir)
        trained += train_all(sweep, runs_dir, settings.workers, quiet)
        chosen = choose(sweep, runs_dir)
        wider = extended(grid, chosen)
        if wider == grid:
            break
        grid = wider
    return sweep, chosen, trained


def chosen_grid(chosen: dict) -> Grid:
    """Each schedule's chosen LRs, each with the lengths that chose it."""
    grid: Grid = {}
    for s, by_len in chosen.items():
        for n, c in by_len.items():
            grid.setdefault(s, {})
            grid[s][c["lr"]] = tuple(sorted({*grid[s].get(c["lr"], ()), int(n)}))
    return grid


def run_study(settings: LengthSettings, out: Path, quiet: bool = False) -> dict:
    """Sweep (seeds 0..sweep_seeds-1), choose, the remaining seeds at the chosen LRs, score."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    runs_dir = out / "runs"
    corpus = ensure_corpus(settings.setup, out)
    base = baselines(settings.setup, corpus, out / "baselines.json")
    sweep, chosen, trained = sweep_and_choose(settings, corpus, runs_dir, quiet)
    rest = list(range(settings.sweep_seeds, settings.seeds))
    extra = plan(settings, corpus, rest, chosen_grid(chosen), runs_dir) if rest else {}
    trained += train_all(extra, runs_dir, settings.workers, quiet)
    rows = score({**sweep, **extra}, chosen, runs_dir, split_batches(settings.setup, corpus))
    table = stats.length_cells(rows, base, settings.schedules)
    return {
        "meta": {
            "settings": asdict(settings),
            "machine": machine_name(),
            "runs_trained": trained,
            "wall_s": round(time.time() - t0, 1),
            "corpus": {k: corpus[k] for k in ("tokenizer", "vocab_size", "splits")},
            "test_tokens": len(split_batches(settings.setup, corpus))
            * settings.setup.batch_size
            * settings.setup.seq_len,
        },
        "baselines": base,
        "chosen": {s: {str(n): c for n, c in v.items()} for s, v in chosen.items()},
        "rows": rows,
        "cells": table,
        "trends": stats.gap_trends(table),
    }


def main(argv: list[str] | None = None) -> int:
    p = study_parser(
        "looped length",
        __doc__,
        out="output directory (default runs/length[-quick])",
        reference="results/length.json and figures/length_gap.png",
        quick="toy size, every code path",
    )
    p.add_argument("--lengths", help="training lengths in steps, e.g. 480,960,1920,3840,7680")
    p.add_argument("--lrs", help="the sweep's learning rates, e.g. 1e-3,3e-3,1e-2")
    p.add_argument("--d-model", type=int, help="width of the looped layer (default 64)")
    a = p.parse_args(argv)
    settings = QUICK if a.quick else LengthSettings()
    settings = replace(settings, workers=a.workers or settings.workers)
    try:
        if a.lengths:
            settings.lengths = tuple(int(x) for x in a.lengths.split(","))
        if a.lrs:
            settings.lrs = tuple(float(x) for x in a.lrs.split(","))
    except ValueError:
        raise UserError("--lengths takes integers and --lrs numbers, comma-separated") from None
    if len(settings.lengths) < 2 or min(settings.lengths) < 4 or len(settings.lrs) < 1:
        raise UserError("--lengths needs two or more lengths of at least 4 steps, --lrs one LR")
    if a.d_model:
        settings.setup = replace(settings.setup, d_model=a.d_model)
    out = Path(a.out or ("runs/length-quick" if a.quick else "runs/length"))
    with dir_lock(out, "looped length"):  # one writer: a second one into OUT is refused
        result = run_study(settings, out)
    json_path = Path("results/length.json") if a.reference else out / "length.json"
    fig_path = Path("figures/length_gap.png") if a.reference else out / "length_gap.png"
    write_result(json_path, result)
    print(f"wrote {report.fig_gap(result, fig_path)}")
    return 0
