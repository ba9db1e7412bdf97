"""The bridge: fixed-first's gap to uniform 1..16 as training lengthens, at equal tokens.

One recipe for every schedule: (1) the shared LR, uniform's best on the LR seeds (an edge
extends the sweep); (2) seeds in rounds, shorter lengths branching off one trunk per (schedule,
seed), each cell stopping once its group-sequential 95% interval decides at its tolerance;
(3) every run scored on the test windows beside count-table baselines, per-seed slopes of the
gap against log2(tokens); (4) robustness: each schedule at its own LR at `tuned_at` steps.
A rerun reuses every finished run (and, `resume_from`, an earlier results file's).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from looped import paper
from looped.config import TrainConfig, to_yaml
from looped.errors import UserError
from looped.eval import stats
from looped.eval.heldout import heldout_nll
from looped.eval.stats import Verdict
from looped.experiments.plan import Planner
from looped.experiments.results import diverged, machine_name, own_wall
from looped.experiments.runner import RunSpec, execute
from looped.experiments.textsetup import TextSetup, baselines, ensure_corpus, run_config
from looped.experiments.textsetup import heldout_windows as split_batches
from looped.model import LoopedTransformer
from looped.runtime.metrics import read_metrics

MICRO = paper.UNIFORM_PER_MICRO  # uniform with a K per micro-batch (4 micro-batches)
# the per-micro-batch arm draws its partner's 32 sequences once, split into 4 micro-batches
MICRO_ARGS = paper.UNIFORM, ("depth_per_micro=true", "grad_accum=4", "split_step_batch=true")
SCHEDULES = (paper.UNIFORM, paper.RECIPES_1B[1], paper.RECIPE_200M, MICRO)  # the pool's order
# when the pool starts each schedule's seeds: the 200M recipe's after the first two's, MICRO last
LATER = {paper.UNIFORM: 0, paper.RECIPES_1B[1]: 0, paper.RECIPE_200M: 20, MICRO: 40}
TOLERANCE = {paper.RECIPE_200M: 0.005, paper.RECIPES_1B[1]: 0.008, MICRO: 0.005}  # the paper's


def tolerance_of(schedule: str) -> float:
    """The paper's tolerance for a recipe; another fraction (the frontier) takes its K's."""
    if schedule in TOLERANCE:
        return TOLERANCE[schedule]
    return TOLERANCE[
        paper.RECIPE_200M if paper.fixed_phase(schedule)[0] == 2 else paper.FIXED_FIRST
    ]


DEPTHS_SHOWN = (1, 4, 16)  # the per-depth gaps beside the mean: a mean can hide opposite moves
CORPUS_KEYS = (
    "tokenizer",
    "vocab_size",
    "splits",
    "dataset",
    "manifest",
)  # what a results file says of it


@dataclass
class LengthSettings:
    setup: TextSetup = field(default_factory=TextSetup)  # corpus, model, batch
    lengths: tuple[int, ...] = (120, 240, 480, 960, 1920)  # training lengths in steps (16x)
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # the shared LR's sweep (an edge extends it)
    lr_seeds: tuple[int, ...] = (100,)  # seeds that choose the LR; never reported
    lr_lengths: tuple[int, ...] = (120, 240, 480)  # swept lengths; longer ones take the last's LR
    rounds: tuple[int, ...] = (4, 8, 12, 16)  # reported seeds 0..n-1 after each round
    max_seeds: int = 16  # stop adding rounds past this many seeds (the budget)
    schedules: tuple[str, ...] = SCHEDULES
    tuned_at: int = 480  # robustness: each schedule at its own LR at this length (0: off)
    workers: int = 2  # single-threaded worker processes
    corpus: str | None = None  # None: the standard library; else a `--corpus` source
    resume_from: str | None = None  # an earlier length*.json whose scored runs are reused


TOY = TextSetup(d_model=32, n_head=2, batch_size=8, seq_len=64, warmup_steps=4, val_batches=2)
QUICK = LengthSettings(  # every code path at toy size
    setup=replace(TOY, test_batches=2),
    lengths=(8, 16, 32, 64),
    lrs=(3e-3, 1e-2, 3e-2),
    lr_lengths=(8, 16, 32),
    rounds=(2, 3),
    tuned_at=16,
)


def name_of(schedule: str, lr: float, seed: int, steps: int) -> str:
    """A run's directory name (`looped samples` names its fixed K=4 twin here too)."""
    short = {MICRO: "micro", paper.FIXED: "fixed4"}.get(schedule, "uniform")
    if schedule.startswith("fixed-first"):
        k, frac = paper.fixed_phase(schedule)
        short = f"ff{k}_{round(frac * 100)}"
    return f"{short}_lr{lr:g}_s{seed}_n{steps}"


