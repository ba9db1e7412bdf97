"""The bios track: small looped models on synthetic biographies, a grid of schedules and budgets.

Per seed: fixed K=4, fixed-first and uniform 1..16 at 15%, 45% and 100% of the full modeled-FLOP
budget (equal FLOPs), fixed K=4 and fixed-first at uniform's full-budget steps (equal tokens);
optionally fixed K=1, 2, 8 (Fig. 5) and uniform beyond the budget (catch-up). A run that shares a
prefix with a longer one branches off its checkpoint (`experiments.plan`), exactly.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped import paper
from looped.config import TrainConfig, load_config
from looped.data.batching import build_source
from looped.eval.evaluate import token_nll_of
from looped.eval.stats import spread
from looped.experiments.engine import choose_lr, paired_values
from looped.experiments.plan import Planner
from looped.experiments.probes import update_benefit
from looped.experiments.results import before_branch, branched_wall, diverged
from looped.experiments.runner import RunSpec, execute
from looped.flops import flops_per_token, schedule_flops, tokens_per_step
from looped.model import fit_vocab
from looped.paper import FIXED, FIXED_FIRST, MAIN_SCHEDULES, UNIFORM, label
from looped.runtime.checkpoint import checkpoint_dir
from looped.runtime.device import pick_device, resolve_dtype
from looped.runtime.metrics import read_metrics
from looped.schedule_spec import parse_schedule


@dataclass
class BiosRun(RunSpec):
    """A run of the bios grid: its budget and the groups it serves."""

    budget: float = 0.0  # fraction of the full budget (0 for a run of given steps)
    # "main", "tokens" (equal tokens), "depth" (Fig. 5), "catchup" or "sweep", "+"-joined
    group: str = "main"


# Each main schedule's peak LR on the bios track, as the reference's LR sweep chose it
# (`looped demo --reference`; tests/test_demo.py checks these against results/demo.json).
BIOS_LR = {FIXED: 1e-2, FIXED_FIRST: 1e-2, UNIFORM: 1e-2}


@dataclass
class DemoSettings:
    preset: str = "demo"  # base training preset (looped/configs/demo.yaml)
    seeds: int = 3  # seeds for the main comparison (bands are min-max across them)
    budgets: tuple[float, ...] = (0.15, 0.45, 1.0)  # fractions of the full modeled-FLOP budget
    depth_ks: tuple[int, ...] = ()  # fixed depths of Fig. 5 (seed 0); `--full`: FULL_DEPTH_KS
    depth_budget: float = 0.45  # budget of those runs (matched compute)
    catch_up: tuple[float, ...] = ()  # extra uniform budgets (seed 0): when uniform catches up
    # each main schedule's peak LR (the depth runs use fixed K=4's)
    lr: dict[str, float] = field(default_factory=lambda: dict(BIOS_LR))
    sweep: bool = False  # LR sweep first (both tracks, seed 0), then each one's best LR
    sweep_lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2)  # the sweep's LRs (about 3x apart)
    text: bool = True  # the text track (held-out text NLL, the paper's metric) after the grid
    # its seeds: at demo size its models lose to a bigram table, so it shows the metric, not a
    # verdict, and more seeds buy time, not evidence (`looped length` is the text study)
    text_seeds: int = 1
    probe: bool = True  # the paper's Fig. 4 at fixed K=4's checkpoints (seed 0)
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


FULL_DEPTH_KS = (1, 2, 4, 8)  # `looped demo --full`: the depth-specialisation runs (Fig. 5)


# the bios model at toy size (what every --quick bios study trains): seconds per run
TOY = ["model.d_model=32", "model.n_head=2", "model.seq_len=64", "seq_len=64", "batch_size=8",
       "data.persons=16", "eval_batches=1", "dtype=fp32"]  # fmt: skip

QUICK = DemoSettings(  # the full grid at toy size: every code path in well under a minute
    seeds=2,
    text_seeds=2,
    depth_ks=FULL_DEPTH_KS,
    overrides=[*TOY, "max_steps=60", "optim.warmup_steps=10"],
)


def base_config(
    settings: DemoSettings, seed: int, schedule: str, budget: float, lr: float | None = None
) -> TrainConfig:
    overrides = [*settings.overrides, f"seed={seed}", f"schedule={schedule}"]
    overrides += [f"budget_frac={budget}"] + ([f"optim.lr={lr}"] if lr is not None else [])
    cfg = load_config(settings.preset, overrides)
    cfg.dtype = resolve_dtype(cfg.dtype, pick_device(cfg.device))  # as the trainer will
    return cfg


def resolve_budget(settings: DemoSettings) -> tuple[float, int]:
    """(full budget in modeled FLOPs, vocabulary size): `max_steps` steps of fixed K=4."""
    cfg = load_config(settings.preset, settings.overrides)
    vocab = build_source(cfg.data).vocab_size
    cfg.model.vocab_size = fit_vocab(cfg.model.vocab_size, vocab)
    if cfg.full_budget_flops > 0:
        return cfg.full_budget_flops, cfg.model.vocab_size
    steps = cfg.max_steps or 60
    full = steps * tokens_per_step(cfg) * flops_per_token(cfg.model, 4, cfg.seq_len)
    return full, cfg.model.vocab_size


def lr_of(settings: DemoSettings, schedule: str) -> float:
    """A schedule's peak LR: its own for the main schedules, fixed K=4's for other fixed K."""
    return settings.lr.get(schedule, settings.lr[FIXED])


def worth_branching(shared: int, steps: int) -> bool:
    """A few shared steps are not worth waiting for a parent: at least 2, and a tenth of the run."""
    return shared >= max(2, steps // 10)


class _Grid:
    """The grid as it is planned: each run's config and the root run of its seed it branches off."""

    def __init__(self, settings: DemoSettings) -> None:
        self.settings = settings
        self.full, self.vocab = resolve_budget(settings)
        self.planner = Planner()

    def name(self, schedule: str, budget: float | str, seed: int) -> str:
        short = {FIXED_FIRST: "fixed_first", UNIFORM: "uniform"}.get(
            schedule, schedule.replace(":", "").replace("fixed", "fixed_k")
        )
        size = budget if isinstance(budget, str) else f"b{round(budget * 100):03d}"
        return f"{short}_{size}_lr{lr_of(self.settings, schedule):g}_s{seed}"

    def __getitem__(self, name: str) -> BiosRun:
        return self.planner.runs[name]  # type: ignore[return-value]

    def add(
        self, schedule: str, budget: float | str, seed: int, group: str, steps: int = 0
    ) -> BiosRun:
        """The run of `schedule` at `budget` (or of `steps` steps: "tok"), planned once."""
        name, size = self.name(schedule, budget, seed), 0.0 if steps else float(budget)
        spec = BiosRun(name, schedule, seed, group=group, budget=size)
        if spec.name in self.planner:
            old = self[spec.name]
            if group not in old.group:
                old.group += "+" + group
            return old
        cfg = base_config(self.settings, seed, schedule, size, lr_of(self.settings, schedule))
        cfg.full_budget_flops, cfg.model.vocab_size, cfg.max_steps = self.full, self.vocab, 0
        if steps:  # a run of given steps (equal tokens), not of a budget
            cfg.budget_frac, cfg.max_steps = 0.0, steps
        roots = [r.name for r in self.planner.runs.values() if r.seed == seed and not r.parent]
        return self.planner.add(spec, cfg, roots, enough=worth_branching)


