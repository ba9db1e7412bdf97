"""The paper's headline in its own terms: held-out text NLL across serving depths, equal tokens.

An LR sweep picks each schedule's LR on validation NLL; then every seed at that LR is scored on
test windows at equal tokens and at equal modeled FLOPs (uniform's shorter runs branch off its
full run at their decay). The demo's text track is this track.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped.config import TrainConfig
from looped.errors import UserError
from looped.eval.baselines import corpus_baselines
from looped.eval.evaluate import token_nll_of
from looped.eval.heldout import heldout_nll
from looped.eval.stats import best_lrs, spread
from looped.experiments.plan import Planner
from looped.experiments.results import (
    before_branch,
    branched_wall,
    diverged,
    keep_earlier_times,
    machine_name,
    own_wall,
    write_result,
)
from looped.experiments.runner import RunSpec, execute
from looped.experiments.textsetup import TextSetup, ensure_corpus, slug, windows
from looped.experiments.textsetup import run_config as text_run_config
from looped.flops import schedule_flops, tokens_per_step
from looped.model import LoopedTransformer
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM, fixed_phase, label
from looped.report import text as report
from looped.runtime.lock import dir_lock
from looped.runtime.metrics import read_metrics
from looped.schedule_spec import parse_schedule
from looped.training.run import total_steps_for

# the schedules compared, in the order tables and legends list them
SCHEDULES = (UNIFORM, RECIPE_200M, RECIPES_1B[1], FIXED)
# the track's model, batch and corpus split: d=128, 16x128 tokens per step, 5% + 5% held out
SETUP = TextSetup("bpe:4096", 128, batch_size=16, warmup_steps=20, val_batches=8, test_batches=8)


@dataclass
class FidelitySettings:
    setup: TextSetup = field(default_factory=lambda: replace(SETUP))  # model, batch, corpus split
    dataset: str = "stdlib"  # stdlib | pydoc (offline), a hub name, or a local file/directory
    subset: str | None = None  # hub config name, e.g. sample-10BT for FineWeb-Edu
    max_docs: int | None = None  # tokenize at most this many documents (None: all of them)
    preset: str = "demo"  # base training preset; the setup and `overrides` change it
    steps: int = 400  # optimizer steps of the sweep and of the equal-token comparison
    seeds: int = 3  # seeds of the comparison
    sweep_seeds: int = 2  # seeds each LR is chosen on: the lowest mean validation NLL over them
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # the sweep's peak learning rates
    chosen_lr: dict[str, float] | None = None  # each schedule's LR, no sweep (None: sweep `lrs`)
    schedules: tuple[str, ...] = SCHEDULES  # depth schedules compared
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


# every code path at toy size, under a minute (pydoc corpus)
QUICK = FidelitySettings(TextSetup("bpe:512", 32, 2, 8, 64, 5, 2, 2), "pydoc", steps=40, seeds=2)


def record(s: FidelitySettings) -> dict[str, Any]:
    """The settings as the results file holds them: one flat dict, two setup fields renamed."""
    keys = "dataset subset max_docs tokenizer preset d_model n_head steps batch_size seq_len"
    keys += " warmup_steps eval_batches seeds sweep_seeds held_out lrs chosen_lr schedules"
    keys += " workers overrides"
    fields = {"eval_batches": "val_batches", "held_out": "val_frac"}
    pairs = ((k, fields.get(k, k)) for k in keys.split())
    return {k: getattr(s if hasattr(s, f) else s.setup, f) for k, f in pairs}


def corpus_dir(settings: FidelitySettings, out: Path) -> Path:
    """One corpus directory per (dataset, subset, tokenizer, max_docs)."""
    path = Path(settings.dataset).expanduser()
    name = path.name if path.exists() else settings.dataset
    docs = f"{settings.max_docs}docs" if settings.max_docs else ""
    parts = [name, settings.subset or "", settings.setup.tokenizer, "split", docs]
    return out / f"corpus-{slug('-'.join(p for p in parts if p)) or 'corpus'}"


@dataclass
class Planned:
    spec: RunSpec  # what runner.execute trains (name, schedule, seed, steps)
    cfg: TrainConfig  # the run's resolved config
    lr: float  # its peak learning rate
    d_model: int  # its width
    roles: set[str] = field(default_factory=set)  # sweep, tokens, flops:SCHEDULE


def run_config(
    s: FidelitySettings, corpus: dict, budget_flops: float = 0.0, **run: Any
) -> TrainConfig:
    """`textsetup.run_config` (`run`: schedule, lr, seed, steps), user overrides before the run's."""
    before = [f"budget_flops={budget_flops}", *s.overrides]
    run.setdefault("steps", 0)
    return text_run_config(s.setup, corpus, **run, preset=s.preset, log_interval=5, before=before)


