"""The bridge: fixed-first's gap to uniform 1..16 as training lengthens, at equal tokens.

    looped length                     # runs/length/: 5 lengths to 1,920 steps, seeds in rounds
    looped length --quick             # every code path at toy size, a few minutes
    looped length --reference         # write results/length.json and figures/length_gap.png
    looped length --collect           # no training: the results of the runs finished so far
    looped length --corpus DIR        # the same study on your text (see below)
    looped length --resume-from results/length.json   # on a fresh machine: reuse its scored runs
    looped length --d-model 128 --lengths 120,240,480 --max-seeds 4   # a second width

One recipe for every schedule; only the depth schedule changes:

1. The shared LR. Uniform 1..16 at every LR of the sweep on the LR seeds (100, ...), which are
   never reported, at the `lr_lengths`; each length takes the LR with the lowest validation NLL
   (mean over depths 1..16); lengths beyond the longest swept one take its choice. A choice at
   the sweep's edge extends the sweep on that side.
2. Seeds in rounds (4, 8, 12, 16 by default). Every schedule at the shared LR, seeds 0..n-1,
   one warmup-stable-decay trunk per (schedule, seed) that every shorter length branches off
   (`training.lineage.branch_point`); the pool runs uniform's and K=4's seeds first, then
   K=2's, then the per-micro-batch arm's, so a study stopped early has whole pairs. After each round, each (schedule, length) gets its paired
   gap to uniform with a group-sequential 95% interval (`eval.stats.sequential_interval`: it
   covers the true gap at every round at once), and a cell stops when its interval decides at
   its schedule's tolerance (K=2: 0.5%, K=4: 0.8%, the paper's).
3. Every reported run scored on the test windows, beside unigram and bigram count tables on the
   same windows; per seed, the gap's slope against log2(tokens); the gap at K=1, 4 and 16.
4. Robustness: at `tuned_at` steps each schedule at its own LR (chosen on the LR seeds), the
   first round's seeds. Not the headline.

`--corpus` takes a directory from `looped data text ... --test-frac 0.05` or any `datasets`
source (a .txt/.jsonl/.parquet file or folder; a hub name with the network), split here by
near-duplicate family and tokenized with a BPE fit on train alone.

Resumable: a rerun reuses every finished run and retrains only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

import looped.eval.stats as stats
from looped import paper
from looped.commands.common import study_parser
from looped.config import TrainConfig, to_yaml
from looped.errors import UserError
from looped.eval.heldout import heldout_nll
from looped.experiments.plan import Planner
from looped.experiments.results import diverged, machine_name, own_wall, write_result
from looped.experiments.runner import RunSpec, execute
from looped.experiments.textsetup import TextSetup, baselines, ensure_corpus, run_config
from looped.experiments.textsetup import heldout_windows as split_batches
from looped.model import LoopedTransformer
from looped.report import length as report
from looped.report.length import LABELS
from looped.runtime.lock import dir_lock
from looped.runtime.metrics import read_metrics

MICRO = paper.UNIFORM_PER_MICRO  # uniform with a K per micro-batch (4 micro-batches)
# in the order the pool starts them within a seed: the reference first, the cheap arms next
SCHEDULES = (paper.UNIFORM, paper.RECIPES_1B[1], paper.RECIPE_200M, MICRO)
# when the pool starts each schedule's seeds: uniform and the 1B recipe first, seed by seed;
# the 200M recipe's seeds after them, the diagnostic per-micro-batch arm last
LATER = {paper.UNIFORM: 0, paper.RECIPES_1B[1]: 0, paper.RECIPE_200M: 20, MICRO: 40}
TOLERANCE = {paper.RECIPE_200M: 0.005, paper.RECIPES_1B[1]: 0.008, MICRO: 0.005}  # the paper's


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


def fingerprint(cfg: TrainConfig) -> str:
    """A run's config in 16 hex digits, where its corpus lies left out (the corpus itself is
    checked once, `cached_rows`): a cached row stands for a run only if they agree. Every other
    field counts, the resolved dtype and device included: rows from a GPU are not reused on a
    CPU, and a new config field makes older rows stale (they are retrained, not misread)."""
    blank = replace(cfg, data=replace(cfg.data, path=""))
    return hashlib.sha256(to_yaml(blank).encode()).hexdigest()[:16]


@dataclass
class Store:
    """Where the study's runs are: their directories, and the rows an earlier results file
    holds for runs this disk does not have (`--resume-from`), matched by name and config. A
    study moved to a fresh machine then trains only the seeds and lengths it does not have."""

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
        """The runs to hand the pool: every trunk family (a trunk and its branches) with a run
        that is not cached, whole (its branches need the trunk's checkpoints); the pool itself
        skips what is finished on disk."""
        family = {n: n for n in runs}
        for n, p in runs.items():
            while p.spec.parent in runs:
                family[n], p = p.spec.parent, runs[p.spec.parent]
        cached = {n for n, p in runs.items() if self.row(p) is not None}
        missing = {family[n] for n in runs if n not in cached}
        return {n: p for n, p in runs.items() if family[n] in missing}


CORPUS_KEYS = ("tokenizer", "vocab_size", "splits", "dataset")  # what a results file says of it


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
    runs = [
        *old.get("rows", []),
        *old.get("sweep", []),
        *tuned.get("rows", []),
        *tuned.get("sweep", []),
    ]
    return {r["run"]: r for r in runs if "run" in r}


def plan(
    settings: LengthSettings,
    corpus: dict,
    seeds: list[int] | tuple[int, ...],
    grid: Grid,
    runs_dir: Path | None = None,
) -> dict[str, Planned]:
    """Runs of (schedule, LR, seed) at each of the grid's lengths: the longest is trained, the
    shorter ones branch off it where they agree (exactly the runs trained from scratch). The
    pool starts seed by seed (LR seeds first), so a study stopped early has whole seeds.

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


def train_all(runs: dict[str, Planned], store: Store, workers: int, quiet: bool) -> int:
    runs = store.to_train(runs)
    specs = [p.spec for p in runs.values()]
    cfgs = {p.spec.name: p.cfg for p in runs.values()}
    return execute(specs, cfgs, store.runs_dir, workers, False, quiet)


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
    """Per schedule and length: the LR with the lowest validation NLL averaged over the LR seeds
    (ties: the smaller LR), every LR's mean, and whether the choice sits at an edge of the LRs
    tried at that length ("low" or "high"; None inside)."""
    table: dict[tuple[str, int], dict[float, list[float]]] = {}
    for p in runs.values():
        if store.finished(p):
            vals = table.setdefault((p.schedule, p.spec.steps), {}).setdefault(p.lr, [])
            vals.append(store.val_nll(p))
    return stats.choose_lrs(table)


def sweep_rows(runs: dict[str, Planned], store: Store) -> list[dict]:
    """The LR seeds' runs as the results file keeps them: what chose the LR, and enough to
    reuse them (`--resume-from`)."""
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
    settings: LengthSettings,
    corpus: dict,
    store: Store,
    grid: Grid,
    train: bool,
    rounds: int = 2,
) -> tuple[dict[str, Planned], dict]:
    """The sweep of `grid` on the LR seeds and each (schedule, length)'s LR; a choice at an edge
    extends the LRs tried at that length on that side and chooses again (at most `rounds`
    times; a choice still at an edge is flagged in the results)."""
    for _ in range(rounds + 1):
        runs = plan(settings, corpus, settings.lr_seeds, grid, store.runs_dir)
        if train:
            train_all(runs, store, settings.workers, quiet=False)
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
    """One row per finished reported run, scored on the test windows (or taken from the
    earlier results file that scored it); a scored row is kept in the store, so a later round
    does not score the same run again."""
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
        rows.append(row)
    order = {s: i for i, s in enumerate(SCHEDULES)}
    return sorted(rows, key=lambda r: (r["steps"], order[r["schedule"]], r["seed"], r["lr"]))