def plan(settings: DemoSettings) -> tuple[list[BiosRun], dict[str, TrainConfig]]:
    """Every run of the grid with its steps, parent and branch step (off the root run of its seed
    with which it shares the longest prefix: same LR, depths and batches)."""
    grid = _Grid(settings)
    for seed in range(settings.seeds):
        _plan_seed(grid, seed)
    specs: list[BiosRun] = list(grid.planner.runs.values())  # type: ignore[arg-type]
    if settings.probe:  # Fig. 4's checkpoints: where each fixed-first run switches
        grid[grid.name(FIXED, max(settings.budgets), 0)].save_steps += _probe_steps(specs)
    for spec in specs:
        spec.eval_steps = sorted(set(spec.eval_steps))
        spec.save_steps = sorted(set(spec.save_steps))
    return grid.planner.specs()  # type: ignore[return-value]


def _plan_seed(grid: _Grid, seed: int) -> None:
    """One seed's runs: roots first (the others branch off them), then the grid in order."""
    settings, top = grid.settings, max(grid.settings.budgets)
    for s in (FIXED, UNIFORM, FIXED_FIRST):
        grid.add(s, top, seed, "main")
    for schedule in MAIN_SCHEDULES:
        for budget in settings.budgets:
            spec = grid.add(schedule, budget, seed, "main")
            if schedule == FIXED_FIRST:  # an evaluation just before the switch
                switch = parse_schedule(schedule, seed).switch_step(spec.steps)
                at_switch = spec.parent and spec.branch_step == switch
                (grid[spec.parent] if at_switch else spec).eval_steps.append(switch)
    uniform_steps = grid[grid.name(UNIFORM, top, seed)].steps
    for schedule in (FIXED_FIRST, FIXED):  # equal tokens: uniform's full-budget steps
        grid.add(schedule, "tok", seed, "tokens", steps=uniform_steps)
    if seed == 0:
        for k in settings.depth_ks:
            grid.add(f"fixed:{k}", settings.depth_budget, seed, "depth")
        for budget in sorted(b for b in settings.catch_up if b > top):  # after the grid
            grid.add(UNIFORM, budget, seed, "catchup")


