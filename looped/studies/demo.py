"""The scaled-down reproduction: the bios grid (`studies.bios`) and the text track
(a text-study block of one length, `studies.textstudy`), then the paper's Fig. 4 probe, the figures and optional
catch-up runs, each phase timed. The committed results/demo.json and figures/ are the reference
the docs show; a plain `looped demo` writes under runs/ only. Finished runs are reused.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from looped.model import LoopedTransformer
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM
from looped.runtime.device import pick_device
from looped.runtime.lock import dir_lock
from looped.studies.bios import (
    BiosTrack,
    DemoSettings,
    base_config,
    bios_summary,
    collect,
    probe_benefit,
    train_bios,
)
from looped.studies.report import bios as bios_report
from looped.studies.report import text as text_report
from looped.studies.report.render import BUDGET_MINUTES, timed_demos
from looped.studies.results import keep_earlier_times, machine_name, write_result
from looped.studies.runner import execute
from looped.studies.textsetup import DEMO_RECIPE, TextSetup, track_setup
from looped.studies.textstudy import QUICK as QUICK_BLOCK
from looped.studies.textstudy import BlockSettings, run_text, text_tables
from looped.studies.timing import fixed_step, one_thread, time_min
from looped.training.run import make_optimizer

# The text track: a text-study block of one length, at a size whose models beat the bigram
# table (d=64, BPE-512, 480 steps on the standard library's source), every schedule at one LR
# under the chosen recipe (DEMO_RECIPE, its warmup a share of the 480 steps as the bios grid's
# is of its budget); `--sweep` chooses the LR again on seed 100.
TEXT_LR, TEXT_STEPS = 3e-3, 480
TEXT = BlockSettings(
    setup=track_setup(TextSetup(), DEMO_RECIPE, TEXT_STEPS),
    lengths=(TEXT_STEPS,),
    lrs=(TEXT_LR,),
    lr_seeds=(),
    rounds=(3,),
    schedules=(UNIFORM, RECIPES_1B[1], RECIPE_200M),
    tuned_at=0,
)
SWEEP_LRS, SWEEP_SEEDS = (1e-3, 3e-3, 1e-2), (100,)  # the text track's `--sweep`
QUICK_TEXT = replace(  # toy size
    TEXT, setup=track_setup(QUICK_BLOCK.setup, DEMO_RECIPE, 40), lengths=(40,), corpus="pydoc"
)


NLL_LABEL = "fact NLL (nats per fact, held-out templates)"  # what demo.json's NLLs are
REFERENCE = Path("results") / "demo.json"  # the committed reference, relative to the repository
TIMING = REFERENCE.parent / "demo_time.json"  # the timed demos the first line scales from


def _comparison(result: dict, out: Path, figures: Path) -> str:
    """What `looped demo` prints at the end (`bios_report.comparison`); nothing when the reference
    is missing or is what this run wrote."""
    if not REFERENCE.is_file() or (out / "demo.json").resolve() == REFERENCE.resolve():
        return ""
    paths, text = (out / "demo_text.json", REFERENCE.parent / "demo_text.json"), None
    if result["meta"].get("text_results") and all(p.is_file() for p in paths):
        yours, ref = (json.loads(p.read_text()) for p in paths)
        text = yours, _at_seeds(ref, {r["seed"] for r in yours["runs"]})
    reference = json.loads(REFERENCE.read_text())
    return bios_report.comparison(result, reference, (out / "demo.json", REFERENCE), figures, text)


def _at_seeds(text: dict, seeds: set[int]) -> dict:
    """A text track's result cut to these seeds, its tables recomputed: your seed 0 beside the
    reference's seed 0, not beside its three-seed mean."""
    rows = [r for r in text["runs"] if r["seed"] in seeds]
    schedules = tuple(text["meta"]["settings"]["schedules"])
    return {**text, "runs": rows, **text_tables(rows, schedules, text.get("baselines"))}