def first_config(s: FidelitySettings, corpus: dict, schedule: str = UNIFORM) -> TrainConfig:
    """The config every run starts from (first LR, seed 0), once the settings are checked."""
    check_settings(s)
    return run_config(s, corpus, schedule=schedule, lr=s.lrs[0], seed=0, steps=s.steps)


def run_name(schedule: str, d_model: int, lr: float, steps: int, seed: int) -> str:
    if schedule.startswith("fixed-first"):
        k, frac = fixed_phase(schedule)
        short = f"ff_k{k}_{round(frac * 100)}"
    else:
        short = slug(schedule.replace("-", "to"))
    return f"{short}_d{d_model}_lr{lr:g}_n{steps}_s{seed}"


class Plan:
    """The runs of every phase, one per distinct config: a run serving two roles trains once."""

    def __init__(self, settings: FidelitySettings, corpus: dict[str, Any]) -> None:
        self.settings, self.corpus = settings, corpus
        self.runs: dict[str, Planned] = {}
        self.planner = Planner()

    def add(self, role: str, schedule: str, lr: float, seed: int, **length: Any) -> Planned:
        """A run of `steps` steps or of `budget_flops`; a `parent`'s branches off its checkpoint."""
        parent, d = length.pop("parent", None), self.settings.setup.d_model
        cfg = run_config(self.settings, self.corpus, schedule=schedule, lr=lr, seed=seed, **length)
        steps = total_steps_for(cfg)  # the trainer's own derivation
        name = run_name(schedule, d, lr, steps, seed)
        if name not in self.runs:
            parents = [parent.spec.name] if parent is not None else []
            spec = self.planner.add(RunSpec(name, schedule, seed, steps), cfg, parents)
            self.runs[name] = Planned(spec, cfg, lr, d)
        self.runs[name].roles.add(role)
        # only a run that serves the sweep alone may end diverged without stopping the track
        self.runs[name].spec.may_diverge = self.runs[name].roles == {"sweep"}
        return self.runs[name]


def plan_sweep(plan: Plan) -> None:
    """Every schedule, LR and sweep seed; uniform's runs keep the checkpoints FLOP runs branch off."""
    s = plan.settings
    for schedule, lr, seed in itertools.product(s.schedules, s.lrs, range(s.sweep_seeds)):
        run = plan.add("sweep", schedule, lr, seed, steps=s.steps)
        if schedule == UNIFORM:
            for partner in _flop_partners(plan, run):
                if partner.spec.branch_step not in run.spec.save_steps:
                    run.spec.save_steps.append(partner.spec.branch_step)


def _flop_partners(plan: Plan, uni: Planned) -> list[Planned]:
    """Uniform runs (not in the plan) at each other schedule's modeled FLOPs, branching off `uni`."""
    s, scratch = plan.settings, Plan(plan.settings, plan.corpus)
    own = scratch.runs[uni.spec.name] = replace(uni, spec=replace(uni.spec, save_steps=[]))
    scratch.planner.runs[own.spec.name], scratch.planner.configs[own.spec.name] = own.spec, own.cfg
    partners = []
    for schedule in (x for x in s.schedules if x != UNIFORM):
        cfg = run_config(s, plan.corpus, schedule=schedule, lr=uni.lr, seed=0)
        per_step, parent = tokens_per_step(cfg), scratch.runs[uni.spec.name]
        budget = schedule_flops(cfg.model, parse_schedule(schedule), s.steps, per_step, cfg.seq_len)
        flops = {"parent": parent, "budget_flops": budget}
        partners.append(scratch.add(f"flops:{schedule}", UNIFORM, uni.lr, uni.spec.seed, **flops))
    return partners


