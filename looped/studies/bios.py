"""The bios track: small looped models on synthetic biographies, a grid of schedules and budgets.

Per seed: fixed K=4, fixed-first and uniform 1..16 at 15%, 45% and 100% of the full modeled-FLOP
budget (equal FLOPs), fixed K=4 and fixed-first at uniform's full-budget steps (equal tokens);
optionally fixed K=1, 2, 8 (Fig. 5) and uniform beyond the budget (catch-up). A configuration
of the study engine: its planner (a run branches off the root run of its seed it shares the
longest prefix with, exactly), names, LR choice and gap.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped import paper
from looped.config import TrainConfig, load_config, warmup_of
from looped.data.batching import build_source
from looped.eval.evaluate import token_nll_of
from looped.flops import flops_per_token, tokens_per_step
from looped.model import fit_vocab
from looped.paper import FIXED, FIXED_FIRST, MAIN_SCHEDULES, UNIFORM, label
from looped.runtime.checkpoint import checkpoint_dir
from looped.runtime.device import pick_device, resolve_dtype
from looped.schedule_spec import parse_schedule
from looped.studies import engine
from looped.studies.engine import judge, name_of, paired_values, ratio_of_means
from looped.studies.probes import update_benefit
from looped.studies.recipe import recipe_overrides
from looped.studies.results import diverged, from_scratch
from looped.studies.runner import Planned, execute
from looped.studies.stats import spread
from looped.studies.textsetup import DEMO_RECIPE
from looped.training.run import total_steps_for

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
    # verdict, and more seeds buy time, not evidence (`looped map` is the text study)
    text_seeds: int = 1
    probe: bool = True  # the paper's Fig. 4 at fixed K=4's checkpoints (seed 0)
    workers: int = 2  # worker processes (each single-threaded)
    # config overrides for every run; by default the demo's recipe (`textsetup.DEMO_RECIPE`:
    # the probe's choice for uniform), which every schedule shares
    overrides: list[str] = field(default_factory=lambda: recipe_overrides(DEMO_RECIPE))


FULL_DEPTH_KS = (1, 2, 4, 8)  # `looped demo --full`: the depth-specialisation runs (Fig. 5)


# the bios model at toy size (what every --quick bios study trains): seconds per run
TOY = [
    "model.d_model=32",
    "model.n_head=2",
    "model.seq_len=64",
    "seq_len=64",
    "batch_size=8",
    "data.persons=16",
    "eval_batches=1",
    "dtype=fp32",
]

QUICK = DemoSettings(  # the full grid at toy size: every code path in well under a minute
    seeds=2,
    text_seeds=2,
    depth_ks=FULL_DEPTH_KS,
    overrides=[*TOY, "max_steps=60", *recipe_overrides(DEMO_RECIPE)],
)


def base_config(
    settings: DemoSettings, seed: int, schedule: str, budget: float, lr: float | None = None
) -> TrainConfig:
    """A grid run's config. A warmup given as a share is a share of the full budget's steps
    (`max_steps` of fixed K=4): the same steps in every run of the grid, so that each run still
    branches off its seed's roots exactly (fixed-first off fixed K=4, a budget off a longer one)."""
    overrides = [*settings.overrides, f"seed={seed}", f"schedule={schedule}"]
    overrides += [f"budget_frac={budget}"] + ([f"optim.lr={lr}"] if lr is not None else [])
    cfg = load_config(settings.preset, overrides)
    cfg.dtype = resolve_dtype(cfg.dtype, pick_device(cfg.device))  # as the trainer will
    if cfg.optim.warmup_frac > 0:  # a share of the full budget (the grid's run), in steps
        cfg.optim.warmup_steps = warmup_of(cfg.optim, cfg.max_steps or 60)
        cfg.optim.warmup_frac = 0.0
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


def _run(
    settings: DemoSettings,
    full: tuple,
    budget: float,
    seed: int,
    schedule: str,
    group: str,
    steps: int = 0,
) -> Planned:
    """The run of `schedule` at `budget` of `full` (the full budget in modeled FLOPs, and the
    vocabulary: `resolve_budget`), or of `steps` steps."""
    full_flops, vocab = full
    lr = settings.lr.get(schedule, settings.lr[FIXED])  # fixed K=1, 2, 8: fixed K=4's
    budget = 0.0 if steps else float(budget)
    cfg = base_config(settings, seed, schedule, budget, lr)
    cfg.full_budget_flops, cfg.model.vocab_size, cfg.max_steps = full_flops, vocab, 0
    if steps:  # a run of given steps (equal tokens), not of a budget
        cfg.budget_frac, cfg.max_steps = 0.0, steps
    name = name_of(schedule, lr, seed, steps, budget)
    return Planned(name, cfg, schedule, steps, budget=budget, group=group)