@dataclass
class Planned:
    spec: RunSpec
    cfg: TrainConfig
    schedule: str  # the studied schedule (MICRO included)
    lr: float


Grid = dict[str, dict[float, tuple[int, ...]]]  # schedule -> LR -> the lengths trained at it


def fingerprint(cfg: TrainConfig) -> str:
    """A run's config in 16 hex digits, its corpus path left out: a cached row stands for a run
    only if they agree, so rows from another dtype, device or config version are retrained."""
    blank = replace(cfg, data=replace(cfg.data, path=""))
    return hashlib.sha256(to_yaml(blank).encode()).hexdigest()[:16]


def plan(
    settings: LengthSettings,
    corpus: dict,
    seeds: list[int] | tuple[int, ...],
    grid: Grid,
    runs_dir: Path | None = None,
) -> dict[str, Planned]:
    """Runs of (schedule, LR, seed) at each of the grid's lengths: shorter ones branch off the
    longest where they agree, or at a checkpoint a finished trunk in `runs_dir` holds."""
    planner, runs = Planner(), {}
    for schedule, by_lr in grid.items():
        spec_s, extra = MICRO_ARGS if schedule == MICRO else (schedule, ())
        for lr, lengths in by_lr.items():
            for seed in seeds:
                trunk, kw = None, {"schedule": spec_s, "lr": lr, "seed": seed, "extra": extra}
                for steps in sorted(lengths, reverse=True):
                    cfg = run_config(settings.setup, corpus, steps=steps, **kw)
                    if schedule == MICRO:  # the same tokens per step, in 4 micro-batches,
                        cfg.batch_size //= 4  # and the same validation windows as the others
                        cfg.eval_batches *= 4
                    name = name_of(schedule, lr, seed, steps)
                    priority = (
                        0 if seed in settings.lr_seeds else 1 + seed + LATER.get(schedule, 20)
                    )
                    spec = RunSpec(name, spec_s, seed, steps, may_diverge=True, priority=priority)
                    parents = [trunk.spec.name] if trunk is not None else []
                    planner.add(spec, cfg, parents, runs_dir=runs_dir)
                    runs[spec.name] = Planned(spec, cfg, schedule, lr)
                    trunk = trunk or runs[spec.name]
    return runs