def plan_comparison(plan: Plan, best: dict[str, float]) -> None:
    """Each schedule at its own best LR, every seed, at equal tokens and equal modeled FLOPs."""
    s = plan.settings
    for seed in range(s.seeds):
        uni = plan.add("tokens", UNIFORM, best[UNIFORM], seed, steps=s.steps)
        for schedule in (x for x in s.schedules if x != UNIFORM):
            plan.add("tokens", schedule, best[schedule], seed, steps=s.steps)
        for partner in _flop_partners(plan, uni):
            for role in partner.roles:  # two schedules of equal FLOPs share one uniform run
                flops = partner.cfg.budget_flops
                plan.add(role, UNIFORM, uni.lr, seed, parent=uni, budget_flops=flops)


def _mean(rows: Any, key: str) -> np.float64:
    return np.mean([r[key] for r in rows])


def compare_row(schedule: str, runs: list[dict], uni: dict[int, dict]) -> dict:
    """One table row: `runs` (one per seed) against `uni`, uniform's runs by seed, paired."""
    nll, u_nll = spread([r["mean_nll"] for r in runs]), float(_mean(uni.values(), "mean_nll"))
    paired = [r["mean_nll"] / uni[r["seed"]]["mean_nll"] - 1 for r in runs if r["seed"] in uni]
    flops, u_flops = _mean(runs, "flops"), _mean(uni.values(), "flops")
    wall, u_wall = _mean(runs, "wall"), _mean(uni.values(), "wall")
    first = runs[0]  # every seed's run has the same LR, steps, tokens and depths
    return {
        **{"schedule": schedule, "label": label(schedule), "lr": first["lr"], "seeds": len(runs)},
        **{"steps": first["steps"], "tokens": first["tokens"], "flops": float(flops)},
        "mean_nll": nll,
        "vs_uniform": float(np.mean(paired)) if paired else nll["mean"] / u_nll - 1,
        "vs_uniform_by_seed": spread(paired),
        **{"compute_saving": float(1 - flops / u_flops), "wall_saving": float(1 - wall / u_wall)},
        "depths": first["depths"],
        "token_nll": np.mean([r["token_nll"] for r in runs], axis=0).tolist(),
        "uniform_steps": next(iter(uni.values()))["steps"],
        "uniform_nll": spread([u["mean_nll"] for u in uni.values()]),
    }


def by_seed(rows: list[dict], role: str, schedule: str) -> list[dict]:
    """The rows of one schedule that serve `role`, in seed order."""
    mine = (r for r in rows if role in r["roles"] and r["schedule"] == schedule)
    return sorted(mine, key=lambda r: r["seed"])


def compare(rows: list[dict], role: str, schedules: tuple[str, ...]) -> list[dict]:
    """One row per schedule, its seeds against uniform's at equal steps ("tokens") or FLOPs."""
    table = []
    for s in schedules:
        runs = by_seed(rows, "tokens", s)
        if not runs or (role == "flops" and s == UNIFORM):
            continue
        partner = by_seed(rows, "tokens" if role == "tokens" else f"flops:{s}", UNIFORM)
        if partner:
            table.append(compare_row(s, runs, {u["seed"]: u for u in partner}))
    return table


def collect(plan: Plan, runs_dir: Path) -> list[dict]:
    """One row per run that did not diverge (all of the track's one width)."""
    scored_on = held_windows(plan)
    runs = [p for name, p in plan.runs.items() if not diverged(runs_dir / name)]
    params = LoopedTransformer(runs[0].cfg.model).num_params() if runs else 0
    return [_row(p, runs_dir, scored_on, params) for p in runs]


