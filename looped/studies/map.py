"""The map: where fixed-first holds, by model width, vocabulary and training length, on one pass.

    looped map                                 # runs/map/: every block in priority order
    looped map --blocks d32,d64                # some blocks now, the rest later
    looped map --collect                       # no training: the results of what finished
    looped map --resume-from results/map.json  # a fresh machine: reuse that file's scored runs
    looped map --collect --resume-from results/map.json,map_gpu.json   # and a GPU loan's
    looped map --quick                         # toy size, every code path

A block is the text study (`studies.textstudy`: the shared LR chosen on seed 100 at every length,
seeds in rounds, paired gaps and per-seed trends) at one width and tokenizer, on the pinned torch
sources (`data.package_corpus`, so that no reported cell sees a token twice) unless it names a
corpus of its own, and under a recipe of its own where it names one (the warmup, in steps or
`optim.warmup_frac`; `model.init_loops`). Its lengths are spaced in training tokens per
non-embedding parameter, the same levels at every width. Blocks with the same width, tokenizer,
corpus and recipe share one runs directory (`Block.home`): the frontier's, the robustness
check's and the micro arm's uniform runs are the width block's, trained once; two recipes never
share a run. `looped map --probe` lays out the recipe probe's blocks (`PROBE`).
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import torch

from looped import paper
from looped.config import load_config
from looped.data.text import NAMED_CORPORA
from looped.errors import UserError
from looped.flops import saving
from looped.model import LoopedTransformer
from looped.runtime.device import cpu_kernels
from looped.schedule_spec import parse_schedule
from looped.studies import stats, textstudy
from looped.studies.recipe import parse_recipe, recipe_name
from looped.studies.results import machine_name, write_result
from looped.studies.resume import read_map
from looped.studies.textsetup import (
    TextSetup,
    ensure_corpus,
    recipe_setup,
    run_config,
    slug,
)
from looped.studies.timing import fixed_step, one_thread, time_min, wall_saving

CORPUS = "torch-2.13.0"  # the Python sources of the torch CI pins: ~46 MB, checked by hash
TPP = (20, 40, 80, 160)  # lengths: training tokens per non-embedding parameter (8x)
ARMS = (paper.RECIPES_1B[1], paper.RECIPE_200M)  # K=4 (80%) and K=2 (67%) against uniform
# the paper's Fig. 2 (left): both fixed depths at three switch fractions
FRONTIER = tuple(
    f"fixed-first:k={k},frac={f},then=uniform:1-16" for k in (2, 4) for f in (0.5, 0.67, 0.8)
)


@dataclass(frozen=True)
class Block:
    name: str  # its key in map.json
    d_model: int  # width of the looped layer
    tokenizer: str = "bpe:512"  # BPE fit on the train split
    tpp: tuple[float, ...] = TPP  # lengths, in tokens per non-embedding parameter
    arms: tuple[str, ...] = ARMS  # the schedules set against uniform 1..16
    tuned: bool = False  # robustness: each arm at its own LR as well, at the longest length
    corpus: str = ""  # its own corpus (named, a directory or a datasets source); "": the map's
    steps: tuple[int, ...] = ()  # its lengths in steps instead of `tpp` (a corpus of its own)
    warmup: float | None = None  # LR warmup: steps if 1 or more, else a fraction of each run;
    # None: the settings' own (the map's 10 steps)
    init_loops: int = 1  # block applications the residual init counts (`model.init_loops`)
    sweep: str = paper.UNIFORM  # the schedule its LR sweep trains: a fixed-first arm in the
    # own-recipe check (`OWN`), uniform everywhere else
    state_norm: bool = False  # an RMSNorm on the recurrent state between loops
    lrs: tuple[float, ...] = ()  # its own LRs instead of the settings' (a probe candidate's)
    lr_seeds: tuple[int, ...] = ()  # its own LR seeds instead of the settings'

    @property
    def recipe(self) -> str:
        """ "" for the settings' own recipe; else "w10_i1" (10 warmup steps, the block counted
        once at init), "w5pct_i16" (5% of the run, once per application up to 16), "w10pct_i1_sn"
        (10% of the run, the state normed between loops), ..."""
        if self.warmup is None:
            return "" if self.init_loops == 1 else f"wsetup_i{self.init_loops}"
        return recipe_name(self.warmup, self.init_loops, self.state_norm)

    @property
    def home(self) -> str:
        """The runs directory it shares with every block of its width, tokenizer, corpus and
        recipe, so that two recipes never share a run."""
        own = f"-{slug(self.corpus)}" if self.corpus else ""
        own += f"-{self.recipe}" if self.recipe else ""
        return f"d{self.d_model}-{self.tokenizer.replace(':', '')}{own}"

    @property
    def n_head(self) -> int:
        return 2 if self.d_model <= 32 else 4 if self.d_model <= 128 else 8


# Priority order. The cheap widths first so that a session ends with whole widths; the 2x2
# (d in {64, 128} x BPE in {512, 4096} at 40 tokens per parameter) is d64, d64-bpe4096, d128,
# d128-bpe4096; then the frontier, the own-LR check and the per-micro-batch arm.
BLOCKS = (
    Block("d32", 32),
    Block("d64", 64),
    Block("d64-bpe4096", 64, "bpe:4096", (40,)),
    Block("d128", 128, tpp=(20, 40)),
    Block("d128-bpe4096", 128, "bpe:4096", (40,)),
    Block("frontier-d64", 64, tpp=(160,), arms=FRONTIER),
    Block("robust-d32", 32, tpp=(160,), tuned=True),
    Block("robust-d64", 64, tpp=(160,), tuned=True),
    Block("micro-d64", 64, tpp=(160,), arms=(textstudy.MICRO,)),
    # d=32 longer, still one pass: where a recipe lets uniform leave its plateau at d=32 (the
    # tuned one does at 160), d=32 is a third informative width, its trend read at 8x to 32x
    Block("d32-long", 32, tpp=(320, 640)),
    # d=64 at the length matched across widths alone: where a new recipe's map cannot rerun all
    # of d64, the cell that shows whether d64's verdicts stand under it (the same runs as d64's)
    Block("d64-40", 64, tpp=(40,)),
    # d=64 at 80 tokens per parameter alone: where the map's recipe put K=2 closest to worse
    # (lower end +0.37%), the cell whose verdict a fair recipe most needs to confirm
    Block("d64-80", 64, tpp=(80,)),
    # d=128 at 20 tokens per parameter alone (1,042 steps, its shorter length): the d=128 BPE-512
    # cell a CPU session can rerun under a new recipe (its 2,084 steps take about twice as long)
    Block("d128-20", 128, tpp=(20,)),
    # d=64 at 160 tokens per parameter alone (2,088 steps): the README's bottom-line cell, under a
    # new recipe without the shorter lengths (the same runs as d64's there)
    Block("d64-160", 64, tpp=(160,)),
)


@dataclass
class MapSettings:
    blocks: tuple[Block, ...] = BLOCKS
    corpus: str = CORPUS  # a named corpus, a `looped data text` directory or a datasets source
    setup: TextSetup = field(default_factory=lambda: TextSetup(dtype="fp32"))  # batch, windows
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # each length's sweep (an edge extends it)
    rounds: tuple[int, ...] = (4, 8)  # reported seeds after each round
    max_seeds: int = 8  # wide widths' uniform seeds spread: up to 8 before a cell is left open
    workers: int = 2  # single-threaded worker processes
    resume_from: str | None = None  # earlier map.json files (comma-separated): scored runs reused
    lr_seeds: tuple[int, ...] = (100,)  # the seeds that choose the LR; never reported
    extend: int = 2  # how often an LR chosen at an edge extends the sweep (0: the LRs as given)


# A lent GPU: widths to 512, lengths over 100x in tokens per parameter. Past ~20M tokens the
# torch sources repeat: those lengths are not trained (`one_pass`); a larger --corpus keeps them.
GPU = MapSettings(
    blocks=tuple(
        Block(f"d{d}", d, tpp=(20, 40, 80, 160, 320, 640, 2000)) for d in (64, 128, 256, 512)
    ),
    workers=8,
)


def arm_tag(schedule: str) -> str:
    """ "fixed-first:k=4,frac=0.8,then=uniform:1-16" -> "k4f80": an arm in a block's name."""
    m = re.search(r"k=(\d+),frac=([\d.]+)", schedule)
    return f"k{m[1]}f{round(float(m[2]) * 100)}" if m else slug(schedule)