@dataclass
class Study:
    """A study's runs: trained into `runs_dir` (unless collecting), or an earlier results file's
    scored rows where name and config agree, so a study on a fresh machine trains only the rest."""

    settings: LengthSettings
    corpus: dict
    runs_dir: Path
    train: bool = True
    cached: dict[str, dict] = field(default_factory=dict)  # run name -> its scored row
    batches: list = field(default_factory=list)  # the test windows every run is scored on
    bigram: float = math.inf  # the bigram table's test NLL: a run's plateau ends below it

    def plan(self, seeds: list[int] | tuple[int, ...], grid: Grid) -> dict[str, Planned]:
        return plan(self.settings, self.corpus, seeds, grid, self.runs_dir)

    def row(self, p: Planned) -> dict | None:
        r = self.cached.get(p.spec.name)
        return r if r is not None and r.get("config_sha") == fingerprint(p.cfg) else None

    def finished(self, p: Planned) -> bool:
        return self.row(p) is not None or (self.runs_dir / p.spec.name / "summary.json").is_file()

    def val_nll(self, p: Planned) -> float:
        """Mean validation NLL over serving depths 1..16 (final eval); infinite if it diverged."""
        if (r := self.row(p)) is not None:
            return r["val_nll"]
        if diverged(self.runs_dir / p.spec.name):
            return math.inf
        evals = [m for m in read_metrics(self.runs_dir / p.spec.name) if m["kind"] == "eval"]
        nll = evals[-1].get("token_nll", evals[-1].get("nll"))
        return float(np.mean(list(nll.values())))

    def run(self, runs: dict[str, Planned]) -> None:
        """Train every trunk family (a trunk and its branches) with an uncached run, whole: the
        branches need the trunk's checkpoints; the pool skips what is finished on disk."""
        if not self.train:
            return
        family = {n: n for n in runs}
        for n, p in runs.items():
            while p.spec.parent in runs:
                family[n], p = p.spec.parent, runs[p.spec.parent]
        missing = {family[n] for n, p in runs.items() if self.row(p) is None}
        todo = [p for n, p in runs.items() if family[n] in missing]
        cfgs = {p.spec.name: p.cfg for p in todo}
        execute([p.spec for p in todo], cfgs, self.runs_dir, self.settings.workers, False, False)