def _result(
    bios: BiosTrack, runs_dir: Path, phases: dict, benefit: list, text: bool, trained: tuple
) -> dict:
    """Everything demo.json holds; `trained`: runs trained and the catch-up's seconds."""
    settings = bios.settings
    rows = collect(bios.runs.values(), runs_dir)
    top, cfg0 = max(settings.budgets), next(iter(bios.runs.values())).cfg
    meta = {"settings": asdict(settings), "machine": machine_name()}
    # wall_seconds: the whole demo (what `make demo` runs), set-up included, set at its end;
    # catchup_seconds: the optional --catch-up runs
    meta |= {
        "wall_seconds": 0.0,
        "phase_seconds": phases,
        "catchup_seconds": trained[1],
        "runs_trained": trained[0],
        "model": asdict(cfg0.model),
    }
    meta["params"] = LoopedTransformer(cfg0.model).num_params()
    meta |= {k: getattr(cfg0, k) for k in ("full_budget_flops", "batch_size", "seq_len", "dtype")}
    meta |= {
        "persons": cfg0.data.persons,
        "nll_label": NLL_LABEL,
    }
    meta["text_results"] = "demo_text.json" if text else None
    return {
        "meta": meta,
        "runs": rows,
        "sweep": bios.sweep,
        "chosen_lr": dict(settings.lr),
        "summary": bios_summary(rows, top),
        "summary_tokens": bios_summary(rows, top, tokens=True),
        "update_benefit": benefit,
    }


def _print_end(result: dict, out: Path, figures: Path, paths: list[Path]) -> None:
    print("\nBios track, equal FLOPs (full budget):")
    print(bios_report.format_summary(result["summary"]))
    print("\nBios track, equal tokens (uniform's full-budget steps):")
    print(bios_report.format_summary(result["summary_tokens"]))
    took = ", ".join(f"{k} {v:.0f}s" for k, v in result["meta"]["phase_seconds"].items())
    wall = result["meta"]["wall_seconds"]
    print(f"wrote {out / 'demo.json'} and {len(paths)} figures in {figures} ({wall:.0f}s; {took})")
    if comparison := _comparison(result, out, figures):
        print(comparison)


def run_demo(
    settings: DemoSettings,
    out: Path,
    figures: Path,
    fresh: bool = False,
    quiet: bool = False,
    text: BlockSettings | None = None,
) -> dict:
    """The demo's phases, each timed: [bios LR sweep], bios grid, text track, Fig. 4 probe,
    figures, [catch-up runs]; writes OUT/demo.json (and OUT/demo_text.json) and the figures."""
    with dir_lock(out, "looped demo"):  # one writer: a second demo into OUT is refused
        t0, phases, runs_dir = time.time(), {}, out / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        bios = train_bios(settings, runs_dir, fresh, quiet, phases)
        text_on, text_trained = settings.text and text is not None, 0
        if text_on:  # at its own seeds, the bios track's workers
            started = time.time()
            text_trained = run_text_track(settings, text, out, figures, fresh, quiet)
            phases["text"] = time.time() - started
        benefit = []
        if settings.probe:
            started = time.time()
            benefit = probe_benefit(bios.runs.values(), runs_dir)
            phases["probe"] = time.time() - started
        started = time.time()
        extra = [s for s in bios.runs.values() if s.group == "catchup"]
        ran = execute(extra, runs_dir, settings.workers, fresh, quiet)
        catchup = time.time() - started if extra else None
        result = _result(bios, runs_dir, phases, benefit, text_on, (bios.trained + ran, catchup))
        started = time.time()
        paths = bios_report.figures(result, figures)
        phases["figures"] = time.time() - started
        result["meta"]["wall_seconds"] = time.time() - t0 - (catchup or 0.0)
        keep = ("wall_seconds", "phase_seconds", "catchup_seconds")
        keep_earlier_times(result["meta"], out / "demo.json", keep, trained=text_trained)
        write_result(out / "demo.json", result, say=False)
        if not quiet:
            _print_end(result, out, figures, paths)
        return result


def run_text_track(
    settings: DemoSettings, text: BlockSettings, out: Path, figures: Path, fresh: bool, quiet: bool
) -> int:
    """The text track at the demo's text seeds and workers (with `--sweep`, the LR chosen on
    SWEEP_SEEDS): OUT/demo_text.json, its figures and its table; returns the runs it trained."""
    text = replace(text, rounds=(settings.text_seeds,), workers=settings.workers)
    if settings.sweep:
        text = replace(text, lrs=SWEEP_LRS, lr_seeds=SWEEP_SEEDS)
    result = run_text(text, out / "runs" / "text", fresh, quiet)
    path = out / "demo_text.json"
    keep_earlier_times(result["meta"], path, ("wall_seconds",))
    write_result(path, result, say=False)
    paths = text_report.figures(result, figures, "text")
    print(text_report.format_table(result))  # even with --quiet
    print(f"wrote {path} and {len(paths)} figures in {figures}")
    return result["meta"]["runs_trained"]