def probe_blocks(
    cells: tuple[Block, ...],
    warmups: tuple[float, ...],
    inits: tuple[int, ...],
    schedule: str = paper.UNIFORM,
) -> tuple[Block, ...]:
    """The recipe probe's blocks: SCHEDULE alone at each cell under each (warmup, init), only its
    LR sweep trained; "probe-CELL-RECIPE" for uniform, "own-CELL-ARM-RECIPE" for an arm."""
    kind = "probe" if schedule == paper.UNIFORM else "own"
    return tuple(
        replace(r, name=f"{kind}-{'-'.join(part)}-{r.recipe}", arms=(), sweep=schedule)
        for c in cells
        for part in [(c.name,) if kind == "probe" else (c.name, arm_tag(schedule))]
        for r in (replace(c, warmup=w, init_loops=i) for w in warmups for i in inits)
    )


# The recipe probe (`looped map --probe`): is uniform slow to leave its plateau because of the
# recipe? Uniform alone, where it escaped late (d32; d128 BPE-4096 at its shorter length) and
# where it did not (d64), each warmup x residual init x LR on two seeds no cell reports. It
# trains only the LR sweep: each run's escape step and validation NLL are the probe's rows.
# The 5% warmup ran at d32 only: there it ended 5.5% behind the best recipe at its best LR and
# left a seed on the plateau at LR 1e-2 (results/recipe.json), so the larger cells, an hour a
# recipe on a CPU, spend their runs on the four recipes still in contention.
PROBE_CELLS = (
    Block("d32", 32, tpp=(160,)),
    Block("d64", 64, tpp=(160,)),
    Block("d128-bpe4096", 128, "bpe:4096", (20,)),
)
# The own-recipe check: the recipe is chosen on uniform and shared, so it might suit uniform
# and handicap fixed-first. Each arm alone at the cheapest cell under the four recipes still in
# contention, on the same LR seeds: how far the shared recipe leaves the arm from its own best.
OWN = tuple(
    b for arm in ARMS for b in probe_blocks(PROBE_CELLS[:1], (10, 0.02), (1, 16), schedule=arm)
)
# The warmup floor. Under the chosen w2pct_i16, d=64 at 40 tokens per parameter (522 steps, so a
# 10-step warmup) left a reported uniform seed on the plateau until step 460 (results/map-w2pct_i16
# .json, block d64-40): 2% of a short run is the old 10 steps, and the 16-application init may need
# more. That cell joins the probe under both inits at 2%, and a fixed 40-step warmup with the
# 16-application init (2% or more of every probed run but d=64's 2,088 steps, where 2% is 42) joins
# every cell, so the choice reads the short cell too.
FLOOR_CELL = Block("d64-40", 64, tpp=(40,))
FLOOR = probe_blocks((FLOOR_CELL,), warmups=(0.02,), inits=(1, 16)) + probe_blocks(
    (FLOOR_CELL, *PROBE_CELLS), warmups=(40,), inits=(16,)
)
# The late-start probe. Under w2pct_i1, d=128 with BPE-4096 (2,084 steps) is the one cell where
# uniform still leaves its plateau after the arms (30-170 steps), and the first probe never ran
# there. Each candidate (warmup share, LR, state norm) trains uniform on both probe seeds and each
# arm on the first, so that "on time" is read against the arms (`choose_late`).
LATE_CELL = Block("d128-bpe4096", 128, "bpe:4096", (40,))
LATE = (  # (warmup share of the run, LR, state norm), in the order they train
    (0.02, 1e-3, False),  # the cell's recipe and LR under w2pct_i1: the reference
    (0.10, 1e-3, False),
    (0.02, 1e-3, True),
    (0.02, 3e-4, False),
    (0.10, 1e-3, True),
    (0.10, 3e-4, False),
    (0.20, 1e-3, False),
)


