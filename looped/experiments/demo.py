"""The scaled-down reproduction: the bios grid (`experiments.bios`) and the text track
(`experiments.fidelity` at demo size), then the paper's Fig. 4 probe, the figures and optional
catch-up runs, each phase timed. The committed results/demo.json and figures/ are the reference
the docs show; a plain `looped demo` writes under runs/ only. Finished runs are reused.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from looped.experiments.bios import (
    BiosTrack,
    DemoSettings,
    bios_summary,
    collect,
    probe_benefit,
    train_bios,
)
from looped.experiments.fidelity import QUICK as QUICK_FIDELITY
from looped.experiments.fidelity import SETUP, FidelitySettings, run_fidelity
from looped.experiments.results import keep_earlier_times, machine_name, write_result
from looped.experiments.runner import execute
from looped.model import LoopedTransformer
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM
from looped.report import bios as bios_report
from looped.runtime.lock import dir_lock

# The text track at demo size (`looped fidelity` at a chosen size), each schedule at the LR the
# reference's sweep chose. bpe:2048, not 4096: in so narrow a model a 4096-token head costs as
# much as ~4 loops per token, far more than the head's share in the paper's models.
TEXT_LR = {UNIFORM: 3e-3, RECIPE_200M: 3e-3, RECIPES_1B[1]: 3e-3, FIXED: 3e-3}
TEXT = FidelitySettings(
    setup=replace(SETUP, tokenizer="bpe:2048", d_model=64, val_batches=12, test_batches=12),
    steps=150,
    seeds=3,
    lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    chosen_lr=dict(TEXT_LR),
)
QUICK_TEXT = replace(QUICK_FIDELITY, chosen_lr=dict(TEXT_LR))  # toy size, pydoc corpus


REFERENCE = Path("results") / "demo.json"  # the committed reference, relative to the repository


def _comparison(result: dict, out: Path, figures: Path) -> str:
    """What `looped demo` prints at the end (`bios_report.comparison`); nothing when the reference
    is missing or is what this run wrote."""
    if not REFERENCE.is_file() or (out / "demo.json").resolve() == REFERENCE.resolve():
        return ""
    yours_text, ref_text = out / "demo_text.json", REFERENCE.parent / "demo_text.json"
    text = None
    if result["meta"].get("text_results") and yours_text.is_file() and ref_text.is_file():
        text = (json.loads(yours_text.read_text()), json.loads(ref_text.read_text()))
    reference = json.loads(REFERENCE.read_text())
    return bios_report.comparison(result, reference, (out / "demo.json", REFERENCE), figures, text)


def _result(
    bios: BiosTrack, runs_dir: Path, phases: dict, benefit: list, text: bool, trained: tuple
) -> dict:
    """Everything demo.json holds; `trained`: runs trained and the catch-up's seconds."""
    settings, specs, configs = bios.settings, bios.specs, bios.configs
    names = {s.name for s in specs}
    extra = [s for s in bios.sweep_specs if s.name not in names]
    for s in extra:
        s.group = "sweep"
    rows = collect(specs + extra, runs_dir, configs)
    top, cfg0 = max(settings.budgets), configs[specs[0].name]
    return {
        "meta": {
            "settings": asdict(settings),
            "machine": machine_name(),
            "wall_seconds": 0.0,  # the whole demo (what `make demo` runs), set-up included
            "phase_seconds": phases,
            "catchup_seconds": trained[1],  # the optional --catch-up runs
            "runs_trained": trained[0],
            "model": asdict(cfg0.model),
            "params": LoopedTransformer(cfg0.model).num_params(),
            **{k: getattr(cfg0, k) for k in ("full_budget_flops", "batch_size", "seq_len")},
            "dtype": cfg0.dtype,
            "persons": cfg0.data.persons,
            "nll_label": "fact NLL (nats per fact, held-out templates)",
            "text_results": "demo_text.json" if text else None,
        },
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
    text: FidelitySettings | None = None,
) -> dict:
    """The demo's phases, each timed: [bios LR sweep], bios grid, text track, Fig. 4 probe,
    figures, [catch-up runs]; writes OUT/demo.json (and OUT/demo_text.json) and the figures."""
    with dir_lock(out, "looped demo"):  # one writer: a second demo into OUT is refused
        t0, phases, runs_dir = time.time(), {}, out / "runs"
        runs_dir.mkdir(parents=True, exist_ok=True)
        bios = train_bios(settings, runs_dir, fresh, quiet, phases)
        text_on, text_trained = settings.text and text is not None, 0
        if text_on:  # at the bios track's seeds and workers
            started, chosen = time.time(), None if settings.sweep else text.chosen_lr
            text = replace(text, seeds=settings.seeds, workers=settings.workers, chosen_lr=chosen)
            paths = (out / "runs" / "text", out / "demo_text.json", figures)
            done = run_fidelity(text, *paths, fresh, quiet, prefix="text")
            text_trained, phases["text"] = done["meta"]["runs_trained"], time.time() - started
        benefit = []
        if settings.probe:
            started = time.time()
            benefit = probe_benefit(bios.specs, runs_dir)
            phases["probe"] = time.time() - started
        started = time.time()
        extra = [s for s in bios.specs if s.group == "catchup"]
        ran = execute(extra, bios.configs, runs_dir, settings.workers, fresh, quiet)
        catchup = time.time() - started if extra else None
        result = _result(bios, runs_dir, phases, benefit, text_on, (bios.trained + ran, catchup))
        started = time.time()
        paths = bios_report.figures(result, figures)
        phases["figures"] = time.time() - started
        result["meta"]["wall_seconds"] = time.time() - t0 - (catchup or 0.0)
        if result["meta"]["runs_trained"] + text_trained == 0:
            keep = ("wall_seconds", "phase_seconds", "catchup_seconds")
            keep_earlier_times(result["meta"], out / "demo.json", keep)
        write_result(out / "demo.json", result, say=False)
        if not quiet:
            _print_end(result, out, figures, paths)
        return result


def expected_time(quick: bool, timing: Path = Path("results/demo_time.json")) -> str:
    """The demo's first line: how long the committed reference run took, and on what machine."""
    if quick:
        return "looped demo --quick: every code path at toy size (a smoke test, not a result)"
    if not timing.is_file():
        return "looped demo: about ten minutes on a 2-core laptop CPU"
    t = json.loads(timing.read_text())
    return (
        f"looped demo: the reference took {t['wall_seconds'] / 60:.0f} minutes on "
        f"{t['machine']} ({t['dtype']}); finished runs in the output folder are reused"
    )


def write_timing(result: dict, out: Path, text: bool, command: str, path: Path) -> None:
    """How long this demo took, phase by phase (the docs' timing table reads `path`)."""
    keys = ("machine", "dtype", "wall_seconds", "phase_seconds", "runs_trained")
    runs = len(json.loads((out / "demo_text.json").read_text())["runs"]) if text else 0
    timing = {k: result["meta"][k] for k in keys} | {"command": command, "text_runs": runs}
    write_result(path, timing, say=False)