def environment(setup_dtype: str) -> dict:
    """What a number depends on beyond the code: dtype, torch, Python, the machine."""
    return {
        "dtype": setup_dtype,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": machine_name(),
    }


def run_rounds(
    settings: LengthSettings,
    corpus: dict,
    store: Store,
    lrs: dict[int, float],
    train: bool,
    bigram: float,
) -> tuple[dict[str, Planned], list[dict], list[dict], dict]:
    """Seeds in rounds until every cell decides or the seeds run out; returns the runs, the
    reported rows, the cells at the last look and why the study stopped."""
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
            train_all(runs, store, settings.workers, quiet=False)
        rows = score(runs, store, batches)
        cells = stats.sequential_cells(
            rows, bigram, settings.schedules, tuple(rounds), TOLERANCE, cells
        )
        open_cells = {(c["schedule"], c["steps"]) for c in cells if c.get("open")}
        stop["seeds"] = max((len(c["seed_ids"]) for c in cells), default=0)
        if not all(store.finished(p) for p in runs.values()):
            stop |= {
                "reason": f"budget: the round of {n} seeds unfinished when collected",
                "complete": False,
            }
            break
        if not open_cells:
            break
    else:
        if open_cells:
            stop["reason"] = f"budget: {len(open_cells)} cells undecided at {rounds[-1]} seeds"
    return runs, rows, cells, stop


