"""One block of the text study: fixed-first's gap to uniform 1..16 at one width, tokenizer,
corpus and recipe (warmup, residual init), at each of its training lengths, at equal tokens
(`studies.map` lays the blocks out, the recipe probe's too; the demo's text track is a block of
one length, `run_text`).

One recipe for every schedule: (1) the shared LR, uniform's best on the LR seeds (an edge
extends the sweep); (2) seeds in rounds, shorter lengths branching off one trunk per (schedule,
seed), each cell stopping once its group-sequential 95% interval decides at its tolerance;
(3) every run scored on the test windows beside count-table baselines, per-seed slopes of the
gap against log2(tokens); (4) robustness: each schedule at its own LR at `tuned_at` steps.
A rerun reuses every finished run (and, through the map's `resume_from`, an earlier file's rows).
"""

from __future__ import annotations

import math
import platform
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from looped import paper
from looped.errors import UserError
from looped.flops import schedule_flops, steps_for_budget, tokens_per_step
from looped.schedule_spec import parse_schedule
from looped.studies import engine, stats
from looped.studies.engine import MICRO, SCHEDULES, Grid, Study, paired_gap, score, sweep
from looped.studies.results import from_scratch, machine_name
from looped.studies.runner import Planned
from looped.studies.stats import Verdict, seed_trends
from looped.studies.textsetup import TextSetup, baselines, ensure_corpus, run_config
from looped.studies.textsetup import heldout_windows as split_batches

DEPTHS_SHOWN = (1, 4, 16)  # the per-depth gaps beside the mean: a mean can hide opposite moves
# what a results file says of its corpus
CORPUS_KEYS = ("tokenizer", "vocab_size", "splits", "dataset", "manifest")


@dataclass
class BlockSettings:
    setup: TextSetup = field(default_factory=TextSetup)  # corpus, model, batch
    lengths: tuple[int, ...] = (120, 240, 480, 960, 1920)  # training lengths in steps (16x)
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # the shared LR's sweep (an edge extends it)
    lr_seeds: tuple[int, ...] = (100,)  # seeds that choose the LR; never reported
    extend: int = 2  # how often an LR chosen at an edge extends the sweep
    lr_lengths: tuple[int, ...] = (120, 240, 480)  # swept lengths; longer ones take the last's LR
    rounds: tuple[int, ...] = (4, 8, 12, 16)  # reported seeds 0..n-1 after each round
    max_seeds: int = 16  # stop adding rounds past this many seeds (the budget)
    schedules: tuple[str, ...] = SCHEDULES
    tuned_at: int = 480  # robustness: each schedule at its own LR at this length (0: off)
    sweep_schedule: str = paper.UNIFORM  # the schedule the shared LR's sweep trains
    workers: int = 2  # single-threaded worker processes
    corpus: str | None = None  # None: the standard library; else a `--corpus` source


TOY = TextSetup(d_model=32, n_head=2, batch_size=8, seq_len=64, warmup_steps=4, val_batches=2)
QUICK = BlockSettings(  # every code path at toy size
    setup=replace(TOY, test_batches=2),
    lengths=(8, 16, 32, 64),
    lrs=(3e-3, 1e-2, 3e-2),
    lr_lengths=(8, 16, 32),
    rounds=(2, 3),
    tuned_at=16,
)


def rows_of(old: dict, path: str, corpus: dict, dtype: str) -> dict[str, dict]:
    """The scored rows (reported and sweep) of an earlier study, by run name; refused if it was
    measured on another corpus (other documents, split or tokenizer) or in another dtype (none
    of its rows would match a run here, so all would silently retrain)."""
    if old.get("meta", {}).get("corpus") != {k: corpus[k] for k in CORPUS_KEYS if k in corpus}:
        raise UserError(f"--resume-from {path} was measured on another corpus; drop the flag")
    if (theirs := old.get("meta", {}).get("environment", {}).get("dtype", dtype)) != dtype:
        raise UserError(
            f"--resume-from {path} was trained in {theirs} and this study trains in {dtype}; "
            f"collect it on a machine that trains in {theirs}"
        )
    tuned = old.get("tuned") or {}
    runs = [r for part in (old, tuned) for k in ("rows", "sweep") for r in part.get(k, [])]
    return {r["run"]: r for r in runs if isinstance(r, dict) and "run" in r}