def collect(specs: list[BiosRun], runs_dir: Path, configs: dict[str, TrainConfig]) -> list[dict]:
    """Per run: its spec, modeled FLOPs (`flops`: the expectation budgets match; `flops_sampled`:
    the depths drawn), wall seconds (the parent's up to the branch too), numbers per depth."""
    rows = []
    for spec in specs:
        if diverged(runs_dir / spec.name):  # a sweep run whose LR was too high: no numbers
            continue
        cfg = configs[spec.name]
        metrics = read_metrics(runs_dir / spec.name)
        summary = json.loads((runs_dir / spec.name / "summary.json").read_text())
        train = [m for m in metrics if m["kind"] == "train"]
        evals = [m for m in metrics if m["kind"] == "eval"]
        parent = before_branch(runs_dir, spec.parent, spec.branch_step)  # none for a root
        ptrain = [m for m in parent if m["kind"] == "train"]
        evals = [m for m in parent if m["kind"] == "eval" and m["step"] == spec.branch_step] + evals
        switch = summary.get("switch_step")
        pre = [m for m in evals if switch and m["step"] == switch]
        rows.append(
            _run_row(spec, cfg, summary, branched_wall(train, ptrain, spec.branch_step))
            | {
                "parent": spec.parent,
                "branch_step": spec.branch_step or None,
                **eval_row(evals[-1]),
                "pre_switch": eval_row(pre[0]) if pre else None,
                "curve": [[m["step"], m["loss"], m["depth"]] for m in ptrain + train],
            }
        )
    return rows


def _run_row(spec: BiosRun, cfg: TrainConfig, summary: dict, wall: float) -> dict:
    schedule = parse_schedule(spec.schedule, spec.seed)
    flops = schedule_flops(cfg.model, schedule, spec.steps, tokens_per_step(cfg), cfg.seq_len)
    row = {"name": spec.name, "schedule": spec.schedule, "label": paper.label(spec.schedule)}
    row |= {k: getattr(spec, k) for k in ("budget", "seed", "group", "steps")}
    row |= {"lr": cfg.optim.lr, "switch_step": summary.get("switch_step"), "wall": wall}
    return row | {"flops_sampled": summary["flops"], "flops": flops}


def eval_row(record: dict) -> dict:
    """Per-depth numbers of one evaluation record. `fact_nll` (bios: nats per attribute value in
    a held-out template) tracks knowledge; `token_nll` is dominated by unseen template words."""
    token_nll = token_nll_of(record)
    depths = sorted(int(k) for k in token_nll)
    row: dict[str, Any] = {"depths": depths}
    tokens = [token_nll[str(k)] for k in depths]
    if not (recall := record.get("recall")):
        return row | {"token_nll": tokens}
    at = [recall[str(k)] for k in depths]

    def per_attribute(key: str) -> list[float]:  # mean over the six attributes, per depth
        return [float(np.mean([a[key] for a in r["attributes"].values()])) for r in at]

    row |= {"fact_nll": per_attribute("nll"), "token_nll": tokens}
    row["bits"] = [r["bits_per_person"] for r in at]
    row |= {"full_bits": at[0].get("full_bits_per_person"), "exact": per_attribute("acc")}
    if all(two_hop := [r.get("two_hop") for r in at]):
        row["two_hop_acc"] = [t["acc"] for t in two_hop]
        row["two_hop_nll"] = [t["nll"] for t in two_hop]
    row["attributes"] = {str(k): r.get("attributes") for k, r in zip(depths, at)}
    return row