def _seed_runs(grid: DemoSettings, full: tuple, seed: int) -> list[Planned]:
    """One seed's runs: roots first (the others branch off them), then the grid in order."""
    top = max(grid.budgets)
    runs = [_run(grid, full, top, seed, s, "main") for s in (FIXED, UNIFORM, FIXED_FIRST)]
    runs += [_run(grid, full, b, seed, s, "main") for s in MAIN_SCHEDULES for b in grid.budgets]
    steps = total_steps_for(runs[1].cfg)  # equal tokens: uniform's full-budget steps
    runs += [_run(grid, full, 0, seed, s, "tokens", steps) for s in (FIXED_FIRST, FIXED)]
    if seed == 0:
        runs += [
            _run(grid, full, grid.depth_budget, 0, f"fixed:{k}", "depth") for k in grid.depth_ks
        ]
        after = sorted(b for b in grid.catch_up if b > top)  # when uniform catches up
        runs += [_run(grid, full, b, 0, UNIFORM, "catchup") for b in after]
    return runs


def _plan_into(runs: dict[str, Planned], settings: DemoSettings, seeds: range) -> set[str]:
    """Plan the grid's runs at `seeds` into `runs` (a name there stands for the grid's run of
    that name) with an evaluation just before each fixed-first switch and Fig. 4's checkpoints;
    returns the names the grid asked for."""
    full = resolve_budget(settings)
    wanted = [r for seed in seeds for r in _seed_runs(settings, full, seed)]
    # a few shared steps are not worth waiting for a parent: at least 2, and a tenth of the run
    engine.plan(wanted, lambda p: p.seed, lambda at, steps: at >= max(2, steps // 10), into=runs)
    asked = {r.name for r in wanted}
    for p in [runs[n] for n in asked]:
        if p.schedule == FIXED_FIRST and "main" in p.group:  # evaluated just before the switch
            switch = parse_schedule(p.schedule, p.seed).switch_step(p.steps)
            at_switch = p.parent and p.branch_step == switch
            (runs[p.parent] if at_switch else p).eval_steps.append(switch)
    if settings.probe and 0 in seeds:  # Fig. 4's checkpoints: where fixed-first switches
        fixed = name_of(FIXED, settings.lr[FIXED], 0, budget=max(settings.budgets))
        runs[fixed].save_steps += _probe_steps([runs[n] for n in asked])
    for p in runs.values():
        p.eval_steps, p.save_steps = sorted(set(p.eval_steps)), sorted(set(p.save_steps))
    return asked


def plan(settings: DemoSettings, swept: dict[str, Planned] | None = None) -> dict[str, Planned]:
    """Every run of the grid with its steps, parent and branch step. A run the LR sweep trained
    (`swept`) is the grid's run of its name; the sweep's other runs come along, group "sweep"."""
    runs = dict(swept or {})
    asked = _plan_into(runs, settings, range(settings.seeds))
    for p in runs.values():
        if p.name not in asked:
            p.group = "sweep"
    return runs


def collect(specs: Iterable[Planned], runs_dir: Path) -> list[dict]:
    """Per run: its spec, modeled FLOPs (`flops`: the expectation budgets match; `flops_sampled`:
    the depths drawn), wall seconds (the parent's up to the branch too), numbers per depth."""
    rows = []
    for spec in specs:
        if diverged(runs_dir / spec.name):  # a sweep run whose LR was too high: no numbers
            continue
        records, evals, wall = from_scratch(runs_dir, spec.name, spec.parent, spec.branch_step)
        summary = json.loads((runs_dir / spec.name / "summary.json").read_text())
        switch = summary.get("switch_step")
        pre = [m for m in evals if switch and m["step"] == switch]
        row = {"name": spec.name, "schedule": spec.schedule, "label": paper.label(spec.schedule)}
        row |= {k: getattr(spec, k) for k in ("budget", "seed", "group", "steps", "lr")}
        row |= {
            "switch_step": switch,
            "wall": wall,
            "flops_sampled": summary["flops"],
            "flops": spec.flops(),
            "parent": spec.parent,
            "branch_step": spec.branch_step or None,
        }
        row |= eval_row(evals[-1]) | {"pre_switch": eval_row(pre[0]) if pre else None}
        rows.append(row | {"curve": [[m["step"], m["loss"], m["depth"]] for m in records]})
    return rows


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

    row |= {
        "fact_nll": per_attribute("nll"),
        "token_nll": tokens,
    }
    row["bits"] = [r["bits_per_person"] for r in at]
    row |= {
        "full_bits": at[0].get("full_bits_per_person"),
        "exact": per_attribute("acc"),
    }
    if all(two_hop := [r.get("two_hop") for r in at]):
        row["two_hop_acc"] = [t["acc"] for t in two_hop]
        row["two_hop_nll"] = [t["nll"] for t in two_hop]
    row["attributes"] = {str(k): r.get("attributes") for k, r in zip(depths, at)}
    return row


def sweep_plan(settings: DemoSettings) -> dict[str, Planned]:
    """The LR sweep's runs: seed 0's grid at each LR of `sweep_lrs`; at the LR a schedule then
    uses, they are the grid's seed-0 runs (`plan(settings, swept)`), so none is trained twice."""
    runs: dict[str, Planned] = {}
    for lr in settings.sweep_lrs:
        at = replace(settings, lr=dict.fromkeys(MAIN_SCHEDULES, lr), depth_ks=(), catch_up=())
        _plan_into(runs, at, range(1))
    for p in runs.values():
        p.may_diverge = True
    return runs


def sweep_bios(
    settings: DemoSettings, runs_dir: Path, fresh: bool, quiet: bool
) -> tuple[dict[str, Planned], list[dict], dict[str, float], int]:
    """Train the sweep; each main schedule's best LR by mean fact NLL over K=1..16 at the full
    budget (`engine.choose_lr`; a diverged run never wins); the last item is how many runs it
    trained."""
    runs = sweep_plan(settings)
    if not quiet:
        print(f"looped demo: bios LR sweep: {len(runs)} runs, LRs {settings.sweep_lrs}")
    trained = execute(list(runs.values()), runs_dir, settings.workers, fresh, quiet)
    top = [s for s in runs.values() if s.budget == max(settings.budgets) and "main" in s.group]
    rows = {r["name"]: r for r in collect(top, runs_dir)}  # a diverged run has none
    sweep = []
    for s in top:  # an LR at which the full-budget run diverged: a result, never the best
        sweep.append({"schedule": s.schedule, "label": label(s.schedule), "lr": s.lr})
        if (r := rows.get(s.name)) is None:
            sweep[-1] |= {
                "mean_nll": None,
                "diverged": True,
            }
        else:
            sweep[-1] |= {
                "mean_nll": float(np.mean(r["fact_nll"])),
                "fact_nll": r["fact_nll"],
            }
    points = [
        (r["schedule"], r["lr"], math.inf if "diverged" in r else r["mean_nll"]) for r in sweep
    ]
    best = {s: c["lr"] for s, c in engine.choose_each(points).items()}
    return runs, sweep, best, trained


def probe_benefit(specs: Iterable[Planned], runs_dir: Path) -> list[dict]:
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


def _probe_steps(specs: Iterable[Planned]) -> list[int]:
    """Where each of seed 0's main fixed-first runs switches: Fig. 4's checkpoints."""
    main = [s for s in specs if s.schedule == FIXED_FIRST and s.seed == 0 and "main" in s.group]
    return sorted({parse_schedule(s.schedule, 0).switch_step(s.steps) for s in main})


@dataclass
class BiosTrack:
    """What the bios phases leave for the rest of the demo."""

    settings: DemoSettings  # with each schedule's LR (the sweep's choice, with --sweep)
    runs: dict[str, Planned]  # the grid, and the sweep's other runs (group "sweep")
    sweep: list[dict]  # the sweep's full-budget results, per schedule and LR
    trained: int  # runs trained (reused ones not counted)


def train_bios(
    settings: DemoSettings, runs_dir: Path, fresh: bool, quiet: bool, phases: dict[str, float]
) -> BiosTrack:
    """[The LR sweep, then] the grid at each schedule's LR, catch-up runs left for later."""
    started = time.time()
    swept, sweep, trained = {}, [], 0
    if settings.sweep:
        swept, sweep, best, trained = sweep_bios(settings, runs_dir, fresh, quiet)
        settings = replace(settings, lr={**settings.lr, **best})
        phases["bios LR sweep"] = time.time() - started
        started = time.time()
    runs = plan(settings, swept)
    if not quiet:
        n_main = sum("main" in s.group for s in runs.values())
        print(
            f"looped demo: bios: {len(runs)} runs ({n_main} in the main grid, {settings.seeds} "
            f"seeds, LRs {settings.lr}), {settings.workers} workers -> {runs_dir.parent}"
        )
    grid = [s for s in runs.values() if s.group != "catchup"]
    trained += execute(grid, runs_dir, settings.workers, fresh, quiet)
    phases["bios"] = time.time() - started
    return BiosTrack(settings, runs, sweep, trained)


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


def fact_nll(row: dict) -> float:
    """A bios run's mean fact NLL over serving depths."""
    return float(np.mean(row["fact_nll"]))


def _summary_row(schedule: str, runs: list[dict], uni: list[dict]) -> dict:
    """One schedule's row: seed means, and the seed spreads of its fact NLL and paired gap."""
    depths = runs[0]["depths"]
    shown = [k for k in (1, 4, 8, 16) if k in depths]
    bits = np.mean([r["bits"] for r in runs], axis=0) if "bits" in runs[0] else None
    nll = spread([fact_nll(r) for r in runs])
    paired = paired_values(runs, uni, fact_nll)
    return {
        "schedule": schedule,
        "label": label(schedule),
        "seeds": len(runs),
        "steps": runs[0]["steps"],
        "lr": runs[0].get("lr"),
        "compute_vs_uniform": ratio_of_means(runs, uni, lambda r: r["flops"]),
        "wall_vs_uniform": ratio_of_means(runs, uni, lambda r: r["wall"]),
        "mean_fact_nll": nll["mean"],
        "fact_nll_vs_uniform": ratio_of_means(runs, uni, fact_nll) - 1,
        "fact_nll": nll,
        "vs_uniform_by_seed": spread(paired),
        **judge(paired, schedule),
        "bits": {str(k): float(bits[depths.index(k)]) for k in shown if bits is not None},
    }