def shared_lrs(settings: BlockSettings, chosen: dict) -> dict[int, float]:
    """Each length's shared LR: uniform's choice there, or at the longest swept length (the swept
    schedule's: a fixed-first arm alone in the own-recipe check)."""
    by_len = chosen.get(settings.sweep_schedule, {})
    if not by_len:
        raise UserError("no finished LR sweep to choose from; run `looped map` without --collect")
    last = max(by_len)
    return {n: by_len.get(n, by_len[last])["lr"] for n in settings.lengths}


def round_grid(settings: BlockSettings, lrs: dict[int, float], open_cells: set) -> Grid:
    """The runs a round needs: each schedule at the lengths where it is still undecided, and
    uniform at every length any schedule needs, each length at its shared LR."""
    grid: Grid = {}
    for s in settings.schedules:
        need = {n for (t, n) in open_cells if t == s or (s == paper.UNIFORM)}
        for n in sorted(need):
            by_lr = grid.setdefault(s, {})
            by_lr[lrs[n]] = tuple(sorted({*by_lr.get(lrs[n], ()), n}))
    return grid


def run_rounds(study: Study, lrs: dict[int, float]) -> tuple[list, list, dict]:
    """Seeds in rounds until every cell decides or the seeds run out: the reported rows, the
    cells at the last look and why the study stopped. Every (schedule, length) compared with
    uniform is open before the first look; a round of n seeds trains the cells still open."""
    settings = study.settings
    rounds = stats.planned_looks(settings.rounds, settings.max_seeds)  # the last: the budget
    tolerance = {s: paper.tolerance(s) for s in settings.schedules if s != paper.UNIFORM}
    open_cells = {(s, n) for s in tolerance for n in lrs}
    runs: dict[str, Planned] = {}
    cells: list[dict] = []
    reason, complete = "no cell open: each decided, or its models miss the bigram", True
    for n in rounds:
        runs.update(study.plan(list(range(n)), round_grid(settings, lrs, open_cells)))
        study.run(runs)
        rows = score(runs, study)
        looks = tuple(rounds)
        cells = sequential_cells(rows, study.bigram, settings.schedules, looks, tolerance, cells)
        open_cells = {(c["schedule"], c["steps"]) for c in cells if c.get("open")}
        if not all(study.finished(p) for p in runs.values()):
            reason, complete = f"budget: the round of {n} seeds unfinished when collected", False
            break
        if not open_cells:
            break
    if complete and open_cells:
        reason = (
            f"budget: {len(open_cells)} cells still open (undecided, or no worse than tolerance "
            f"and not yet within) at {rounds[-1]} seeds"
        )
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
    tolerance = {s: paper.tolerance(s) for s in own}
    return {
        "steps": n,
        "lrs": own,
        "chosen": chosen,
        "sweep": engine.sweep_rows(swept, study),
        "rows": rows,
        "cells": tuned_cells(rows, own, tolerance, study.bigram),
    }


