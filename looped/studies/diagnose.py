"""Why does uniform 1..16 learn slower than a fixed K at small scale? Evidence, not a guess.

Variants that separate the candidate causes (`VARIANTS`), at equal steps and tokens and the demo's
tuned LRs; read: gradient norms by depth, gradient cosines between depths at checkpoints
(`probes.gradient_agreement`), and every variant's held-out NLL at depths 1..16.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped import paper
from looped.errors import UserError
from looped.flops import tokens_per_step
from looped.runtime.checkpoint import checkpoint_dir
from looped.runtime.lock import dir_lock
from looped.runtime.metrics import read_metrics
from looped.studies import bios, engine
from looped.studies.engine import MICRO, name_of, ratio_of_means
from looped.studies.probes import agreement_at
from looped.studies.report import diagnose as report
from looped.studies.results import own_wall, write_result
from looped.studies.runner import Planned, execute

# variant -> (the schedule it is studied as, extra overrides); equal steps and tokens per step
# for all; the per-micro-batch variant (MICRO) trains uniform 1..16 with a K per micro-batch
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "uniform": (paper.UNIFORM, ()),
    "fixed": (paper.FIXED, ()),
    "fixed-first": (paper.FIXED_FIRST, ()),
    "per-micro": (MICRO, ("depth_per_micro=true", "grad_accum=4")),
    "no-k1": (paper.NO_K1, ()),
}
PROBED = ("uniform", "fixed")  # runs whose checkpoints get the gradient-agreement probe


@dataclass
class DiagnoseSettings:
    preset: str = "demo"  # training preset (bios, d=64, batch 32x128)
    steps: int = 150  # optimizer steps of every variant (about uniform's at the demo's budget)
    probe_at: tuple[int, ...] = (40, 80, 150)  # checkpoints probed for gradient agreement
    probe_depths: tuple[int, ...] = (1, 4, 8, 16)  # depths whose gradients are compared
    probe_batches: int = 2  # training batches averaged per probe
    seeds: int = 3  # seeds per variant (the table shows their spread)
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


QUICK = DiagnoseSettings(
    steps=12,
    seeds=1,
    probe_at=(6, 12),
    probe_batches=1,
    overrides=[*bios.TOY, "optim.warmup_steps=2"],
)


def plan(settings: DiagnoseSettings) -> dict[str, Planned]:
    """One run per (variant, seed), all `steps` long from scratch, checkpointed at the probe
    steps (the engine's planner, no run branching off another)."""
    base = bios.DemoSettings(preset=settings.preset, overrides=list(settings.overrides))
    _, vocab = bios.resolve_budget(base)  # the vocabulary the trainer will fit to the corpus
    wanted = []
    for seed in range(settings.seeds):
        for variant, (studied, extra) in VARIANTS.items():
            schedule = paper.UNIFORM if studied == MICRO else studied
            lr = bios.BIOS_LR.get(schedule, bios.BIOS_LR[paper.UNIFORM])  # the demo's tuned LRs
            with_extra = replace(base, overrides=base.overrides + list(extra))
            cfg = bios.base_config(with_extra, seed, schedule, 0, lr)
            cfg.max_steps, cfg.budget_frac = settings.steps, 0
            cfg.eval_interval = cfg.ckpt_interval = 0
            if variant == "per-micro":  # the same sequences per step, in 4 micro-batches
                if cfg.batch_size % 4:
                    raise UserError(f"batch_size={cfg.batch_size} must split into 4 micro-batches")
                cfg.batch_size //= 4
            cfg.keep_last, cfg.model.vocab_size = 1, vocab
            save = [s for s in settings.probe_at if variant in PROBED and s <= settings.steps]
            name = name_of(studied, lr, seed, settings.steps)
            wanted.append(Planned(name, cfg, studied, settings.steps, save_steps=save))
    return engine.plan(wanted, family=lambda p: p.name)


def runs_of(variant: str, runs: dict[str, Planned]) -> list[Planned]:
    """A variant's runs, in seed order."""
    return [p for p in runs.values() if p.schedule == VARIANTS[variant][0]]


def grad_norm_by_depth(metrics: list[dict], after: int) -> dict[int, float]:
    """Median pre-clip gradient norm of the steps at each depth, past step `after` (the warmup).
    The median, because a depth gets only a dozen steps in a short run and single steps spike."""
    by: dict[int, list[float]] = {}
    for r in metrics:
        if r["kind"] == "train" and r["step"] > after and r.get("grad_norm") is not None:
            by.setdefault(r["depth"], []).append(r["grad_norm"])
    return {k: float(np.median(v)) for k, v in sorted(by.items())}


def collect(settings: DiagnoseSettings, specs: dict[str, Planned], runs_dir: Path) -> dict:
    """Per variant: serving-depth NLL at the end, gradient norms by depth, gradient agreement."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        runs = runs_of(variant, specs)
        rows, norms = [], []
        for spec in runs:
            metrics = read_metrics(runs_dir / spec.name)
            final = [m for m in metrics if m["kind"] == "eval"][-1]
            rows.append(bios.eval_row(final))
            norms.append(grad_norm_by_depth(metrics, spec.steps // 10))  # past the warmup
        key = "fact_nll" if "fact_nll" in rows[0] else "token_nll"
        means = [float(np.mean(r[key])) for r in rows]
        nll = np.mean([r[key] for r in rows], 0).tolist()
        depths = sorted({k for n in norms for k in n})
        norm = {str(k): float(np.mean([n[k] for n in norms if k in n])) for k in depths}
        entry = {"label": report.label(variant), "schedule": runs[0].cfg.schedule, "metric": key}
        entry |= {
            "depths": rows[0]["depths"],
            "nll": nll,
            "mean_nll": float(np.mean(means)),
            "seed_mean_nll": means,
            "grad_norm_by_depth": norm,
        }
        if variant in PROBED:  # the first seed's checkpoints
            entry["agreement"] = _agreement(settings, runs_dir / runs[0].name, runs[0].save_steps)
        out[variant] = entry
    base = [{"mean_nll": m} for m in out["uniform"]["seed_mean_nll"]]
    for entry in out.values():  # the gap to uniform, unpaired (the variants' seeds differ)
        mine = [{"mean_nll": m} for m in entry["seed_mean_nll"]]
        entry["vs_uniform"] = ratio_of_means(mine, base) - 1
    return out


def _agreement(settings: DiagnoseSettings, run: Path, steps: list[int]) -> list[dict]:
    """The gradient-agreement probe of a run's checkpoints, without their per-batch detail."""
    depths, probed = list(settings.probe_depths), []
    for step in steps:
        found = agreement_at(checkpoint_dir(run, step), depths, settings.probe_batches)
        probed.append({k: v for k, v in found.items() if k not in ("per_batch", "checkpoint")})
    return probed


def run_diagnose(
    settings: DiagnoseSettings, out: Path, results: Path, figures: Path, quiet: bool = False
) -> dict:
    """Train what is missing, probe, write `results` and the figures, print the summary."""
    with dir_lock(out, "looped diagnose"):  # one writer: a second one into OUT is refused
        t0 = time.time()
        runs, runs_dir = plan(settings), out / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        trained = execute(list(runs.values()), runs_dir, settings.workers, False, quiet)
        variants = collect(settings, runs, runs_dir)  # first: the meta's wall time has the probes
        result = {"meta": _meta(settings, runs, runs_dir, trained, t0), "variants": variants}
        write_result(results, result, say=False)
        paths = report.figures(result, figures)
    print(report.format_summary(result))  # the result, even with --quiet (which silences the bars)
    print(f"wrote {results} and {len(paths)} figures in {figures}/")
    return result


def _meta(
    settings: DiagnoseSettings, runs: dict[str, Planned], runs_dir: Path, trained: int, t0: float
) -> dict:
    """What the tables say about the runs: their size, time and LRs."""
    train_seconds = sum(  # every run's own training time (one core each), reused ones included
        own_wall([m for m in read_metrics(runs_dir / s.name) if m["kind"] == "train"])
        for s in runs.values()
    )
    cfg0 = next(iter(runs.values())).cfg
    meta = {"settings": asdict(settings), "preset": settings.preset, "dtype": cfg0.dtype}
    meta |= {
        "d_model": cfg0.model.d_model,
        "tokens_per_step": tokens_per_step(cfg0),
        "runs_trained": trained,
        "wall_seconds": time.time() - t0,
        "train_seconds": train_seconds,
        "grad_clip": cfg0.optim.grad_clip,
    }
    return meta | {"lr": {v: runs_of(v, runs)[0].lr for v in VARIANTS}}
