"""The bridge: fixed-first's gap to uniform 1..16 as training lengthens, at equal tokens.

One recipe for every schedule; only the depth schedule changes:

1. The shared LR: uniform at every LR of the sweep on the LR seeds (never reported), at the
   `lr_lengths`; each length takes the lowest validation NLL (longer lengths: the longest swept
   one's choice). A choice at the sweep's edge extends the sweep on that side.
2. Seeds in rounds (4, 8, 12, 16): every schedule at the shared LR, one trunk per (schedule,
   seed) that shorter lengths branch off. After each round each (schedule, length) gets its
   paired gap to uniform with a group-sequential 95% interval (`stats.sequential_ratio`), and a
   cell stops once that interval decides at its tolerance (K=2: 0.5%, K=4: 0.8%, the paper's).
3. Every reported run scored on the test windows beside unigram and bigram count tables; per
   seed, the gap's slope against log2(tokens); the gap at K=1, 4 and 16.
4. Robustness: at `tuned_at` steps each schedule at its own LR, the first round's seeds.

Resumable: a rerun reuses every finished run (and, `resume_from`, an earlier results file's).
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import time
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
from looped.eval.stats import Verdict, choose_lrs
from looped.experiments.plan import Planner
from looped.experiments.results import diverged, machine_name, own_wall
from looped.experiments.runner import RunSpec, execute
from looped.experiments.textsetup import TextSetup, baselines, ensure_corpus, run_config
from looped.experiments.textsetup import heldout_windows as split_batches
from looped.model import LoopedTransformer
from looped.runtime.metrics import read_metrics

MICRO = paper.UNIFORM_PER_MICRO  # uniform with a K per micro-batch (4 micro-batches)
# in the order the pool starts them within a seed: the reference first, the cheap arms next
SCHEDULES = (paper.UNIFORM, paper.RECIPES_1B[1], paper.RECIPE_200M, MICRO)
# when the pool starts each schedule's seeds: uniform and the 1B recipe first, seed by seed;
# the 200M recipe's seeds after them, the diagnostic per-micro-batch arm last
LATER = {paper.UNIFORM: 0, paper.RECIPES_1B[1]: 0, paper.RECIPE_200M: 20, MICRO: 40}
TOLERANCE = {paper.RECIPE_200M: 0.005, paper.RECIPES_1B[1]: 0.008, MICRO: 0.005}  # the paper's
DEPTHS_SHOWN = (1, 4, 16)  # the per-depth gaps beside the mean: a mean can hide opposite moves
CORPUS_KEYS = ("tokenizer", "vocab_size", "splits", "dataset")  # what a results file says of it


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


def schedule_args(schedule: str) -> tuple[str, tuple[str, ...]]:
    """The trainer's schedule spec and extra overrides of a studied schedule: the per-micro-batch
    arm draws its partner's 32 sequences once and splits them into 4 micro-batches."""
    if schedule == MICRO:
        return paper.UNIFORM, ("depth_per_micro=true", "grad_accum=4", "split_step_batch=true")
    return schedule, ()


def name_of(schedule: str, lr: float, seed: int, steps: int) -> str:
    short = "micro" if schedule == MICRO else "uniform"
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


@dataclass
class Store:
    """The study's run directories, and the scored rows an earlier results file holds for runs
    this disk lacks (`resume_from`), matched by name and config: a study moved to a fresh
    machine trains only what it does not have."""

    runs_dir: Path
    cached: dict[str, dict] = field(default_factory=dict)  # run name -> its scored row

    def row(self, p: Planned) -> dict | None:
        r = self.cached.get(p.spec.name)
        return r if r is not None and r.get("config_sha") == fingerprint(p.cfg) else None

    def finished(self, p: Planned) -> bool:
        return self.row(p) is not None or finished(self.runs_dir, p.spec.name)

    def val_nll(self, p: Planned) -> float:
        r = self.row(p)
        return r["val_nll"] if r is not None else val_nll(self.runs_dir / p.spec.name)

    def to_train(self, runs: dict[str, Planned]) -> dict[str, Planned]:
        """Every trunk family (a trunk and its branches) with an uncached run, whole: its
        branches need the trunk's checkpoints; the pool skips what is finished on disk."""
        family = {n: n for n in runs}
        for n, p in runs.items():
            while p.spec.parent in runs:
                family[n], p = p.spec.parent, runs[p.spec.parent]
        cached = {n for n, p in runs.items() if self.row(p) is not None}
        missing = {family[n] for n in runs if n not in cached}
        return {n: p for n, p in runs.items() if family[n] in missing}