def run_block(
    settings: BlockSettings, out: Path, train: bool = True, cached: dict | None = None
) -> dict:
    """The shared LR, seeds in rounds, the robustness check; `train` False only collects;
    `cached`: scored rows by run name (an earlier map.json's, `rows_of`) standing for runs."""
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    corpus = ensure_corpus(settings.setup, out, settings.corpus)
    cfg = run_config(settings.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    base = baselines(settings.setup, corpus, out / "baselines.json")
    batches, bigram = split_batches(settings.setup, corpus), base["test"]["bigram"]
    study = Study(settings, corpus, out / "runs", train, cached or {}, batches, bigram)
    grid = {settings.sweep_schedule: dict.fromkeys(settings.lrs, tuple(settings.lr_lengths))}
    swept, chosen = sweep(study, grid, settings.extend)
    lrs = shared_lrs(settings, chosen)
    rows, cells, stop = run_rounds(study, lrs)
    robust = tuned(study, lrs) if stop["complete"] else {}
    env = {"dtype": cfg.dtype, "torch": torch.__version__, "python": platform.python_version()}
    env["machine"] = machine_name()
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
        "sweep": engine.sweep_rows(swept, study),
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
    """What a cell says of its seeds' runs (one schedule at one length), judged or not."""
    first, nll = mine[0], [r["mean_nll"] for r in mine]
    return {
        **{k: first[k] for k in ("steps", "schedule", "label", "lr", "tokens")},
        "seeds": len(mine),
        "seed_ids": [r["seed"] for r in mine],
        "mean_nll": float(np.mean(nll)),
        "seed_nll": nll,
        "se_windows": float(np.mean([r["se"] for r in mine])),
        "tokens_per_param": first["tokens"] / first["params"],
        "tokens_per_non_embedding_param": first["tokens"] / first["params_non_embedding"],
        "epochs": first.get("epochs"),
        "one_pass": first.get("epochs", 0) <= 1,  # False: past one pass, marked, never reported
        "params_non_embedding": first["params_non_embedding"],
        "d_model": first.get("d_model"),
        "vocab_size": first.get("vocab_size"),
        "escape_steps": [r.get("escape_step") for r in mine],
        "beats_bigram": bool(max(nll) < bigram),
    }


def judged_cell(
    mine: list[dict], uni: list[dict], bigram: float, looks: tuple[int, ...], tol: float
) -> dict:
    """One schedule at one length against uniform's same seeds: the paired gap's group-sequential
    interval and verdict at `tol`, the gap at K=1, 4 and 16, and whether the cell stays open."""
    paired = {r["seed"] for r in uni}
    mine = [r for r in mine if r["seed"] in paired]
    cell, gap = _cell_base(mine, bigram), paired_gap(mine, uni, looks=looks)
    ref = [r for r in uni if r["seed"] in {m["seed"] for m in mine}]
    cell["devices"] = sorted({engine.device_of(r) for r in mine + ref})
    informative = cell["beats_bigram"] and max(r["mean_nll"] for r in ref) < bigram
    found = Verdict.UNDECIDED
    if gap.n > 1 or not informative:
        found = stats.verdict(gap, tol, informative)
    by_depth = {
        str(k): paired_gap(mine, uni, lambda r, k=k: r["token_nll"][k - 1], looks).as_dict()
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


def tuned_cells(
    rows: list[dict], own: dict[str, float], tolerance: dict[str, float], bigram: float
) -> list[dict]:
    """Each schedule at its own LR against uniform at the shared LR: a plain 95% t-interval, and
    no verdict where a model on either side misses the bigram table (as in the main cells)."""
    uni = {r["seed"]: r for r in rows if r["schedule"] == paper.UNIFORM}
    out = []
    for s, lr in own.items():
        mine = [r for r in rows if r["schedule"] == s and r["lr"] == lr]
        pairs = [(r, uni[r["seed"]]) for r in mine if r["seed"] in uni]
        if len(pairs) < 2:
            continue
        gap = paired_gap(mine, list(uni.values()))
        informative = max(r["mean_nll"] for pair in pairs for r in pair) < bigram
        out.append(
            {
                "schedule": s,
                "label": mine[0]["label"],
                "lr": lr,
                "shared_lr": pairs[0][1]["lr"],
                "gap": gap.as_dict(),
                "verdict": stats.verdict(gap, tolerance[s], informative).value,
            }
        )
    return out


# -- the demo's text track: the study at one length, at equal tokens and at equal FLOPs ---------
def flop_lengths(settings: BlockSettings, corpus: dict, steps: int) -> dict[str, int]:
    """Uniform's steps at each other schedule's modeled FLOPs over `steps` steps."""
    out = {}
    for s in (x for x in settings.schedules if x not in (paper.UNIFORM, MICRO)):
        cfg = run_config(settings.setup, corpus, schedule=s, lr=1e-3, seed=0, steps=steps)
        per_step, uniform = tokens_per_step(cfg), parse_schedule(paper.UNIFORM)
        budget = schedule_flops(cfg.model, parse_schedule(s), steps, per_step, cfg.seq_len)
        out[s] = steps_for_budget(cfg.model, uniform, budget, per_step, cfg.seq_len)
    return out


def run_text(settings: BlockSettings, out: Path, fresh: bool = False, quiet: bool = False) -> dict:
    """The study at its one length (`lengths[0]`): the shared LR (swept on the LR seeds, or
    `lrs[0]` without any), the first round's seeds, each schedule against uniform at equal
    tokens and against uniform cut to its modeled FLOPs; the result as `report.text` reads it."""
    t0, n = time.time(), settings.lengths[0]
    corpus = ensure_corpus(settings.setup, out, settings.corpus, quiet=quiet)
    base = baselines(settings.setup, corpus, out / "baselines.json")
    batches = split_batches(settings.setup, corpus)
    bigram = base["test"]["bigram"]
    study = Study(settings, corpus, out / "runs", True, {}, batches, bigram, fresh, quiet)
    cut = flop_lengths(settings, corpus, n)
    swept, lr = {}, settings.lrs[0]
    if settings.lr_seeds:
        swept, chosen = sweep(study, {paper.UNIFORM: dict.fromkeys(settings.lrs, (n,))})
        lr = shared_lrs(settings, chosen)[n]
    # every schedule at the shared LR and `n` steps; uniform also cut to each one's FLOPs
    grid = {s: {lr: (n,)} for s in settings.schedules} | {paper.UNIFORM: {lr: (n, *cut.values())}}
    runs = study.plan(range(settings.rounds[0]), grid)
    trained = study.run(runs)
    rows = [text_run(r, runs[r["run"]], study, cut) for r in score(runs, study)]
    result = {
        "meta": text_meta(settings, corpus, trained) | {"wall_seconds": time.time() - t0},
        "runs": rows,
        "sweep": [
            r | {"mean_nll": r["val_nll"], "label": paper.label(r["schedule"])}
            for r in engine.sweep_rows(swept, study)
        ],
        "baselines": base["test"] | {"k": base["k"], "windows": "test"},
        "chosen_lr": dict.fromkeys(settings.schedules, lr),
    }
    return result | text_tables(rows, settings.schedules, result["baselines"])


TEXT_TABLES = (("equal_tokens", "tokens"), ("equal_flops", "flops"))  # the text track's tables


def text_tables(rows: list[dict], schedules: tuple[str, ...], baseline: dict | None) -> dict:
    """The text track's two tables, each row judged; no verdict at all unless every reported
    model (every schedule's every seed, equal tokens) beats the bigram table."""
    tables = {key: engine.compare(rows, role, schedules) for key, role in TEXT_TABLES}
    worst = stats.worst_nll(tables["equal_tokens"]) if tables["equal_tokens"] else math.inf
    if not stats.below_bigram(worst, baseline):
        for row in (r for t in tables.values() for r in t if r.get("verdict")):
            row["verdict"] = Verdict.NOT_INFORMATIVE.value
    return tables


def text_run(row: dict, p: Planned, study: Study, cut: dict[str, int]) -> dict:
    """A scored row as the text track's report reads it: its roles (equal tokens, or uniform cut
    to a schedule's FLOPs: `cut`), modeled FLOPs, wall time and training curve as if it had
    trained from scratch (a branch's parent's share included)."""
    records, _, wall = from_scratch(study.runs_dir, p.name, p.parent, p.branch_step)
    roles = {f"flops:{s}" for s, n in cut.items() if p.schedule == paper.UNIFORM and n == p.steps}
    roles |= {"tokens"} if p.steps == study.settings.lengths[0] else set()
    return row | {
        "name": p.name,
        "roles": sorted(roles),
        "flops": p.flops(),
        "wall": wall,
        "depths": list(range(1, len(row["token_nll"]) + 1)),
        "val_mean_nll": row["val_nll"],
        "se_windows": row["se"],
        "curve": [[m["step"], m["loss"], m["depth"]] for m in records],
    }


def text_meta(settings: BlockSettings, corpus: dict, trained: int) -> dict:
    """What the text track's result says of itself: its settings, corpus, machine and dtype."""
    s = settings.setup
    splits = {k: v["tokens"] for k, v in corpus["splits"].items()}
    keys = ("tokenizer", "d_model", "n_head", "batch_size", "seq_len", "warmup_steps")
    keys += ("warmup_frac", "init_loops")  # the recipe (and a state norm where it is on)
    keys += ("state_norm",) * s.state_norm
    return {
        "settings": {
            "dataset": corpus["dataset"],
            **{k: getattr(s, k) for k in keys},
            "steps": settings.lengths[0],
            "seeds": settings.rounds[0],
            "lrs": list(settings.lrs),
            "lr_seeds": list(settings.lr_seeds),
            "schedules": list(settings.schedules),
            "workers": settings.workers,
        },
        "machine": machine_name(),
        "corpus": {k: corpus.get(k) for k in ("dataset", "tokenizer", "vocab_size")} | splits,
        "dtype": run_config(s, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1).dtype,
        "tokens_per_step": s.batch_size * s.seq_len,
        "metric": "mean held-out token NLL over serving depths 1..16 (nats/token)",
        "runs_trained": trained,  # by this invocation (reused ones not counted)
    }