def _row(p: Planned, runs_dir: Path, scored_on: list | None, params: int) -> dict:
    """What a run was and what it measured (validation NLL, test NLL when it is reported)."""
    metrics = read_metrics(runs_dir / p.spec.name)
    summary = json.loads((runs_dir / p.spec.name / "summary.json").read_text())
    train = [m for m in metrics if m["kind"] == "train"]
    inherited = before_branch(runs_dir, p.spec.parent, p.spec.branch_step)
    parent = [m for m in inherited if m["kind"] == "train"]
    nll = token_nll_of([m for m in metrics if m["kind"] == "eval"][-1])  # validation windows
    depths = sorted(int(k) for k in nll)
    val = [nll[str(k)] for k in depths]
    # a reported run is scored on the test windows; a sweep-only run needs no test score
    reported = scored_on is not None and bool(p.roles - {"sweep"})
    own = {"token_nll": val, "mean_nll": float(np.mean(val)), "se": None}
    held = heldout_nll(runs_dir / p.spec.name, p.cfg, scored_on) if reported else own
    tokens = tokens_per_step(p.cfg)
    schedule = parse_schedule(p.spec.schedule, p.spec.seed)
    return {
        **{"name": p.spec.name, "schedule": p.spec.schedule, "label": label(p.spec.schedule)},
        **{"roles": sorted(p.roles), "lr": p.lr, "seed": p.spec.seed, "d_model": p.d_model},
        **{"params": params, "steps": p.spec.steps, "tokens": p.spec.steps * tokens},
        "flops": schedule_flops(p.cfg.model, schedule, p.spec.steps, tokens, p.cfg.seq_len),
        "wall": branched_wall(train, parent, p.spec.branch_step),
        **{"final_loss": summary["final_loss"], "own_wall": own_wall(train), "depths": depths},
        **{"val_token_nll": val, "val_mean_nll": own["mean_nll"]},
        **{"token_nll": held["token_nll"], "mean_nll": held["mean_nll"], "se_windows": held["se"]},
        "curve": [[m["step"], m["loss"], m["depth"]] for m in parent + train],
    }


def held_windows(plan: Plan, split: str = "test") -> list | None:
    """A held-out split's windows, shaped as the runs' own evaluation (None without that split)."""
    if split not in plan.corpus["splits"]:
        return None
    c = next(iter(plan.runs.values())).cfg
    return windows(plan.corpus["path"], split, c.batch_size, c.seq_len, c.eval_batches)


def sweep_results(plan: Plan, runs_dir: Path) -> list[dict]:
    """What chose the LRs: each sweep run's validation NLL (None if it diverged: never the best)."""
    rows = [r for r in collect(plan, runs_dir) if "sweep" in r["roles"]]
    for p in plan.runs.values():
        if "sweep" in p.roles and diverged(runs_dir / p.spec.name):
            rows.append({"schedule": p.spec.schedule, "label": label(p.spec.schedule), "lr": p.lr})
    return [
        {k: r.get(k) for k in ("schedule", "label", "lr", "seed", "final_loss")}
        | {"mean_nll": r.get("val_mean_nll", r.get("mean_nll"))}
        | {"token_nll": r.get("val_token_nll", r.get("token_nll"))}
        for r in rows
    ]


def _result(track: _Track, sweep_rows: list[dict], best: dict[str, float]) -> dict:
    """Everything `fidelity.json` holds: the setting, every run, the sweep and both comparisons."""
    plan, settings, corpus = track.plan, track.plan.settings, track.plan.corpus
    rows = collect(plan, track.runs_dir)
    cfg0 = next(iter(plan.runs.values())).cfg
    splits = {s: corpus["splits"][s]["tokens"] for s in corpus["splits"]}
    val, test = held_windows(plan, "val"), held_windows(plan)  # baselines are scored as runs are
    baselines = corpus_baselines(corpus["path"], corpus["vocab_size"], val, test or val)
    meta = {
        "settings": record(settings),
        "machine": machine_name(),
        "corpus": {k: corpus[k] for k in ("dataset", "tokenizer", "vocab_size", "python")} | splits,
        "dtype": cfg0.dtype,
        "lr_schedule": cfg0.optim.lr_schedule,
        "tokens_per_step": settings.setup.batch_size * settings.setup.seq_len,
        "phase_seconds": track.phases,
        "wall_seconds": time.time() - track.t0,
        "metric": "mean held-out token NLL over serving depths 1..16 (nats/token)",
        "runs_trained": track.trained,  # by this invocation (reused ones not counted)
    }
    return {
        "meta": meta,
        "runs": rows,
        "sweep": sweep_rows,  # validation NLL, per sweep seed
        "baselines": {**baselines, "windows": "test" if test else "val"},
        "chosen_lr": best,
        "equal_tokens": compare(rows, "tokens", settings.schedules),
        "equal_flops": compare(rows, "flops", settings.schedules),
    }