def sweep_plan(settings: DemoSettings) -> tuple[list[BiosRun], dict[str, TrainConfig]]:
    """The LR sweep's runs: seed 0's grid at each LR of `sweep_lrs`; at the LR a schedule then
    uses, they are the grid's seed-0 runs, so none is trained twice."""
    specs: list[BiosRun] = []
    configs: dict[str, TrainConfig] = {}
    for lr in settings.sweep_lrs:
        lrs = dict.fromkeys(MAIN_SCHEDULES, lr)
        s, c = plan(replace(settings, seeds=1, lr=lrs, depth_ks=(), catch_up=()))
        specs += [x for x in s if x.name not in configs]
        configs.update(c)
    for spec in specs:
        spec.may_diverge = True
    return specs, configs


def merge_sweep(specs: list[BiosRun], sweep: list[BiosRun]) -> list[BiosRun]:
    """The grid with its seed-0 runs replaced by the sweep's runs of the same name (trained, maybe
    off another parent than the grid would pick), and the checkpoints grid runs branch off."""
    swept = {s.name: s for s in sweep}
    merged = [swept.get(s.name, s) for s in specs]
    for old, new in zip(specs, merged, strict=True):
        if old is not new:
            new.group = old.group
            new.eval_steps = sorted(set(new.eval_steps) | set(old.eval_steps))
    by = {s.name: s for s in merged}
    for s in list(merged):  # a swept parent outside the grid (another LR) comes along
        while s.parent and s.parent not in by:
            parent = swept[s.parent]
            parent.group, by[parent.name] = "sweep", parent
            merged.append(parent)
            s = parent
    for s in merged:
        if s.parent and s.branch_step not in by[s.parent].save_steps:
            by[s.parent].save_steps = sorted({*by[s.parent].save_steps, s.branch_step})
    return merged


def sweep_bios(
    settings: DemoSettings, runs_dir: Path, fresh: bool, quiet: bool
) -> tuple[list[BiosRun], dict[str, TrainConfig], list[dict], dict[str, float], int]:
    """Train the sweep; each main schedule's best LR by mean fact NLL over K=1..16 at the full
    budget (ties: the smaller LR); the last item is how many runs it trained."""
    specs, configs = sweep_plan(settings)
    if not quiet:
        print(f"looped demo: bios LR sweep: {len(specs)} runs, LRs {settings.sweep_lrs}")
    trained = execute(specs, configs, runs_dir, settings.workers, fresh, quiet)
    rows = collect(specs, runs_dir, configs)
    top = max(settings.budgets)
    sweep = [
        {"schedule": r["schedule"], "label": r["label"], "lr": r["lr"]}
        | {"mean_nll": float(np.mean(r["fact_nll"])), "fact_nll": r["fact_nll"]}
        for r in rows
        if r["budget"] == top and "main" in r["group"]
    ]
    for s in specs:  # an LR at which the full-budget run diverged: a result, never the best
        if s.budget == top and "main" in s.group and diverged(runs_dir / s.name):
            lr = configs[s.name].optim.lr
            sweep.append({"schedule": s.schedule, "label": label(s.schedule), "lr": lr})
            sweep[-1] |= {"mean_nll": None, "diverged": True}
    return specs, configs, sweep, best_lrs(sweep), trained


def best_lrs(sweep: list[dict]) -> dict[str, float]:
    """Each schedule's LR by `engine.choose_lr` over its sweep rows (a diverged one never wins)."""
    by: dict[str, dict[float, list[float]]] = {}
    for r in sweep:
        nll = math.inf if r["mean_nll"] is None else r["mean_nll"]
        by.setdefault(r["schedule"], {}).setdefault(r["lr"], []).append(nll)
    return {s: c["lr"] for s, v in by.items() if (c := choose_lr(v)) is not None}


def probe_benefit(specs: list[BiosRun], runs_dir: Path) -> list[dict]:
    """The paper's Fig. 4 at seed 0's full-budget fixed K=4 run, where fixed-first switches."""
    main = [s for s in specs if "main" in s.group]
    top = max(s.budget for s in main)
    fixed = next(s for s in main if (s.seed, s.schedule, s.budget) == (0, FIXED, top))
    keys = ("step", "shallow", "deep", "depths", "benefit", "mean_benefit")
    benefit = [
        update_benefit(checkpoint_dir(runs_dir / fixed.name, s), list(range(1, 17)), n_batches=2)
        for s in _probe_steps(specs)
    ]
    return [{k: r[k] for k in keys} for r in benefit]