def tuned(
    settings: LengthSettings, corpus: dict, store: Store, lrs: dict[int, float], train: bool
) -> dict:
    """Robustness: at `tuned_at` steps, each schedule at its own LR (chosen on the LR seeds), the
    first round's seeds, against uniform at its own (the shared) LR."""
    n = settings.tuned_at
    if not n or n not in lrs:
        return {}
    others = [s for s in settings.schedules if s != paper.UNIFORM]
    swept, chosen = sweep(
        settings, corpus, store, {s: dict.fromkeys(settings.lrs, (n,)) for s in others}, train
    )
    own = {s: chosen[s][n]["lr"] for s in others if s in chosen and n in chosen[s]}
    grid = {s: {lr: (n,)} for s, lr in own.items()} | {paper.UNIFORM: {lrs[n]: (n,)}}
    runs = plan(settings, corpus, list(range(settings.rounds[0])), grid, store.runs_dir)
    if train:
        train_all(runs, store, settings.workers, quiet=False)
    rows = score(runs, store, split_batches(settings.setup, corpus))
    return {
        "steps": n,
        "lrs": own,
        "chosen": chosen,
        "sweep": sweep_rows(swept, store),
        "rows": rows,
        "cells": stats.tuned_cells(rows, own, TOLERANCE),
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
    _, rows, cells, stop = run_rounds(settings, corpus, store, lrs, train, base["test"]["bigram"])
    robust = tuned(settings, corpus, store, lrs, train) if stop["complete"] else {}
    cfg = run_config(settings.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    return {
        "meta": {
            "settings": asdict(settings),
            "environment": environment(cfg.dtype),
            "wall_s": round(time.time() - t0, 1),
            "worker_s": round(sum(r["own_wall"] for r in rows), 1),
            "stopped": stop,
            "corpus": {k: corpus[k] for k in CORPUS_KEYS if k in corpus},
            "test_tokens": len(split_batches(settings.setup, corpus))
            * settings.setup.batch_size
            * settings.setup.seq_len,
        },
        "baselines": base,
        "chosen": {s: {str(n): c for n, c in v.items()} for s, v in chosen.items()},
        "sweep": sweep_rows(swept, store),
        "shared_lr": {str(n): lr for n, lr in lrs.items()},
        "rows": rows,
        "cells": cells,
        "trends": stats.seed_trends(cells),
        "tuned": robust,
    }


def settings_from(a: object) -> LengthSettings:
    """The settings the command line asks for, each problem refused in one line."""
    settings = QUICK if a.quick else LengthSettings()
    settings = replace(
        settings, workers=a.workers or settings.workers, corpus=a.corpus, resume_from=a.resume_from
    )
    try:
        if a.lengths:
            settings.lengths = tuple(int(x) for x in a.lengths.split(","))
            settings.lr_lengths = tuple(n for n in settings.lr_lengths if n in settings.lengths)
            settings.lr_lengths = settings.lr_lengths or settings.lengths
        if a.lr_lengths:
            settings.lr_lengths = tuple(int(x) for x in a.lr_lengths.split(","))
        if a.lrs:
            settings.lrs = tuple(float(x) for x in a.lrs.split(","))
    except ValueError:
        raise UserError(
            "--lengths and --lr-lengths take integers, --lrs numbers, comma-separated"
        ) from None
    if len(settings.lengths) < 2 or min(settings.lengths) < 4 or len(settings.lrs) < 1:
        raise UserError("--lengths needs two or more lengths of at least 4 steps, --lrs one LR")
    if not set(settings.lr_lengths) <= set(settings.lengths):
        raise UserError("--lr-lengths must be among --lengths")
    if settings.tuned_at not in settings.lengths:
        settings.tuned_at = 0
    if a.max_seeds is not None:
        if a.max_seeds < 2:
            raise UserError(f"--max-seeds {a.max_seeds}: an interval needs two seeds or more")
        settings.max_seeds = a.max_seeds
    if a.d_model:
        settings.setup = replace(settings.setup, d_model=a.d_model)
    return settings


def main(argv: list[str] | None = None) -> int:
    p = study_parser(
        "looped length",
        __doc__,
        out="output directory (default runs/length[-quick])",
        reference="results/length.json and figures/length_gap.png (another width: length_dW)",
        quick="toy size, every code path",
    )
    p.add_argument("--lengths", help="training lengths in steps, e.g. 120,240,480,960,1920")
    p.add_argument("--lrs", help="the shared LR's sweep, e.g. 1e-3,3e-3,1e-2")
    p.add_argument("--lr-lengths", help="lengths the LR is chosen at (longer: the last's LR)")
    p.add_argument("--d-model", type=int, help="width of the looped layer (default 64)")
    p.add_argument("--max-seeds", type=int, help="stop adding seed rounds past this many (16)")
    p.add_argument("--corpus", help="a `looped data text` directory or a `datasets` source")
    p.add_argument("--collect", action="store_true", help="train nothing: results of what finished")
    p.add_argument(
        "--resume-from", help="an earlier length*.json: its scored runs are not retrained"
    )
    a = p.parse_args(argv)
    settings = settings_from(a)
    out = Path(a.out or ("runs/length-quick" if a.quick else "runs/length"))
    # one writer: a second study into OUT is refused; --collect only reads finished runs, so it
    # may look at a study that is still training
    with nullcontext() if a.collect else dir_lock(out, "looped length"):
        result = run_study(settings, out, train=not a.collect)
    d = settings.setup.d_model
    stem = "length" if d == TextSetup().d_model or a.quick else f"length_d{d}"
    json_path = Path(f"results/{stem}.json") if a.reference else out / f"{stem}.json"
    fig_path = Path(f"figures/{stem}_gap.png") if a.reference else out / f"{stem}_gap.png"
    write_result(json_path, result)
    print(f"wrote {report.fig_gap(result, fig_path)}")
    return 0