def check_settings(settings: FidelitySettings) -> None:
    """Bad settings as one line each, before the corpus is built or anything trains."""
    s, t = settings, settings.setup
    positive = {"--seeds": s.seeds, "--workers": s.workers, "--steps": s.steps}
    for flag, value in (positive | {"--d-model": t.d_model, "--batch-size": t.batch_size}).items():
        if value < 1:
            raise UserError(f"{flag} {value} must be >= 1")
    if not s.lrs or any(lr <= 0 for lr in s.lrs):
        raise UserError(f"--lrs {s.lrs}: give positive learning rates such as 1e-3,3e-3")
    if s.chosen_lr is not None and (missing := sorted(set(s.schedules) - set(s.chosen_lr))):
        raise UserError(f"no learning rate given for {', '.join(missing)}: add it or run the sweep")
    if UNIFORM not in s.schedules:
        raise UserError(f"the schedules must include {UNIFORM}: every comparison is against it")


def run_fidelity(
    settings: FidelitySettings,
    out: Path,
    results: Path,
    figures_dir: Path,
    fresh: bool = False,
    quiet: bool = False,
    prefix: str = "fidelity",
) -> dict:
    """Train what is missing, write `results` and FIGURES_DIR/PREFIX_*.png, print the table."""
    for schedule in settings.schedules:  # every config checked before the corpus is built
        first_config(settings, {"path": str(out), "vocab_size": 1}, schedule)
    with dir_lock(out, "looped fidelity"):  # one writer: a second one into OUT is refused
        t0 = time.time()  # the corpus is built the first time, then reused
        where = {"directory": corpus_dir(settings, out), "stream": True, "quiet": quiet}
        only = {"subset": settings.subset, "max_docs": settings.max_docs}
        plan = Plan(settings, ensure_corpus(settings.setup, out, settings.dataset, **where, **only))
        track = _Track(plan, out / "runs", fresh, quiet, t0, {"corpus": time.time() - t0})
        track.runs_dir.mkdir(parents=True, exist_ok=True)
        if settings.chosen_lr is None:
            plan_sweep(plan)
            track.train("sweep")
            sweep_rows = sweep_results(plan, track.runs_dir)
            best = best_lrs([r for r in sweep_rows if r["mean_nll"] is not None])
        else:  # each schedule's LR given (the demo's, chosen by its reference's sweep)
            sweep_rows, best = [], dict(settings.chosen_lr)
        plan_comparison(plan, best)
        track.train("comparison")
        result = _result(track, sweep_rows, best)
        if track.trained == 0:
            keep_earlier_times(result["meta"], results, ("wall_seconds", "phase_seconds"))
        write_result(results, result, say=False)
        paths = report.figures(result, figures_dir, prefix)
        print(report.format_table(result))  # even with --quiet
        meta = result["meta"]
        phases = ", ".join(f"{k} {v:.0f}s" for k, v in meta["phase_seconds"].items())
        print(
            f"wrote {results} and {len(paths)} figures in {figures_dir} "
            f"({meta['wall_seconds']:.0f}s; phases: {phases})"
        )
        return result


@dataclass
class _Track:
    """One invocation: its plan, where the runs go, each phase's seconds, the runs it trained."""

    plan: Plan
    runs_dir: Path
    fresh: bool
    quiet: bool
    t0: float
    phases: dict[str, float]
    done: set[str] = field(default_factory=set)
    trained: int = 0

    def train(self, phase: str) -> None:
        started, todo = time.time(), set(self.plan.runs) - self.done
        specs, configs = self.plan.planner.specs(todo)
        workers = self.plan.settings.workers
        if not self.quiet:
            print(f"looped fidelity: {phase}: {len(specs)} runs, {workers} workers")
        self.trained += execute(specs, configs, self.runs_dir, workers, self.fresh, self.quiet)
        self.done.update(todo)
        self.phases[phase] = time.time() - started