def late_blocks(candidates: tuple[tuple[float, float, bool], ...]) -> tuple[Block, ...]:
    """Per candidate: "late-RECIPE-lrLR" (uniform on seeds 200 and 201), then
    "late-ARM-RECIPE-lrLR" for each arm (seed 200): sweep runs at one LR, nothing reported."""
    out = []
    for warmup, lr, normed in candidates:
        base = replace(LATE_CELL, warmup=warmup, state_norm=normed, lrs=(lr,), arms=())
        tag = f"{base.recipe}-lr{lr:g}"
        out.append(replace(base, name=f"late-{tag}", lr_seeds=(200, 201)))
        out += [
            replace(base, name=f"late-{arm_tag(a)}-{tag}", lr_seeds=(200,), sweep=a) for a in ARMS
        ]
    return tuple(out)


PROBE = MapSettings(
    blocks=probe_blocks(PROBE_CELLS[:1], warmups=(10, 0.02, 0.05), inits=(1, 16))
    + probe_blocks(PROBE_CELLS[1:], warmups=(10, 0.02), inits=(1, 16))
    + OWN
    + FLOOR
    + late_blocks(LATE),
    lrs=(3e-3, 1e-2),
    lr_seeds=(200, 201),
    extend=0,  # the LR is a crossed factor here; the map sweeps it again under the recipe chosen
)