def read_results(path: str) -> dict:
    """An earlier results file as a dict, or one line naming the file and what to do."""
    if not Path(path).is_file():
        raise UserError(f"--resume-from {path}: no such results file; give a results .json")
    try:
        old = json.loads(Path(path).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(
            f"--resume-from {path} is not valid JSON ({e}); give a results file"
        ) from None
    if not isinstance(old, dict) or not isinstance(old.get("meta", {}), dict):
        raise UserError(f"--resume-from {path} is not a results object; give a length*.json")
    return old


def rows_of(old: dict, path: str, corpus: dict, dtype: str) -> dict[str, dict]:
    """The scored rows (reported and sweep) of an earlier study, by run name; refused if it was
    measured on another corpus (other documents, split or tokenizer) or in another dtype (none
    of its rows would match a run here, so all would silently retrain)."""
    if old.get("meta", {}).get("corpus") != {k: corpus[k] for k in CORPUS_KEYS if k in corpus}:
        raise UserError(f"--resume-from {path} was measured on another corpus; drop the flag")
    if (theirs := old.get("meta", {}).get("environment", {}).get("dtype", dtype)) != dtype:
        raise UserError(
            f"--resume-from {path} was trained in {theirs} and this study trains in {dtype}; "
            f"add --dtype {theirs} to reuse its runs"
        )
    tuned = old.get("tuned") or {}
    runs = [r for part in (old, tuned) for k in ("rows", "sweep") for r in part.get(k, [])]
    return {r["run"]: r for r in runs if isinstance(r, dict) and "run" in r}


def cached_rows(path: str | None, corpus: dict, dtype: str) -> dict[str, dict]:
    """The scored rows of the results file at `path` (none without one)."""
    return rows_of(read_results(path), path, corpus, dtype) if path else {}


def choose(runs: dict[str, Planned], study: Study) -> dict:
    """Per schedule and length, from each LR's validation NLLs on the LR seeds (infinite for a
    diverged run): the LR of the lowest mean (ties: the smaller LR), every LR's mean, and whether
    the choice sits at an edge of the LRs tried ("low" or "high"; None inside)."""
    table: dict[tuple[str, int], dict[float, list[float]]] = {}
    for p in runs.values():
        if study.finished(p):
            vals = table.setdefault((p.schedule, p.spec.steps), {}).setdefault(p.lr, [])
            vals.append(study.val_nll(p))
    out: dict[str, dict[int, dict]] = {}
    for (schedule, steps), by_lr in table.items():
        means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
        finite = {lr: m for lr, m in means.items() if math.isfinite(m)}
        best = min(sorted(finite), key=lambda lr: finite[lr])
        edge = "low" if best == min(means) else "high" if best == max(means) else None
        out.setdefault(schedule, {})[steps] = {"lr": best, "val": means, "edge": edge}
    return out


def sweep_rows(runs: dict[str, Planned], study: Study) -> list[dict]:
    """The LR seeds' runs as the results file keeps them (reusable with `resume_from`)."""
    return [
        {
            "run": n,
            "config_sha": fingerprint(p.cfg),
            "schedule": p.schedule,
            "lr": p.lr,
            "seed": p.spec.seed,
            "steps": p.spec.steps,
            "val_nll": study.val_nll(p),
        }
        for n, p in sorted(runs.items())
        if study.finished(p)
    ]


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


def sweep(study: Study, grid: Grid, rounds: int = 2) -> tuple[dict[str, Planned], dict]:
    """The sweep of `grid` on the LR seeds and each (schedule, length)'s LR; a choice at an edge
    extends the LRs tried there and chooses again (at most `rounds` times)."""
    seeds = study.settings.lr_seeds
    for _ in range(rounds + 1):
        runs = study.plan(seeds, grid)
        study.run(runs)
        chosen = choose(runs, study)
        wider = extended(grid, chosen)
        if wider == grid:
            break
        if not study.train:  # collecting: follow an extension only as far as training went
            more = study.plan(seeds, wider)
            if not any(study.finished(p) for n, p in more.items() if n not in runs):
                break
        grid = wider
    return runs, chosen


def shared_lrs(settings: LengthSettings, chosen: dict) -> dict[int, float]:
    """Each length's shared LR: uniform's choice there, or at the longest swept length."""
    by_len = chosen.get(paper.UNIFORM, {})
    if not by_len:
        raise UserError(
            "no finished LR sweep to choose from; run `looped length` without --collect"
        )
    last = max(by_len)
    return {n: by_len.get(n, by_len[last])["lr"] for n in settings.lengths}


def round_grid(settings: LengthSettings, lrs: dict[int, float], open_cells: set) -> Grid:
    """The runs a round needs: each schedule at the lengths where it is still undecided, and
    uniform at every length any schedule needs, each length at its shared LR."""
    grid: Grid = {}
    for s in settings.schedules:
        need = {n for (t, n) in open_cells if t == s or (s == paper.UNIFORM)}
        for n in sorted(need):
            by_lr = grid.setdefault(s, {})
            by_lr[lrs[n]] = tuple(sorted({*by_lr.get(lrs[n], ()), n}))
    return grid


def score(runs: dict[str, Planned], study: Study) -> list[dict]:
    """One row per finished reported run, scored on the test windows once (cached in `study`)."""
    rows = []
    for p in runs.values():
        if (cached := study.row(p)) is not None:
            rows.append(cached | {"epochs": epochs_of(cached, study.corpus)})
            continue
        run_dir = study.runs_dir / p.spec.name
        if not study.finished(p) or diverged(run_dir):
            continue
        model = LoopedTransformer(p.cfg.model)
        train = [m for m in read_metrics(run_dir) if m["kind"] == "train"]
        tokens = p.spec.steps * p.cfg.batch_size * p.cfg.grad_accum * p.cfg.seq_len
        study.cached[p.spec.name] = row = {
            "run": p.spec.name,
            "config_sha": fingerprint(p.cfg),
            "schedule": p.schedule,
            "label": paper.label(p.schedule),
            "steps": p.spec.steps,
            "seed": p.spec.seed,
            "lr": p.lr,
            "tokens": tokens,
            **epochs_fields(tokens, study.corpus),
            "d_model": p.cfg.model.d_model,
            "vocab_size": p.cfg.model.vocab_size,
            "params": model.num_params(),
            "params_non_embedding": model.num_params(non_embedding=True),
            "escape_step": escape_step(train, study.bigram),
            "own_wall": own_wall(train),
            "val_nll": study.val_nll(p),
            **heldout_nll(run_dir, p.cfg, study.batches),
        }
        rows.append(row)
    order = {s: i for i, s in enumerate(SCHEDULES)}
    key = lambda r: (r["steps"], order.get(r["schedule"], 9), r["schedule"], r["seed"], r["lr"])  # noqa: E731
    return sorted(rows, key=key)


def escape_step(train: list[dict], bigram: float) -> int | None:
    """The first logged step whose train loss is below the bigram table's NLL: where a run
    leaves its early plateau (None: it never does, or no bigram was given)."""
    return next((int(m["step"]) for m in train if m["loss"] < bigram), None)


def epochs_fields(tokens: int, corpus: dict) -> dict[str, float]:
    """Passes over the train split: past 1, a run has seen some tokens twice."""
    return {"epochs": tokens / corpus["splits"]["train"]["tokens"]}


def epochs_of(row: dict, corpus: dict) -> float:
    """A row's passes; rows written before `epochs` was recorded get it here."""
    return row.get("epochs", epochs_fields(row["tokens"], corpus)["epochs"])


def run_rounds(study: Study, lrs: dict[int, float], bigram: float) -> tuple[list, list, dict]:
    """Seeds in rounds until every cell decides or the seeds run out: the reported rows, the
    cells at the last look and why the study stopped."""
    settings = study.settings
    rounds = stats.planned_looks(settings.rounds, settings.max_seeds)
    open_cells = {(s, n) for s in settings.schedules if s != paper.UNIFORM for n in lrs}
    runs: dict[str, Planned] = {}
    cells: list[dict] = []
    reason, complete = "no cell open: each decided, or its models miss the bigram", True
    for n in rounds:
        runs.update(study.plan(list(range(n)), round_grid(settings, lrs, open_cells)))
        study.run(runs)
        rows = score(runs, study)
        tolerance = {s: tolerance_of(s) for s in settings.schedules if s != paper.UNIFORM}
        cells = sequential_cells(rows, bigram, settings.schedules, tuple(rounds), tolerance, cells)
        open_cells = {(c["schedule"], c["steps"]) for c in cells if c.get("open")}
        if not all(study.finished(p) for p in runs.values()):
            reason, complete = f"budget: the round of {n} seeds unfinished when collected", False
            break
        if not open_cells:
            break
    if complete and open_cells:
        reason = f"budget: {len(open_cells)} cells undecided at {rounds[-1]} seeds"
    seeds = max((len(c["seed_ids"]) for c in cells), default=0)
    return rows, cells, {"reason": reason, "seeds": seeds, "complete": complete}


def tuned(study: Study, lrs: dict[int, float]) -> dict:
    """Robustness: each schedule at its own LR at `tuned_at` steps, the first round's seeds."""
    settings, n = study.settings, study.settings.tuned_at
    if not n or n not in lrs:
        return {}
    others = [s for s in settings.schedules if s != paper.UNIFORM]
    swept, chosen = sweep(study, {s: dict.fromkeys(settings.lrs, (n,)) for s in others})
    own = {s: chosen[s][n]["lr"] for s in others if s in chosen and n in chosen[s]}
    grid = {s: {lr: (n,)} for s, lr in own.items()} | {paper.UNIFORM: {lrs[n]: (n,)}}
    runs = study.plan(list(range(settings.rounds[0])), grid)
    study.run(runs)
    rows = score(runs, study)
    return {
        "steps": n,
        "lrs": own,
        "chosen": chosen,
        "sweep": sweep_rows(swept, study),
        "rows": rows,
        "cells": tuned_cells(rows, own, {s: tolerance_of(s) for s in own}),
    }


def run_study(
    settings: LengthSettings, out: Path, train: bool = True, cached: dict | None = None
) -> dict:
    """The shared LR, seeds in rounds, the robustness check; `train` False only collects;
    `cached`: scored rows by run name (default: those of `settings.resume_from`)."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(settings.setup, out, settings.corpus)
    cfg = run_config(settings.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    if cached is None:
        cached = cached_rows(settings.resume_from, corpus, cfg.dtype)
    base = baselines(settings.setup, corpus, out / "baselines.json")
    batches = split_batches(settings.setup, corpus)
    study = Study(settings, corpus, out / "runs", train, cached, batches, base["test"]["bigram"])
    grid = {paper.UNIFORM: dict.fromkeys(settings.lrs, tuple(settings.lr_lengths))}
    swept, chosen = sweep(study, grid)
    lrs = shared_lrs(settings, chosen)
    rows, cells, stop = run_rounds(study, lrs, base["test"]["bigram"])
    robust = tuned(study, lrs) if stop["complete"] else {}
    env = {
        "dtype": cfg.dtype,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine_name(),
    }
    return {
        "meta": {
            "settings": asdict(settings),
            "environment": env,
            "wall_s": round(time.time() - t0, 1),
            "worker_s": round(sum(r["own_wall"] for r in rows), 1),
            "stopped": stop,
            "corpus": {k: corpus[k] for k in CORPUS_KEYS if k in corpus},
            "test_tokens": len(study.batches) * settings.setup.batch_size * settings.setup.seq_len,
        },
        "baselines": base,
        "chosen": {s: {str(n): c for n, c in v.items()} for s, v in chosen.items()},
        "sweep": sweep_rows(swept, study),
        "shared_lr": {str(n): lr for n, lr in lrs.items()},
        "rows": rows,
        "cells": cells,
        "trends": seed_trends(cells),
        "tuned": robust,
    }


# -- the study's cells: each (schedule, length) against uniform ------------------------------
def keeps_going(found: Verdict) -> bool:
    """Whether a cell takes the next round: undecided, or "no worse" (may narrow to "within")."""
    return found in (Verdict.UNDECIDED, Verdict.NO_WORSE)


def _cell_base(mine: list[dict], bigram: float) -> dict:
    first = mine[0]
    return {
        "steps": first["steps"],
        "schedule": first["schedule"],
        "label": first["label"],
        "lr": first["lr"],
        "tokens": first["tokens"],
        "seeds": len(mine),
        "seed_ids": [r["seed"] for r in mine],
        "mean_nll": float(np.mean([r["mean_nll"] for r in mine])),
        "seed_nll": [r["mean_nll"] for r in mine],
        "se_windows": float(np.mean([r["se"] for r in mine])),
        "tokens_per_param": first["tokens"] / first["params"],
        "tokens_per_non_embedding_param": first["tokens"] / first["params_non_embedding"],
        "epochs": first.get("epochs"),
        "one_pass": first.get("epochs", 0) <= 1,  # False: past one pass, marked, never reported
        "params_non_embedding": first["params_non_embedding"],
        "d_model": first.get("d_model"),
        "vocab_size": first.get("vocab_size"),
        "escape_steps": [r.get("escape_step") for r in mine],
        "beats_bigram": bool(max(r["mean_nll"] for r in mine) < bigram),
    }


def judged_cell(
    mine: list[dict], uni: list[dict], bigram: float, looks: tuple[int, ...], tol: float
) -> dict:
    """One schedule at one length against uniform's same seeds: the paired gap's group-sequential
    interval and verdict at `tol`, the gap at K=1, 4 and 16, and whether the cell stays open."""
    by_seed = {r["seed"]: r for r in uni}
    mine = [r for r in mine if r["seed"] in by_seed]
    ref = [by_seed[r["seed"]] for r in mine]

    def gap_of(nll: Callable[[dict], float]) -> stats.Interval:
        return stats.sequential_ratio([nll(a) / nll(b) - 1 for a, b in zip(mine, ref)], looks)

    cell, gap = _cell_base(mine, bigram), gap_of(lambda r: r["mean_nll"])
    informative = cell["beats_bigram"] and max(r["mean_nll"] for r in ref) < bigram
    found = Verdict.UNDECIDED
    if gap.n > 1 or not informative:
        found = stats.verdict(gap, tol, informative)
    by_depth = {
        str(k): gap_of(lambda r, k=k: r["token_nll"][k - 1]).as_dict()
        for k in DEPTHS_SHOWN
        if len(mine[0]["token_nll"]) >= k
    }
    return cell | {
        "gap": gap.as_dict(),
        "tolerance": tol,
        "verdict": found.value,
        "planned_look": gap.n in looks,  # False: an interim look (a round collected unfinished)
        "open": keeps_going(found) and cell["one_pass"],
        "gap_by_depth": by_depth,
    }


def sequential_cells(
    rows: list[dict],
    bigram: float,
    schedules: tuple[str, ...],
    looks: tuple[int, ...],
    tolerance: dict[str, float],
    previous: list[dict] = (),
) -> list[dict]:
    """Per length: uniform's cell, then each other schedule's judged cell. A cell decided at an
    earlier look keeps that verdict (its seeds stopped there); an open one is judged again."""
    done = {(c["schedule"], c["steps"]): c for c in previous if not c.get("open", True)}
    out = []
    for steps in sorted({r["steps"] for r in rows}):
        at = {s: [r for r in rows if r["steps"] == steps and r["schedule"] == s] for s in schedules}
        uni = at.get(paper.UNIFORM, [])
        if not uni:
            continue
        out.append(_cell_base(uni, bigram))
        for s in schedules:
            if s == paper.UNIFORM or not at[s]:
                continue
            paired = {r["seed"] for r in uni} & {r["seed"] for r in at[s]}
            if (s, steps) in done or paired:  # no common seed yet (one side unfinished): no cell
                out.append(
                    done.get((s, steps)) or judged_cell(at[s], uni, bigram, looks, tolerance[s])
                )
    return out


def seed_trends(cells: list[dict]) -> dict[str, dict]:
    """Per schedule: each seed's slope of its gap against log2(tokens) over the informative
    lengths, then a 95% t-interval over seeds (seeds are the unit, not seed x length points)."""
    out = {}
    for s in dict.fromkeys(c["schedule"] for c in cells if "gap" in c):
        mine = [c for c in cells if c["schedule"] == s and "gap" in c]
        mine = [c for c in mine if c["verdict"] != Verdict.NOT_INFORMATIVE.value]
        mine = [c for c in mine if c.get("one_pass", True)]  # repeated data: not a trend point
        per_seed: dict[int, list[tuple[float, float]]] = {}
        for c in mine:
            for seed, v in zip(c["seed_ids"], c["gap"]["values"]):
                per_seed.setdefault(seed, []).append((math.log2(c["tokens"]), v))
        need = len(mine)
        slopes = {
            seed: float(np.polyfit(*zip(*pts), 1)[0])
            for seed, pts in sorted(per_seed.items())
            if len(pts) == need and need >= 3
        }
        entry: dict[str, Any] = {"lengths": need, "per_seed": slopes, "slope": None}
        if len(slopes) >= 2:
            fit = stats.interval(list(slopes.values()))
            entry |= {"slope": fit.as_dict(), "direction": stats.trend_direction(fit)}
        out[s] = entry
    return out


def tuned_cells(rows: list[dict], own: dict[str, float], tolerance: dict[str, float]) -> list[dict]:
    """Each schedule at its own LR against uniform at the shared LR: a plain 95% t-interval."""
    uni = {r["seed"]: r for r in rows if r["schedule"] == paper.UNIFORM}
    out = []
    for s, lr in own.items():
        mine = [r for r in rows if r["schedule"] == s and r["lr"] == lr]
        pairs = [(r, uni[r["seed"]]) for r in mine if r["seed"] in uni]
        if len(pairs) < 2:
            continue
        gap = stats.ratio_interval([a["mean_nll"] / b["mean_nll"] - 1 for a, b in pairs])
        out.append(
            {
                "schedule": s,
                "label": mine[0]["label"],
                "lr": lr,
                "shared_lr": pairs[0][1]["lr"],
                "gap": gap.as_dict(),
                "verdict": stats.verdict(gap, tolerance[s]).value,
            }
        )
    return out