def calibrate(settings: DemoSettings, steps: int = 5) -> float:
    """Seconds per training step of the bios model (fixed K=4, the demo's dtype, one thread as
    each worker has), the fastest of `steps` after a warm-up: how fast this machine trains the
    demo, set against the same step timed on the machine that wrote demo_time.json."""
    cfg = base_config(settings, 0, FIXED, 1.0)
    device = pick_device(cfg.device)  # where the demo's runs will train
    with one_thread():
        torch.manual_seed(0)
        model = LoopedTransformer(cfg.model).to(device)
        opt = make_optimizer(model, cfg.optim)
        x = torch.randint(0, cfg.model.vocab_size, (cfg.batch_size, cfg.seq_len), device=device)
        step = fixed_step(lambda: model(x, depth=4, targets=x)[1], opt, device, cfg.dtype)
        return time_min({"step": step}, 1, steps, device)["step"]


def estimate_seconds(settings: DemoSettings, step_s: float, timing: dict) -> float:
    """The demo's wall time here: the timed reference's phases, each scaled by how many seeds
    and workers it has against the reference's, and by this machine's step time against the
    reference machine's."""
    phases, ran = timing["phase_seconds"], timing["settings"]
    bios = phases["bios"] * settings.seeds / ran["seeds"]
    text = phases.get("text", 0.0) * settings.text_seeds / ran["text_seeds"] if settings.text else 0
    rest = sum(v for k, v in phases.items() if k not in ("bios", "text"))
    workers = min(settings.workers, os.cpu_count() or 1)
    return (bios + text + rest) * ran["workers"] / workers * step_s / timing["calibration_step_s"]


def _closest(data: dict, dtype: str) -> dict:
    """The timed demo to scale from: one in this machine's dtype where there is one."""
    timed = [t for t in timed_demos(data) if t.get("calibration_step_s")] if data else []
    return next((t for t in timed if t["dtype"] == dtype), timed[0] if timed else {})


def expected_time(
    settings: DemoSettings, step_s: float, quick: bool = False, path: Path = TIMING
) -> str:
    """The demo's first line: how long it will take on this machine (`step_s`: `calibrate`)."""
    if quick:
        return "looped demo --quick: every code path at toy size (a smoke test, not a result)"
    dtype = base_config(settings, 0, FIXED, 1.0).dtype
    timing = _closest(json.loads(path.read_text()) if path.is_file() else {}, dtype)
    if not timing.get("calibration_step_s"):
        return f"looped demo: one training step takes {step_s:.2f}s here; finished runs are reused"
    minutes = estimate_seconds(settings, step_s, timing) / 60
    wanted = (settings.sweep, settings.depth_ks, settings.catch_up)
    extra = [k for k, on in zip(("LR sweeps", "depth runs", "catch-up runs"), wanted) if on]
    line = (
        f"looped demo: about {minutes:.0f} minutes on this machine ({machine_name()}, "
        f"{dtype}){' plus the ' + ' and '.join(extra) if extra else ''}, scaled from a timed "
        f"run of {timing['wall_seconds'] / 60:.0f} minutes on {timing['machine']} "
        f"({timing['dtype']}) by a calibration step {timing['calibration_step_s'] / step_s:.2f}x "
        "as fast here; finished runs are reused"
    )
    if minutes > BUDGET_MINUTES and settings.seeds > 1:
        fewer = estimate_seconds(replace(settings, seeds=settings.seeds - 1), step_s, timing)
        line += f" (--seeds {settings.seeds - 1}: about {fewer / 60:.0f} minutes)"
    return line


def write_timing(
    result: dict, settings: DemoSettings, out: Path, command: str, step_s: float, path: Path
) -> None:
    """How long this demo took, phase by phase (the docs' timing table reads `path`), with the
    calibration step and the seeds and workers a later demo's first line scales it by."""
    keys = ("machine", "dtype", "wall_seconds", "phase_seconds", "runs_trained")
    runs = len(json.loads((out / "demo_text.json").read_text())["runs"]) if settings.text else 0
    timing = {k: result["meta"][k] for k in keys} | {"command": command, "text_runs": runs}
    timing["settings"] = {k: getattr(settings, k) for k in ("seeds", "text_seeds", "workers")}
    timing["calibration_step_s"] = step_s
    same = ("command", "machine", "dtype")  # a rerun replaces its own row, keeps the others
    earlier = timed_demos(json.loads(path.read_text())) if path.is_file() else []
    kept = [t for t in earlier if [t[k] for k in same] != [timing[k] for k in same]]
    write_result(path, {"timings": [*kept, timing]}, say=False)