def with_recipe(settings: MapSettings, name: str) -> MapSettings:
    """Every block under the recipe NAME, each in a home of its own, its LR chosen on two LR seeds
    (where the escape depends on the seed, one seed can pick a risky LR); the settings' own
    recipe (10 warmup steps, the block counted once) leaves the blocks where they are."""
    warmup, loops, normed = parse_recipe(name)
    own = (settings.setup.warmup_steps, 1, False)
    if (warmup, loops, normed) == own and not settings.setup.warmup_frac:
        return settings
    blocks = tuple(
        replace(b, warmup=warmup, init_loops=loops, state_norm=normed) for b in settings.blocks
    )
    seeds = tuple(dict.fromkeys((*settings.lr_seeds, max(settings.lr_seeds) + 1)))
    return replace(settings, blocks=blocks, lr_seeds=seeds)


def choose_recipe(blocks: dict[str, dict], settings: MapSettings) -> dict | None:
    """The recipe whose uniform trains best, among those probed at every cell: at each cell where
    all of them have finished, each one's best LR's mean validation NLL (over the LR seeds)
    relative to the best of them there, averaged over those cells; the lowest wins. A recipe left
    out of the larger cells is scored at the cells where it ran ("dropped"). None before a cell
    is whole."""
    probed: dict[str, set[str]] = {}
    by_cell: dict[str, dict[str, float]] = {}
    for b in (b for b in settings.blocks if b.sweep == paper.UNIFORM and not b.lrs):
        cell = b.name.removesuffix(f"-{b.recipe}").removeprefix("probe-")
        probed.setdefault(cell, set()).add(b.recipe)
        if (best := best_lr_nll(blocks.get(b.name, {}), settings)) is not None:
            by_cell.setdefault(cell, {})[b.recipe] = best
    recipes = set.intersection(*probed.values()) if probed else set()
    whole = [c for c, at in by_cell.items() if recipes <= set(at)]
    if not whole or len(recipes) < 2:
        return None

    def excess(r: str, cells: list[str]) -> float:
        return float(
            np.mean([by_cell[c][r] / min(by_cell[c][q] for q in recipes) - 1 for c in cells])
        )

    scores = {r: excess(r, whole) for r in sorted(recipes)}
    dropped, dropped_at = {}, {}
    for r in sorted(set().union(*probed.values()) - recipes):
        if ran := [c for c in whole if r in by_cell[c]]:
            dropped[r], dropped_at[r] = excess(r, ran), ran
    best = min(scores, key=scores.get)
    return {
        "recipe": best,
        "excess": scores,
        "cells": whole,
        "dropped": dropped,
        "dropped_cells": dropped_at,
    }


def choose_late(blocks: dict[str, dict], settings: MapSettings, slack: int = 10) -> dict | None:
    """The late-start probe's rule, fixed before its runs: a candidate gives uniform an on-time
    start where uniform's escape step in every probe seed is no later than each arm's, give or
    take one logging interval (SLACK steps); among those the lowest mean validation NLL wins.
    Each candidate's NLL against the reference (the first candidate) is paired by seed, once
    the reference has finished. None until a candidate (uniform and both arms) has finished."""
    late = [b for b in settings.blocks if b.lrs]  # the late-start probe's: each its own LR
    rows = {b.name: blocks.get(b.name, {}).get("sweep", []) for b in late}
    done = {b.name: rows[b.name] for b in late if len(rows[b.name]) == len(b.lr_seeds)}
    uniform = [b for b in late if b.sweep == paper.UNIFORM]
    ref = {r["seed"]: r["val_nll"] for r in done.get(uniform[0].name, [])} if uniform else {}
    table = [row for b in uniform if (row := _late_row(b, done, ref, slack)) is not None]
    if not table:
        return None
    timely = [c for c in table if c["on_time"]]
    best = min(timely, key=lambda c: c["val_nll"]) if timely else None
    # a winner at the grid's lowest LR or longest warmup: the grid extends that way before a choice
    lrs, warmups = {b.lrs[0] for b in uniform}, {b.warmup for b in uniform}
    won = next((b for b in uniform if best and b.name == f"late-{best['candidate']}"), None)
    low_lr = won is not None and len(lrs) > 1 and won.lrs[0] == min(lrs)
    edge = won is not None and (low_lr or len(warmups) > 1 and won.warmup == max(warmups))
    return {
        "rule": f"uniform's escape <= each arm's + {slack} steps in every probe seed; then the "
        "lowest mean validation NLL",
        "candidates": table,
        "winner": best and best["candidate"],
        "reference": {
            "candidate": uniform[0].name.removeprefix("late-"),
            "recipe": uniform[0].recipe,
            "lr": uniform[0].lrs[0],
        },
        "whole": len(table) == len(uniform),
        "planned": len(uniform),
        "at_edge": bool(edge),
    }


