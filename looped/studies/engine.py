"""The study engine: a study declares its grid, what it measures per run and which seeds choose
the LR; this module does the rest, the same way for every study.

    grid: {schedule: {LR: (lengths...)}} x seeds
      -> plan       one `Planned` run per (schedule, LR, seed, length), named by `name_of`;
                    a run branches off the longest of its family where they agree
      -> run        the missing trunk families on the pool (`studies.runner`); a results
                    file's scored rows (`Study.cached`) stand for runs whose config agrees
      -> choose_lr  on the LR seeds (never reported): the lowest mean validation NLL
      -> score      one row per reported run: what the study measures
      -> paired_gap each schedule against uniform's same seeds: per seed ours / uniform - 1,
                    its interval over log ratios (`studies.stats`), then `judge`

The text study's blocks (`studies.textstudy`, laid out by `studies.map`) and the demo's text
track (a block of one length) run through here; the bios grid (budgets of FLOPs, branching across
schedules within a seed) and the diagnosis (no branching) declare their runs and use the same
planner, names, LR choice and gap.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from looped import paper
from looped.config import TrainConfig
from looped.model import LoopedTransformer
from looped.runtime.checkpoint import list_checkpoints
from looped.runtime.metrics import read_metrics
from looped.studies import stats
from looped.studies.heldout import heldout_nll
from looped.studies.results import diverged, own_wall
from looped.studies.runner import Planned, execute
from looped.studies.stats import spread
from looped.studies.textsetup import run_config
from looped.training.lineage import branch_point
from looped.training.run import total_steps_for

MICRO = paper.UNIFORM_PER_MICRO  # uniform with a K per micro-batch (4 micro-batches)
# the per-micro-batch arm draws its partner's 32 sequences once, split into 4 micro-batches
MICRO_ARGS = paper.UNIFORM, ("depth_per_micro=true", "grad_accum=4", "split_step_batch=true")
SCHEDULES = (paper.UNIFORM, paper.RECIPES_1B[1], paper.RECIPE_200M, MICRO)  # the pool's order
# when the pool starts each schedule's seeds: the 200M recipe's after the first two's, MICRO last
LATER = {paper.UNIFORM: 0, paper.RECIPES_1B[1]: 0, paper.RECIPE_200M: 20, MICRO: 40}

Grid = dict[str, dict[float, tuple[int, ...]]]  # schedule -> LR -> the lengths trained at it
Value = Callable[[dict], float]  # what a gap compares of a row: its mean NLL, FLOPs, wall time


def name_of(schedule: str, lr: float, seed: int, steps: int = 0, budget: float = 0.0) -> str:
    """A run's directory name, the one every study uses: schedule, LR, seed, then its length in
    steps or (bios) its share of the full modeled-FLOP budget."""
    short = {MICRO: "micro", paper.UNIFORM: "uniform"}.get(schedule) or re.sub(r"\W", "", schedule)
    if schedule.startswith("fixed-first"):
        k, frac = paper.fixed_phase(schedule)
        short = f"ff{k}_{round(frac * 100)}"
    size = f"b{round(budget * 100):03d}" if budget else f"n{steps}"
    return f"{short}_lr{lr:g}_s{seed}_{size}"


_FINGERPRINTS: dict[str, str] = {}  # repr(config) -> fingerprint: OmegaConf is slow, and a
# study asks for each run's fingerprint many times (every row lookup of a plan)

# Fields added after results were first written, with their defaults: a config at the default
# fingerprints as it did before the field existed (`studies.engine.fingerprint`).
ADDED = {"optim.warmup_frac": 0.0, "model.init_loops": 1, "model.state_norm": False}


def fingerprint(cfg: TrainConfig) -> str:
    """A run's config in 16 hex digits, its corpus path left out: a cached row stands for a run
    only if they agree, so rows from another dtype, device or config version are retrained."""
    key = repr(cfg)  # every field, nested configs too: a config changed since is a new key
    if (known := _FINGERPRINTS.get(key)) is None:
        known = _FINGERPRINTS[key] = _fingerprint(cfg)
    return known


def _fingerprint(cfg: TrainConfig) -> str:
    blank = OmegaConf.structured(replace(cfg, data=replace(cfg.data, path="")))
    tree = OmegaConf.create(OmegaConf.to_container(blank))
    for key, default in ADDED.items():  # a field at the default it was added with: as before
        section, name = key.split(".")
        if tree[section][name] == default:
            del tree[section][name]
    return hashlib.sha256(OmegaConf.to_yaml(tree).encode()).hexdigest()[:16]


# -- the planner: runs that share a prefix train it once ---------------------------------------
def plan(
    wanted: Iterable[Planned],
    family: Callable[[Planned], Hashable] = lambda p: (p.schedule, p.lr, p.seed),
    enough: Callable[[int, int], bool] = lambda shared, steps: shared > 0,
    runs_dir: Path | None = None,
    into: dict[str, Planned] | None = None,
) -> dict[str, Planned]:
    """The one planner of every study. Each run, in the order given, branches off the root of
    its `family` planned before it (a text grid's: the longest run of its schedule, LR and seed)
    that it shares the most steps with, if `enough(shared, steps)`: two runs of the same seed,
    batch and LR agree exactly until their schedules or LRs part (a shorter run's decay, a
    fixed-first switch; `training.lineage.branch_point`). With `runs_dir`, a finished parent is
    not retrained: the branch starts at its latest checkpoint in time. A name planned before
    (in `into` too) stands: it takes the new run's group."""
    runs = {} if into is None else into
    for run in wanted:
        if (old := runs.get(run.name)) is not None:
            old.group += "" if run.group in old.group else "+" + run.group
            continue
        run.steps = run.steps or total_steps_for(run.cfg)  # the trainer's own derivation
        roots = [p for p in runs.values() if not p.parent and family(p) == family(run)]
        shared = [(_shared(run, p, runs_dir), -i, p) for i, p in enumerate(roots)]
        at, _, parent = max(shared, default=(0, 0, None), key=lambda t: t[:2])
        if parent is not None and enough(at, run.steps):
            run.parent, run.branch_step = parent.name, at
            if at not in parent.save_steps:
                parent.save_steps.append(at)
        runs[run.name] = run
    return runs


def _shared(run: Planned, parent: Planned, runs_dir: Path | None) -> int:
    """The step `run` can branch off `parent` at (0: none)."""
    at = branch_point(run.cfg, run.steps, parent.cfg, parent.steps)
    done = runs_dir is not None and (runs_dir / parent.name / "summary.json").is_file()
    held = [s for s, _ in list_checkpoints(runs_dir / parent.name)] if done else []
    if held and at not in held:
        at = max((s for s in held if s <= at), default=0)
    return at


def text_runs(settings: Any, corpus: dict, seeds: Iterable[int], grid: Grid) -> Iterator[Planned]:
    """A text grid's runs of (schedule, LR, seed), longest first (`settings`: a text study's,
    with its `setup` and `lr_seeds`); MICRO trains uniform in 4 micro-batches."""
    for schedule, by_lr in grid.items():
        spec_s, extra = MICRO_ARGS if schedule == MICRO else (schedule, ())
        for lr, lengths in by_lr.items():
            for seed in seeds:
                priority = 0 if seed in settings.lr_seeds else 1 + seed + LATER.get(schedule, 20)
                for steps in sorted(lengths, reverse=True):
                    kw = {"schedule": spec_s, "lr": lr, "seed": seed, "extra": extra}
                    cfg = run_config(settings.setup, corpus, steps=steps, **kw)
                    if schedule == MICRO:  # the same tokens per step, in 4 micro-batches,
                        cfg.batch_size //= 4  # and the same validation windows as the others
                        cfg.eval_batches *= 4
                    name = name_of(schedule, lr, seed, steps)
                    yield Planned(name, cfg, schedule, steps, may_diverge=True, priority=priority)


@dataclass
class Study:
    """A study's runs: trained into `runs_dir` (unless collecting), or an earlier results file's
    scored rows where name and config agree, so a study on a fresh machine trains only the rest."""

    settings: Any  # the study's declaration: setup, lr_seeds, workers (a `BlockSettings`)
    corpus: dict
    runs_dir: Path
    train: bool = True
    cached: dict[str, dict] = field(default_factory=dict)  # run name -> its scored row
    batches: list = field(default_factory=list)  # the test windows every run is scored on
    bigram: float = math.inf  # the bigram table's test NLL: a run's plateau ends below it
    fresh: bool = False  # retrain runs finished on disk
    quiet: bool = False  # no progress bars

    def plan(self, seeds: Iterable[int], grid: Grid) -> dict[str, Planned]:
        return plan(text_runs(self.settings, self.corpus, seeds, grid), runs_dir=self.runs_dir)

    def row(self, p: Planned) -> dict | None:
        r = self.cached.get(p.name)
        return r if r is not None and r.get("config_sha") == fingerprint(p.cfg) else None

    def finished(self, p: Planned) -> bool:
        return self.row(p) is not None or (self.runs_dir / p.name / "summary.json").is_file()

    def val_nll(self, p: Planned) -> float:
        """Mean validation NLL over serving depths 1..16 (final eval); infinite if it diverged."""
        if (r := self.row(p)) is not None:
            return r["val_nll"]
        if diverged(self.runs_dir / p.name):
            return math.inf
        evals = [m for m in read_metrics(self.runs_dir / p.name) if m["kind"] == "eval"]
        nll = evals[-1].get("token_nll", evals[-1].get("nll"))
        return float(np.mean(list(nll.values())))

    def run(self, runs: dict[str, Planned]) -> int:
        """Train every trunk family (a trunk and its branches) with an uncached run, whole: the
        branches need the trunk's checkpoints; the pool skips what is finished on disk. Returns
        how many runs it trained."""
        if not self.train:
            return 0
        family = {n: n for n in runs}
        for n, p in runs.items():
            while p.parent in runs:
                family[n], p = p.parent, runs[p.parent]
        missing = {family[n] for n, p in runs.items() if self.row(p) is None}
        todo = [p for n, p in runs.items() if family[n] in missing]
        return execute(todo, self.runs_dir, self.settings.workers, self.fresh, self.quiet)


# -- the LR: chosen on the LR seeds, never on a reported one ------------------------------------
def choose_lr(by_lr: dict[float, list[float]]) -> dict | None:
    """From each LR's validation NLLs (infinite: diverged): the LR of the lowest mean (ties: the
    smaller LR), every LR's mean, and whether the choice sits at an edge of the LRs tried ("low"
    or "high"; None inside). None when every LR diverged. The one LR choice of every study."""
    means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
    finite = {lr: m for lr, m in means.items() if math.isfinite(m)}
    if not finite:
        return None
    best = min(sorted(finite), key=lambda lr: finite[lr])
    edge = "low" if best == min(means) else "high" if best == max(means) else None
    return {"lr": best, "val": means, "edge": edge}


def choose_each(points: Iterable[tuple[Hashable, float, float]]) -> dict[Hashable, dict]:
    """`choose_lr` for each key of (key, LR, validation NLL) points: a key whose every LR
    diverged is left out."""
    table: dict[Hashable, dict[float, list[float]]] = {}
    for key, lr, nll in points:
        table.setdefault(key, {}).setdefault(lr, []).append(nll)
    return {k: c for k, by_lr in table.items() if (c := choose_lr(by_lr)) is not None}


def choose(runs: dict[str, Planned], study: Study) -> dict:
    """`choose_lr` per schedule and length, over the finished runs of `runs` (the LR seeds')."""
    done = [p for p in runs.values() if study.finished(p)]
    points = [((p.schedule, p.steps), p.lr, study.val_nll(p)) for p in done]
    out: dict[str, dict[int, dict]] = {}
    for (schedule, steps), chosen in choose_each(points).items():
        out.setdefault(schedule, {})[steps] = chosen
    return out


def sweep_rows(runs: dict[str, Planned], study: Study) -> list[dict]:
    """The LR seeds' runs as the results file keeps them (reusable with `resume_from`)."""
    return [
        {
            "run": n,
            "config_sha": fingerprint(p.cfg),
            "schedule": p.schedule,
            "lr": p.lr,
            "seed": p.seed,
            "steps": p.steps,
            "val_nll": study.val_nll(p),
            "escape_step": sweep_escape(p, study),
            "cpu_kernels": sweep_kernels(p, study),
        }
        for n, p in sorted(runs.items())
        if study.finished(p)
    ]


def sweep_kernels(p: Planned, study: Study) -> str | None:
    """The CPU kernels an LR seed's run took: from its summary on this disk, else from the
    earlier results file's row (None: a GPU run, or one recorded before the field was)."""
    summary = study.runs_dir / p.name / "summary.json"
    if summary.is_file():
        return json.loads(summary.read_text()).get("cpu_kernels")
    return (study.row(p) or {}).get("cpu_kernels")


def sweep_escape(p: Planned, study: Study) -> int | None:
    """An LR seed's run's plateau escape: from its train records on this disk, else from the
    earlier results file's row."""
    if (study.runs_dir / p.name / "metrics.jsonl").is_file():
        return escape_step(trunk_train(study.runs_dir / p.name), study.bigram)
    return (study.row(p) or {}).get("escape_step")


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


# -- what a text run measures ---------------------------------------------------------------------
def device_of(record: dict) -> str:
    """Where a row (or a run's summary.json) trained. Both were written before the device was
    recorded only by CPU studies, so a missing entry reads "cpu"."""
    return record.get("device", "cpu")


def score(runs: dict[str, Planned], study: Study) -> list[dict]:
    """One row per finished reported run, scored on the test windows once (cached in `study`)."""
    rows = []
    for p in runs.values():
        run_dir = study.runs_dir / p.name
        if (cached := study.row(p)) is not None:
            # rows written before `epochs` was recorded get it here; a run on this disk reads its
            # escape again (rows written before it followed a branch back to its trunk)
            mine = {"epochs": cached.get("epochs", epochs(cached, study.corpus))}
            mine["device"] = device_of(cached)
            if (run_dir / "metrics.jsonl").is_file():
                mine["escape_step"] = escape_step(trunk_train(run_dir), study.bigram)
            rows.append(cached | mine)
        elif study.finished(p) and not diverged(run_dir):
            study.cached[p.name] = row = measure(p, study)
            rows.append(row)
    order = {s: i for i, s in enumerate(SCHEDULES)}

    def key(r: dict) -> tuple:  # by length, then the pool's order of schedules, seed and LR
        return (r["steps"], order.get(r["schedule"], 9), r["schedule"], r["seed"], r["lr"])

    return sorted(rows, key=key)


def measure(p: Planned, study: Study) -> dict:
    """A finished text run's row: what it was, and its test NLL at every serving depth."""
    run_dir = study.runs_dir / p.name
    model = LoopedTransformer(p.cfg.model)
    train = [m for m in read_metrics(run_dir) if m["kind"] == "train"]
    tokens = p.steps * p.cfg.batch_size * p.cfg.grad_accum * p.cfg.seq_len
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "run": p.name,
        "config_sha": fingerprint(p.cfg),
        "schedule": p.schedule,
        "label": paper.label(p.schedule),
        "steps": p.steps,
        "seed": p.seed,
        "lr": p.lr,
        "tokens": tokens,
        "epochs": epochs({"tokens": tokens}, study.corpus),
        "d_model": p.cfg.model.d_model,
        "vocab_size": p.cfg.model.vocab_size,
        "params": model.num_params(),
        "params_non_embedding": model.num_params(non_embedding=True),
        "escape_step": escape_step(trunk_train(run_dir), study.bigram),
        "own_wall": own_wall(train),
        "device": device_of(summary),
        "cpu_kernels": summary.get("cpu_kernels"),  # None: a GPU run, or one written before
        "val_nll": study.val_nll(p),
        **heldout_nll(run_dir, p.cfg, study.batches),
    }