def _probe_steps(specs: list[BiosRun]) -> list[int]:
    """Where each of seed 0's main fixed-first runs switches: Fig. 4's checkpoints."""
    main = [s for s in specs if s.schedule == FIXED_FIRST and s.seed == 0 and "main" in s.group]
    return sorted({parse_schedule(s.schedule, 0).switch_step(s.steps) for s in main})


@dataclass
class BiosTrack:
    """What the bios phases leave for the rest of the demo."""

    settings: DemoSettings  # with each schedule's LR (the sweep's choice, with --sweep)
    specs: list[BiosRun]  # the grid (with the sweep's runs it reuses)
    configs: dict[str, TrainConfig]
    sweep_specs: list[BiosRun]  # every run of the sweep
    sweep: list[dict]  # the sweep's full-budget results, per schedule and LR
    trained: int  # runs trained (reused ones not counted)


def train_bios(
    settings: DemoSettings, runs_dir: Path, fresh: bool, quiet: bool, phases: dict[str, float]
) -> BiosTrack:
    """[The LR sweep, then] the grid at each schedule's LR, catch-up runs left for later."""
    started = time.time()
    sweep_specs, sweep_configs, sweep, trained = [], {}, [], 0
    if settings.sweep:
        sweep_specs, sweep_configs, sweep, best, trained = sweep_bios(
            settings, runs_dir, fresh, quiet
        )
        settings = replace(settings, lr={**settings.lr, **best})
        phases["bios LR sweep"] = time.time() - started
        started = time.time()
    specs, configs = plan(settings)
    specs, configs = merge_sweep(specs, sweep_specs), {**sweep_configs, **configs}
    if not quiet:
        n_main = sum("main" in s.group for s in specs)
        print(
            f"looped demo: bios: {len(specs)} runs ({n_main} in the main grid, {settings.seeds} "
            f"seeds, LRs {settings.lr}), {settings.workers} workers -> {runs_dir.parent}"
        )
    grid = [s for s in specs if s.group != "catchup"]
    trained += execute(grid, configs, runs_dir, settings.workers, fresh, quiet)
    phases["bios"] = time.time() - started
    return BiosTrack(settings, specs, configs, sweep_specs, sweep, trained)


def runs_of(rows: list[dict], schedule: str, group: str, budget: float | None = None) -> list[dict]:
    """One schedule's runs of one group (at one budget), in seed order."""
    own = (r for r in rows if r["schedule"] == schedule and group in r["group"])
    return sorted((r for r in own if budget in (None, r["budget"])), key=lambda r: r["seed"])


def bios_summary(rows: list[dict], budget: float, tokens: bool = False) -> list[dict]:
    """Seed means against uniform's runs at `budget`: every main schedule at `budget` (equal
    FLOPs), or with `tokens` fixed K=4 and fixed-first at uniform's steps (equal tokens)."""
    uni, table = runs_of(rows, UNIFORM, "main", budget), []
    for schedule in MAIN_SCHEDULES if uni else ():
        group, at = ("tokens", None) if tokens and schedule != UNIFORM else ("main", budget)
        if runs := runs_of(rows, schedule, group, at):
            table.append(_summary_row(schedule, runs, uni))
    return table


def _summary_row(schedule: str, runs: list[dict], uni: list[dict]) -> dict:
    """One schedule's row: seed means, the seed spread of its mean fact NLL and of its paired gap."""
    depths = runs[0]["depths"]
    shown = [k for k in (1, 4, 8, 16) if k in depths]
    bits = np.mean([r["bits"] for r in runs], axis=0) if "bits" in runs[0] else None
    nll = spread([float(np.mean(r["fact_nll"])) for r in runs])
    u_nll = float(np.mean([np.mean(r["fact_nll"]) for r in uni]))
    paired = paired_values(runs, uni, lambda r: np.mean(r["fact_nll"]))
    return {
        "schedule": schedule,
        "label": label(schedule),
        "seeds": len(runs),
        "steps": runs[0]["steps"],
        "lr": runs[0].get("lr"),
        "compute_vs_uniform": _ratio(runs, uni, "flops"),
        "wall_vs_uniform": _ratio(runs, uni, "wall"),
        "mean_fact_nll": nll["mean"],
        "fact_nll_vs_uniform": nll["mean"] / u_nll - 1,
        "fact_nll": nll,
        "vs_uniform_by_seed": spread(paired),
        "bits": {str(k): float(bits[depths.index(k)]) for k in shown if bits is not None},
    }


def _ratio(runs: list[dict], uni: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in runs]) / np.mean([r[key] for r in uni]))