def _late_row(b: Block, done: dict[str, list], ref: dict, slack: int) -> dict | None:
    """One late-start candidate's row for `choose_late`: on time or not against the arms' escapes,
    its mean validation NLL and its paired ratio to the reference; None until it and both its
    arms have finished."""
    tag = b.name.removeprefix("late-")
    arms = [f"late-{arm_tag(a)}-{tag}" for a in ARMS]
    if b.name not in done or any(a not in done for a in arms):
        return None
    mine = done[b.name]
    arm_escape = [r["escape_step"] for a in arms for r in done[a]]
    on_time = all(
        r["escape_step"] is not None
        and all(e is None or r["escape_step"] <= e + slack for e in arm_escape)
        for r in mine
    )
    ratios = [r["val_nll"] / ref[r["seed"]] - 1 for r in mine if r["seed"] in ref]
    return {
        "candidate": tag,
        "recipe": b.recipe,
        "lr": b.lrs[0],
        "on_time": on_time,
        "val_nll": float(np.mean([r["val_nll"] for r in mine])),
        "escapes": [r["escape_step"] for r in mine],
        "arm_escapes": arm_escape,
        "vs_reference": vs_reference(ratios),
    }


def vs_reference(ratios: list[float]) -> dict:
    """Paired by seed against the reference: the mean ratio - 1 and its 95% interval (as the map's
    gaps: over log ratios); with one seed, the value alone."""
    if len(ratios) < 2:
        return {"mean": float(np.mean(ratios)) if ratios else None, "n": len(ratios)}
    return stats.ratio_interval(ratios).as_dict()


def best_lr_nll(block: dict, settings: MapSettings) -> float | None:
    """A probe block's best LR's validation NLL, the mean over the LR seeds; None until its
    whole sweep (every LR on every LR seed) has finished."""
    rows = block.get("sweep", [])
    if len(rows) != len(settings.lrs) * len(settings.lr_seeds):
        return None
    lrs = {r["lr"] for r in rows}
    return float(min(np.mean([r["val_nll"] for r in rows if r["lr"] == lr]) for lr in lrs))


def own_recipes(blocks: dict[str, dict], settings: MapSettings, shared: str) -> list[dict]:
    """Per fixed-first arm of the own-recipe check: each recipe's best-LR validation NLL, the
    arm's own best recipe, and how far the SHARED recipe (uniform's choice) ends above it."""
    out = []
    first = [b for b in settings.blocks if not b.lrs]  # the late-start probe reads its own
    for arm in dict.fromkeys(b.sweep for b in first if b.sweep != paper.UNIFORM):
        mine = {b.recipe: blocks.get(b.name, {}) for b in first if b.sweep == arm}
        nll = {r: v for r, b in mine.items() if (v := best_lr_nll(b, settings)) is not None}
        if len(nll) < len(mine) or shared not in nll:
            continue  # the check is read once every recipe has finished
        best = min(nll, key=nll.get)
        excess = nll[shared] / nll[best] - 1
        # what two seeds can resolve: the widest split between them at a recipe's best LR
        spread = max(_seed_split(b["sweep"]) for b in mine.values())
        out.append({"schedule": arm, "nll": nll, "best": best, "shared": shared, "excess": excess})
        out[-1]["seed_spread"] = spread
    return out


def _seed_split(rows: list[dict]) -> float:
    """At a sweep's best LR (mean over the LR seeds), its seeds' NLL range over their mean."""
    by_lr: dict[float, list[float]] = {}
    for r in rows:
        by_lr.setdefault(r["lr"], []).append(r["val_nll"])
    vals = min(by_lr.values(), key=np.mean)
    return float((max(vals) - min(vals)) / np.mean(vals))