def trunk_train(run_dir: Path) -> list[dict]:
    """A run's train records from step 0: a branch logs only from its branch point, so the
    trunk's records up to it come first (followed back through every branch; a trunk that is
    not on this disk leaves the branch's own records)."""
    own = [m for m in read_metrics(run_dir) if m["kind"] == "train"]
    lineage = run_dir / "lineage.json"
    if not lineage.is_file():
        return own
    info = json.loads(lineage.read_text())
    # the parent is a checkpoint, RUNS/<parent>/checkpoints/step_N: its run by name, on this disk
    parent = run_dir.parent / Path(info["parent"]).parents[1].name
    if info.get("mode") != "branch" or not parent.is_dir():
        return own
    return [m for m in trunk_train(parent) if m["step"] <= info["parent_step"]] + own


def escape_step(train: list[dict], bigram: float) -> int | None:
    """The first logged step whose train loss is below the bigram table's NLL: where a run
    leaves its early plateau (None: it never does, or no bigram was given)."""
    return next((int(m["step"]) for m in train if m["loss"] < bigram), None)


def epochs(row: dict, corpus: dict) -> float:
    """A row's passes over the train split: past 1, a run has seen some tokens twice."""
    return row["tokens"] / corpus["splits"]["train"]["tokens"]


# -- the gap: each schedule against uniform's same seeds ----------------------------------------
def mean_nll(row: dict) -> float:
    return row["mean_nll"]