def cached_rows(path: str | None, corpus: dict) -> dict[str, dict]:
    """The scored rows (reported and sweep) of an earlier results file, by run name; refused
    if it was measured on another corpus (other documents, split or tokenizer)."""
    if not path:
        return {}
    if not Path(path).is_file():
        raise UserError(f"--resume-from {path}: no such results file; give a length*.json")
    old = json.loads(Path(path).read_text())
    if old.get("meta", {}).get("corpus") != {k: corpus[k] for k in CORPUS_KEYS if k in corpus}:
        raise UserError(f"--resume-from {path} was measured on another corpus; drop the flag")
    tuned = old.get("tuned") or {}
    runs = [r for part in (old, tuned) for k in ("rows", "sweep") for r in part.get(k, [])]
    return {r["run"]: r for r in runs if "run" in r}


def plan(
    settings: LengthSettings,
    corpus: dict,
    seeds: list[int] | tuple[int, ...],
    grid: Grid,
    runs_dir: Path | None = None,
) -> dict[str, Planned]:
    """Runs of (schedule, LR, seed) at each of the grid's lengths: the longest is trained, the
    shorter ones branch off it where they agree, seed by seed (LR seeds first). A length added
    after its trunk finished branches at a checkpoint the trunk holds (`runs_dir`)."""
    planner, runs = Planner(), {}
    for schedule, by_lr in grid.items():
        spec_s, extra = schedule_args(schedule)
        for lr, lengths in by_lr.items():
            for seed in seeds:
                trunk, kw = None, {"schedule": spec_s, "lr": lr, "seed": seed, "extra": extra}
                for steps in sorted(lengths, reverse=True):
                    cfg = run_config(settings.setup, corpus, steps=steps, **kw)
                    if schedule == MICRO:  # the same tokens per step, in 4 micro-batches,
                        cfg.batch_size //= 4  # and the same validation windows as the others
                        cfg.eval_batches *= 4
                    name = name_of(schedule, lr, seed, steps)
                    priority = 0 if seed in settings.lr_seeds else 1 + seed + LATER[schedule]
                    spec = RunSpec(name, spec_s, seed, steps, may_diverge=True, priority=priority)
                    parents = [trunk.spec.name] if trunk is not None else []
                    planner.add(spec, cfg, parents, runs_dir=runs_dir)
                    runs[spec.name] = Planned(spec, cfg, schedule, lr)
                    trunk = trunk or runs[spec.name]
    return runs


def train_all(runs: dict[str, Planned], store: Store, workers: int) -> int:
    runs = store.to_train(runs)
    cfgs = {p.spec.name: p.cfg for p in runs.values()}
    return execute([p.spec for p in runs.values()], cfgs, store.runs_dir, workers, False, False)


def finished(runs_dir: Path, name: str) -> bool:
    return (runs_dir / name / "summary.json").is_file()


def val_nll(run_dir: Path) -> float:
    """Mean NLL over serving depths 1..16 on the validation windows (the run's final eval);
    infinite for a run whose LR made it diverge."""
    if diverged(run_dir):
        return math.inf
    evals = [m for m in read_metrics(run_dir) if m["kind"] == "eval"]
    nll = evals[-1].get("token_nll", evals[-1].get("nll"))
    return float(np.mean(list(nll.values())))


def choose(runs: dict[str, Planned], store: Store) -> dict:
    """Per schedule and length, the LR chosen on the LR seeds' validation NLL (`choose_lrs`)."""
    table: dict[tuple[str, int], dict[float, list[float]]] = {}
    for p in runs.values():
        if store.finished(p):
            vals = table.setdefault((p.schedule, p.spec.steps), {}).setdefault(p.lr, [])
            vals.append(store.val_nll(p))
    return choose_lrs(table)