QUICK = MapSettings(  # every code path at toy size, on the standard library
    blocks=(
        Block("d16", 16, tpp=(2, 4, 8)),
        Block("d32", 32, tpp=(2, 4)),
        Block("frontier-d16", 16, tpp=(8,), arms=FRONTIER[:2]),
    ),
    corpus="stdlib",
    setup=replace(textstudy.TOY, dtype="fp32", test_batches=2),
    lrs=(3e-3, 1e-2, 3e-2),
    rounds=(2, 3),
    max_seeds=3,
)


QUICK_PROBE = replace(
    QUICK,
    blocks=probe_blocks((Block("d16", 16, tpp=(8,)),), warmups=(4, 0.05), inits=(1, 16))
    + probe_blocks((Block("d16", 16, tpp=(8,)),), (4, 0.05), (16,), schedule=paper.RECIPE_200M),
    lrs=(1e-2, 3e-2),
    lr_seeds=(200, 201),
    extend=0,
)
# every block name a map.json may hold: a resume naming another is refused (`resume.read_map`)
KNOWN = {b.name for s in (GPU, PROBE, QUICK, QUICK_PROBE) for b in (*BLOCKS, *s.blocks)}


def steps_for(block: Block, setup: TextSetup) -> tuple[int, ...]:
    """Each length in steps: tokens per non-embedding parameter x parameters / tokens per step."""
    over = [f"model.d_model={block.d_model}", f"model.n_head={block.n_head}"]
    params = LoopedTransformer(load_config("demo", over).model).num_params(non_embedding=True)
    per_step = setup.batch_size * setup.seq_len
    return tuple(max(1, round(t * params / per_step)) for t in block.tpp)


def block_settings(block: Block, settings: MapSettings) -> textstudy.BlockSettings:
    """One block as the text study declares it (its corpus, lengths, arms, recipe)."""
    shape = {"d_model": block.d_model, "n_head": block.n_head, "tokenizer": block.tokenizer}
    setup = replace(settings.setup, **shape)
    setup = recipe_setup(setup, block.warmup, block.init_loops, block.state_norm)
    steps = block.steps or steps_for(block, setup)
    as_given = ("extend", "rounds", "max_seeds", "workers")  # the map's own
    return textstudy.BlockSettings(
        **{k: getattr(settings, k) for k in as_given},
        lrs=block.lrs or settings.lrs,
        lr_seeds=block.lr_seeds or settings.lr_seeds,
        setup=setup,
        lengths=steps,
        lr_lengths=steps,  # the LR is chosen where every verdict is made
        schedules=(paper.UNIFORM, *block.arms),
        sweep_schedule=block.sweep,
        tuned_at=max(steps) if block.tuned else 0,
        corpus=block.corpus or settings.corpus,
    )


def one_pass(bs: textstudy.BlockSettings, corpus: dict, name: str) -> textstudy.BlockSettings:
    """The block without its lengths past one pass over the corpus's train split: such a cell
    could never be reported, so it is not trained (said in one line)."""
    per_step = bs.setup.batch_size * bs.setup.seq_len
    train = corpus["splits"]["train"]["tokens"]
    keep = tuple(n for n in bs.lengths if n * per_step <= train)
    if dropped := [str(n) for n in bs.lengths if n not in keep]:
        left = f"{len(keep)} left" if keep else "the block is skipped"
        twice = f"{', '.join(dropped)} steps would pass over the train split's {train:,} tokens"
        print(f"{name}: {twice} more than once; not trained ({left})")
    tuned_at = max(keep) if bs.tuned_at and keep else 0
    lr_lengths = tuple(n for n in bs.lr_lengths if n in keep)
    return replace(bs, lengths=keep, lr_lengths=lr_lengths, tuned_at=tuned_at)


def resume_paths(settings: MapSettings) -> list[str]:
    """The `resume_from` files, in the order given."""
    return [p.strip() for p in (settings.resume_from or "").split(",") if p.strip()]


def known_blocks(settings: MapSettings) -> set[str]:
    """The block names a map.json may hold: every layout's (the CPU map's, the GPU map's, the
    probe's and their quick sizes'; a recipe keeps the names) and the settings' own."""
    return KNOWN | {b.name for b in settings.blocks}


def earlier_rows(settings: MapSettings, block: Block, corpus: dict, dtype: str) -> dict:
    """The scored rows of every block at `block`'s home in the `resume_from` map.json files (a
    CPU map and a GPU loan's, say); where two files score one run, the first file's row wins."""
    rows: dict[str, dict] = {}
    for path in reversed(resume_paths(settings)):
        old = read_map(path, known_blocks(settings))
        for b in settings.blocks:
            if b.home == block.home and (part := old["blocks"].get(b.name)):
                rows |= textstudy.rows_of(part, path, corpus, dtype)
    return rows