def paired_values(mine: list[dict], ref: list[dict], value: Value = mean_nll) -> list[float]:
    """The one definition of the gap, per seed: value(ours) / value(ref's same seed) - 1
    (positive: ours is higher, i.e. behind); seeds `ref` lacks are left out."""
    by_seed = {r["seed"]: r for r in ref}
    return [value(r) / value(by_seed[r["seed"]]) - 1 for r in mine if r["seed"] in by_seed]


def ratio_of_means(mine: list[dict], ref: list[dict], value: Value = mean_nll) -> float:
    """mean value(ours) / mean value(ref) over seeds, unpaired: compute and wall time (the same
    for every seed), and the gap where no seed pairs (value - 1)."""
    return float(np.mean([value(r) for r in mine]) / np.mean([value(r) for r in ref]))


def paired_gap(
    mine: list[dict], ref: list[dict], value: Value = mean_nll, looks: tuple[int, ...] = ()
) -> stats.Interval:
    """The paired gap and its 95% interval over log ratios: a t interval, or with `looks` the
    group-sequential one of a study whose seeds come in rounds."""
    values = paired_values(mine, ref, value)
    return stats.sequential_ratio(values, looks) if looks else stats.ratio_interval(values)


# -- table rows: each schedule's seeds against uniform's, at equal tokens or equal FLOPs ---------
def by_role(rows: list[dict], role: str, schedule: str) -> list[dict]:
    """The rows of one schedule that serve `role` ("tokens", "flops:SCHEDULE"), by seed."""
    mine = (r for r in rows if role in r["roles"] and r["schedule"] == schedule)
    return sorted(mine, key=lambda r: r["seed"])