def sweep_rows(runs: dict[str, Planned], store: Store) -> list[dict]:
    """The LR seeds' runs as the results file keeps them: what chose the LR, and enough to
    reuse them (`resume_from`)."""
    return [
        {
            "run": n,
            "config_sha": fingerprint(p.cfg),
            "schedule": p.schedule,
            "lr": p.lr,
            "seed": p.spec.seed,
            "steps": p.spec.steps,
            "val_nll": store.val_nll(p),
        }
        for n, p in sorted(runs.items())
        if store.finished(p)
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


def sweep(
    settings: LengthSettings, corpus: dict, store: Store, grid: Grid, train: bool, rounds: int = 2
) -> tuple[dict[str, Planned], dict]:
    """The sweep of `grid` on the LR seeds and each (schedule, length)'s LR; a choice at an edge
    extends the LRs tried there and chooses again (at most `rounds` times)."""
    for _ in range(rounds + 1):
        runs = plan(settings, corpus, settings.lr_seeds, grid, store.runs_dir)
        if train:
            train_all(runs, store, settings.workers)
        chosen = choose(runs, store)
        wider = extended(grid, chosen)
        if wider == grid:
            break
        if not train:  # collecting: follow an extension only as far as training went
            more = plan(settings, corpus, settings.lr_seeds, wider, store.runs_dir)
            if not any(store.finished(p) for n, p in more.items() if n not in runs):
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
            grid.setdefault(s, {})
            grid[s][lrs[n]] = tuple(sorted({*grid[s].get(lrs[n], ()), n}))
    return grid


def score(runs: dict[str, Planned], store: Store, batches: list) -> list[dict]:
    """One row per finished reported run, scored on the test windows (or taken from an earlier
    results file) and kept in the store, so a later round does not score it again."""
    rows, runs_dir = [], store.runs_dir
    for p in runs.values():
        if (cached := store.row(p)) is not None:
            rows.append(cached)
            continue
        if not finished(runs_dir, p.spec.name) or diverged(runs_dir / p.spec.name):
            continue
        train = [m for m in read_metrics(runs_dir / p.spec.name) if m["kind"] == "train"]
        model = LoopedTransformer(p.cfg.model)
        store.cached[p.spec.name] = row = {
            "run": p.spec.name,
            "config_sha": fingerprint(p.cfg),
            "schedule": p.schedule,
            "label": paper.label(p.schedule),
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
        rows.append(row)
    order = {s: i for i, s in enumerate(SCHEDULES)}
    return sorted(rows, key=lambda r: (r["steps"], order[r["schedule"]], r["seed"], r["lr"]))


def run_rounds(
    settings: LengthSettings,
    corpus: dict,
    store: Store,
    lrs: dict[int, float],
    train: bool,
    bigram: float,
) -> tuple[list[dict], list[dict], dict]:
    """Seeds in rounds until every cell decides or the seeds run out: the reported rows, the
    cells at the last look and why the study stopped."""
    batches = split_batches(settings.setup, corpus)
    rounds = [n for n in settings.rounds if n <= settings.max_seeds] or [settings.max_seeds]
    open_cells = {(s, n) for s in settings.schedules if s != paper.UNIFORM for n in lrs}
    runs: dict[str, Planned] = {}
    cells: list[dict] = []
    stop = {
        "reason": "no cell open: each decided, or its models miss the bigram",
        "seeds": 0,
        "complete": True,
    }
    for n in rounds:
        grid = round_grid(settings, lrs, open_cells)
        runs.update(plan(settings, corpus, list(range(n)), grid, store.runs_dir))
        if train:
            train_all(runs, store, settings.workers)
        rows = score(runs, store, batches)
        cells = sequential_cells(rows, bigram, settings.schedules, tuple(rounds), TOLERANCE, cells)
        open_cells = {(c["schedule"], c["steps"]) for c in cells if c.get("open")}
        stop["seeds"] = max((len(c["seed_ids"]) for c in cells), default=0)
        if not all(store.finished(p) for p in runs.values()):
            stop["reason"] = f"budget: the round of {n} seeds unfinished when collected"
            stop["complete"] = False
            break
        if not open_cells:
            break
    else:
        if open_cells:
            stop["reason"] = f"budget: {len(open_cells)} cells undecided at {rounds[-1]} seeds"
    return rows, cells, stop


def tuned(
    settings: LengthSettings, corpus: dict, store: Store, lrs: dict[int, float], train: bool
) -> dict:
    """Robustness: at `tuned_at` steps, each schedule at its own LR (chosen on the LR seeds), the
    first round's seeds, against uniform at its own (the shared) LR."""
    n = settings.tuned_at
    if not n or n not in lrs:
        return {}
    others = [s for s in settings.schedules if s != paper.UNIFORM]
    grid = {s: dict.fromkeys(settings.lrs, (n,)) for s in others}
    swept, chosen = sweep(settings, corpus, store, grid, train)
    own = {s: chosen[s][n]["lr"] for s in others if s in chosen and n in chosen[s]}
    grid = {s: {lr: (n,)} for s, lr in own.items()} | {paper.UNIFORM: {lrs[n]: (n,)}}
    runs = plan(settings, corpus, list(range(settings.rounds[0])), grid, store.runs_dir)
    if train:
        train_all(runs, store, settings.workers)
    rows = score(runs, store, split_batches(settings.setup, corpus))
    return {
        "steps": n,
        "lrs": own,
        "chosen": chosen,
        "sweep": sweep_rows(swept, store),
        "rows": rows,
        "cells": tuned_cells(rows, own, TOLERANCE),
    }


def run_study(settings: LengthSettings, out: Path, train: bool = True) -> dict:
    """The shared LR, then seeds in rounds, then the robustness check; `train` False collects
    what has finished (nothing is trained)."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(settings.setup, out, settings.corpus)
    store = Store(out / "runs", cached_rows(settings.resume_from, corpus))
    base = baselines(settings.setup, corpus, out / "baselines.json")
    grid = {paper.UNIFORM: dict.fromkeys(settings.lrs, tuple(settings.lr_lengths))}
    swept, chosen = sweep(settings, corpus, store, grid, train)
    lrs = shared_lrs(settings, chosen)
    rows, cells, stop = run_rounds(settings, corpus, store, lrs, train, base["test"]["bigram"])
    robust = tuned(settings, corpus, store, lrs, train) if stop["complete"] else {}
    cfg = run_config(settings.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    env = {
        "dtype": cfg.dtype,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine_name(),
    }
    test_windows = len(split_batches(settings.setup, corpus))
    return {
        "meta": {
            "settings": asdict(settings),
            "environment": env,
            "wall_s": round(time.time() - t0, 1),
            "worker_s": round(sum(r["own_wall"] for r in rows), 1),
            "stopped": stop,
            "corpus": {k: corpus[k] for k in CORPUS_KEYS if k in corpus},
            "test_tokens": test_windows * settings.setup.batch_size * settings.setup.seq_len,
        },
        "baselines": base,
        "chosen": {s: {str(n): c for n, c in v.items()} for s, v in chosen.items()},
        "sweep": sweep_rows(swept, store),
        "shared_lr": {str(n): lr for n, lr in lrs.items()},
        "rows": rows,
        "cells": cells,
        "trends": seed_trends(cells),
        "tuned": robust,
    }


# -- the study's cells: each (schedule, length) against uniform ------------------------------
def keeps_going(found: Verdict) -> bool:
    """Whether a cell takes the next round of seeds: undecided, or "no worse" (more seeds may
    narrow it to "within"; a study that ends there reports "no worse")."""
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
        "beats_bigram": bool(max(r["mean_nll"] for r in mine) < bigram),
    }


def judged_cell(
    mine: list[dict], uni: list[dict], bigram: float, looks: tuple[int, ...], tol: float
) -> dict:
    """One schedule at one length against uniform's runs of the same seeds: the paired gap
    with its group-sequential interval, the verdict at `tol`, the gap at K=1, 4 and 16, and
    whether the cell stays open (undecided or "no worse", and its models beat the bigram)."""
    by_seed = {r["seed"]: r for r in uni}
    mine = [r for r in mine if r["seed"] in by_seed]
    ref = [by_seed[r["seed"]] for r in mine]
    cell = _cell_base(mine, bigram)
    gap = stats.sequential_ratio(
        [a["mean_nll"] / b["mean_nll"] - 1 for a, b in zip(mine, ref)], looks
    )
    informative = cell["beats_bigram"] and max(r["mean_nll"] for r in ref) < bigram
    found = (
        stats.verdict(gap, tol, informative) if gap.n > 1 or not informative else Verdict.UNDECIDED
    )
    by_depth = {
        str(k): stats.sequential_ratio(
            [a["token_nll"][k - 1] / b["token_nll"][k - 1] - 1 for a, b in zip(mine, ref)], looks
        ).as_dict()
        for k in DEPTHS_SHOWN
        if len(mine[0]["token_nll"]) >= k
    }
    return cell | {
        "gap": gap.as_dict(),
        "tolerance": tol,
        "verdict": found.value,
        "planned_look": gap.n in looks,  # False: an interim look (a round collected unfinished)
        "open": keeps_going(found),
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
    earlier look keeps that look's verdict (its seeds stopped there); an open one is judged
    again on every seed it now has."""
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
    """Per schedule: each seed's least-squares slope of its gap against log2(tokens) over the
    informative lengths that seed has, then the 95% t-interval over seeds: seeds are the unit,
    not seed x length points."""
    out = {}
    for s in dict.fromkeys(c["schedule"] for c in cells if "gap" in c):
        mine = [c for c in cells if c["schedule"] == s and "gap" in c]
        mine = [c for c in mine if c["verdict"] != Verdict.NOT_INFORMATIVE.value]
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
    """The robustness check: each schedule at its own LR against uniform at the shared LR, the
    same seeds, a plain 95% t-interval (one look)."""
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