def check_resume(settings: MapSettings) -> None:
    """Every `resume_from` file read and checked before any corpus is built: a missing file, a
    file that is not a JSON object or not a map.json's shape (`resume.read_map`), and a block
    measured on another corpus or tokenizer are refused in one line (`rows_of` checks the rest
    once the corpus is known); runs that took other CPU kernels than this machine will get a
    one-line warning."""
    for path in resume_paths(settings):
        old = read_map(path, known_blocks(settings))
        for b in settings.blocks:
            theirs = (old["blocks"].get(b.name) or {}).get("meta", {}).get("corpus", {})
            source = b.corpus or settings.corpus
            mine = {
                "dataset": source if source in NAMED_CORPORA else None,
                "tokenizer": b.tokenizer,
            }
            clash = [k for k, v in mine.items() if v is not None and theirs.get(k, v) != v]
            if clash:
                raise UserError(
                    f"--resume-from {path}: block {b.name} was measured on {theirs.get('dataset')} "
                    f"({theirs.get('tokenizer')}), not {source} ({b.tokenizer}); drop the flag"
                )
        if note := kernel_note(old, settings, cpu_kernels()):
            print(f"--resume-from {path}: {note}", file=sys.stderr)
        for note in lr_notes(old, settings):
            print(f"--resume-from {path}: {note}", file=sys.stderr)


def lr_notes(old: dict, settings: MapSettings) -> list[str]:
    """A warning per resumed block whose LR sweep left out an LR of this run's grid (`--lrs`):
    continuing it, say for a second round of seeds, would train those sweep runs first and could
    move the LR the block's cells were read at. Not an error: a user may mean to widen the sweep.
    An LR the sweep added past its grid's edge is not missing from it."""
    notes = []
    for b in settings.blocks:
        swept = {r["lr"] for r in (old["blocks"].get(b.name) or {}).get("sweep", [])}
        if swept and (new := sorted(set(settings.lrs) - swept)):
            keep = ",".join(f"{lr:g}" for lr in sorted(swept))
            adds = ", ".join(f"{lr:g}" for lr in new)
            notes.append(
                f"block {b.name}'s LR sweep left out {adds}, which this run trains first and which"
                f" may move its chosen LR; pass --lrs {keep} to continue it as it was"
            )
    return notes


def kernel_note(old: dict, settings: MapSettings, here: str) -> str | None:
    """A warning where the resumed blocks' CPU runs took other kernels than this machine will:
    a cell would pair runs that parted within tens of steps (results/kernel_paths.txt). Not an
    error: the rows say where each ran, and a user may mean to mix."""
    names = {b.name for b in settings.blocks}
    rows = [
        r
        for name, part in old["blocks"].items()
        if name in names
        for k in ("rows", "sweep")
        for r in part.get(k, [])
    ]
    theirs = {r["cpu_kernels"] for r in rows if r.get("cpu_kernels")}
    if not theirs or theirs == {here}:
        return None
    said = f"its CPU runs took {' and '.join(sorted(theirs))} kernels, this machine takes {here}"
    levels = ("DEFAULT", "AVX2", "AVX512")  # torch's dispatch levels, lowest first
    (one,) = theirs if len(theirs) == 1 else (None,)
    if one in levels[1:] and here in levels and levels.index(one) < levels.index(here):
        pin = f"MKL_CBWR={one} ATEN_CPU_CAPABILITY={one.lower()}"
        return f"{said}; to continue on their path, set {pin} before the command (docs/USAGE.md)"
    return f"{said}; the new runs will part from theirs within tens of steps (docs/USAGE.md)"