def compare(rows: list[dict], role: str, schedules: tuple[str, ...] | list[str]) -> list[dict]:
    """One row per schedule, its seeds against uniform's at equal steps ("tokens") or at its
    modeled FLOPs ("flops": uniform cut to them)."""
    table = []
    for s in schedules:
        runs = by_role(rows, "tokens", s)
        if not runs or (role == "flops" and s == paper.UNIFORM):
            continue
        partner = by_role(rows, "tokens" if role == "tokens" else f"flops:{s}", paper.UNIFORM)
        if partner:
            table.append(compare_row(s, runs, partner))
    return table


def judge(values: list[float], schedule: str, informative: bool = True) -> dict:
    """The one place a table row's verdict is decided: the paired gap's 95% interval (None from
    one seed) and the verdict it gives at the schedule's tolerance (None for a schedule the
    paper states none for); the report only formats them."""
    gap = stats.ratio_interval(values) if len(values) > 1 else None
    try:
        tol = paper.tolerance(schedule)
    except KeyError:
        return {"gap": gap and gap.as_dict(), "verdict": None}
    one = stats.Interval(values[0], -math.inf, math.inf, 1, tuple(values)) if values else None
    found = stats.verdict(gap or one, tol, informative) if (gap or one) else None
    return {"gap": gap and gap.as_dict(), "verdict": found and found.value}


def compare_row(schedule: str, runs: list[dict], uni: list[dict]) -> dict:
    """One table row: `runs` (one per seed) against `uni`, uniform's runs, paired by seed."""
    nll, paired = spread([r["mean_nll"] for r in runs]), paired_values(runs, uni)
    first = runs[0]  # every seed's run has the same LR, steps, tokens and depths
    return {
        "schedule": schedule,
        "label": paper.label(schedule),
        "lr": first["lr"],
        "seeds": len(runs),
        "steps": first["steps"],
        "tokens": first["tokens"],
        "flops": float(np.mean([r["flops"] for r in runs])),
        "mean_nll": nll,
        "vs_uniform": paired_gap(runs, uni).mean if paired else ratio_of_means(runs, uni) - 1,
        "vs_uniform_by_seed": spread(paired) if paired else None,
        **judge(paired, schedule),
        "compute_saving": 1 - ratio_of_means(runs, uni, lambda r: r["flops"]),
        "depths": first["depths"],
        "token_nll": np.mean([r["token_nll"] for r in runs], axis=0).tolist(),
        "uniform_steps": uni[0]["steps"],
        "uniform_nll": spread([u["mean_nll"] for u in uni]),
    }