def run_map(settings: MapSettings, out: Path, train: bool = True, name: str = "map.json") -> dict:
    """Every block in order, OUT/NAME rewritten after each so that a stop loses nothing scored."""
    t0, path = time.time(), out / name
    done = json.loads(path.read_text()).get("blocks", {}) if path.is_file() and train else {}
    result = {"meta": {"settings": asdict(settings)}, "blocks": done}
    for block in settings.blocks:
        bs = block_settings(block, settings)
        corpus = ensure_corpus(bs.setup, out, bs.corpus, quiet=False)
        bs.corpus = corpus["path"]  # tokenized once per tokenizer, shared by the blocks
        bs = one_pass(bs, corpus, block.name)
        if not bs.lengths:
            continue
        cfg = run_config(bs.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
        cached = earlier_rows(settings, block, corpus, cfg.dtype)
        try:
            result["blocks"][block.name] = textstudy.run_block(bs, out / block.home, train, cached)
            result["blocks"][block.name]["modeled_saving"] = modeled(bs, corpus)
        except UserError as e:
            if train or "no finished LR sweep" not in str(e):
                raise
            continue  # collecting: a block whose sweep has not finished has nothing to show
        result["meta"] |= {
            "wall_s": round(time.time() - t0, 1),
            "corpus": settings.corpus,
        }
        if train:  # a stop mid-study keeps every block scored so far
            write_result(path, result, say=False)
    return result


def modeled(bs: textstudy.BlockSettings, corpus: dict) -> dict[str, dict[str, float]]:
    """Each arm's modeled compute saving against uniform at every length, of this block's model
    (its width and vocabulary: the head's share of a step's FLOPs moves the saving)."""
    cfg = run_config(bs.setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    uniform, out = parse_schedule(paper.UNIFORM), {}
    for arm in (s for s in bs.schedules if s not in (paper.UNIFORM, textstudy.MICRO)):
        ours = parse_schedule(arm)
        out[arm] = {str(n): saving(cfg.model, ours, uniform, n, cfg.seq_len) for n in bs.lengths}
    return out


def depth_seconds(setup: TextSetup, corpus: dict, reps: int = 5) -> dict:
    """One training step's seconds at every K=1..16 (forward, backward, AdamW; one thread, the
    study's dtype), the depths taking turns in each of `reps` repeats so that background load
    hits them alike: {K: [seconds per repeat]}."""
    cfg = run_config(setup, corpus, schedule=paper.UNIFORM, lr=1e-3, seed=0, steps=1)
    model = LoopedTransformer(cfg.model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, cfg.model.vocab_size, (setup.batch_size, setup.seq_len + 1))
    cpu = torch.device("cpu")

    def loss(k: int) -> torch.Tensor:
        return model(x[:, :-1], depth=k, targets=x[:, 1:])[1]

    # `timing.fixed_step`: the step every timer in the package takes
    fns = {k: fixed_step(partial(loss, k), opt, cpu, cfg.dtype) for k in range(1, 17)}
    with one_thread():
        time_min(fns, warmup=1, reps=0, device=cpu)  # warm every depth once
        order = list(fns)  # each repeat starts one depth further along: none always goes first
        turns = [order[r % 16 :] + order[: r % 16] for r in range(reps)]
        per_rep = [time_min({k: fns[k] for k in t}, warmup=0, reps=1, device=cpu) for t in turns]
    return {k: [r[k] for r in per_rep] for k in fns}


def wall_range(seconds: dict, steps: int, seeds: range, arm: str) -> dict:
    """The arm's wall-clock saving against uniform over whole runs of `steps`: each repeat's
    per-depth times weighted by every seed's exact draws; the mean and range over repeats."""
    reps = len(next(iter(seconds.values())))
    ours = [parse_schedule(arm, s) for s in seeds]
    refs = [parse_schedule(paper.UNIFORM, s) for s in seeds]
    savings = [
        wall_saving({int(k): v[r] for k, v in seconds.items()}, ours, refs, steps)
        for r in range(reps)
    ]
    return {"mean": float(np.mean(savings)), "min": min(savings), "max": max(savings), "reps": reps}


def time_blocks(settings: MapSettings, out: Path, reps: int = 5) -> dict:
    """Per-depth step seconds for each width and tokenizer of the settings, and each arm's
    saving over its reported seeds' draws at every length, written into map.json's "wallclock"."""
    timed: dict[str, dict] = {}
    for block in settings.blocks:
        bs = block_settings(block, settings)
        corpus = ensure_corpus(bs.setup, out, bs.corpus)
        if block.home not in timed:
            sec = depth_seconds(bs.setup, corpus, reps)
            timed[block.home] = {"seconds": sec, "savings": {}, "machine": machine_name()}
        entry = timed[block.home]
        # MICRO: uniform's draws, one per micro-batch: no saving to show (`modeled` leaves it out)
        for arm, by_steps in modeled(bs, corpus).items():
            for steps in bs.lengths:
                entry["savings"][f"{paper.label(arm)} @ {steps}"] = {
                    "arm": arm,
                    "steps": steps,
                    "wall": wall_range(entry["seconds"], steps, range(4), arm),
                    "modeled": by_steps[str(steps)],
                }
    return timed
