"""The scaled-down reproduction: small looped models on synthetic biographies and on text.

    looped demo                  # both tracks, 3 seeds: runs/demo/ (runs, demo.json,
                                 # demo_text.json, figures), then its table beside the reference's
    looped demo --quick          # the same code path at toy size, under a minute: runs/demo-quick/
    looped demo --out DIR        # write runs, results and figures under DIR
    looped demo --fresh          # retrain instead of reusing finished runs
    looped demo --sweep          # first the LR sweeps (both tracks), then each schedule's best LR
    looped demo --no-text        # the bios grid only
    looped demo --full           # also the depth-specialisation runs (Fig. 5)
    looped demo --reference      # regenerate the committed reference (implies --sweep --full):
                                 # results/demo.json, results/demo_text.json, figures/
                                 # (then `looped report`)

The committed results/demo.json and figures/ are the reference that the README and notebook 05
show; a plain `looped demo` never writes them (runs/ is not tracked), so `make demo` and
`make test` pass in either order.

The bios grid (per seed): fixed K=4, fixed-first (K=4 for 80%, then uniform 1..16) and uniform
1..16, each at 15%, 45% and 100% of the full modeled-FLOP budget (equal FLOPs), fixed K=4 and
fixed-first at uniform's full-budget steps (equal tokens); with `--full` also fixed K=1, 2, 8
at 45% (beside the grid's K=4 there) for the depth-specialisation figure (seed 0). Every run
is evaluated at serving depths 1..16 (fact NLL on held-out templates, recalled bits per person,
two-hop recall). Then the text track
(`looped.experiments.fidelity` at demo size, `TEXT`: held-out token NLL, the paper's metric, at equal tokens
and equal FLOPs) and the paper's Fig. 4 at fixed K=4's checkpoints. Each phase is timed.

Sharing without approximation. With a warmup-stable-decay LR, a run agrees with a longer run of
the same schedule on every depth, batch and learning rate until its own decay (or its switch), so
it is *exactly* a branch of that longer run's checkpoint there (the trainer checks this). One
fixed-K=4 run at 100% therefore carries the fixed phases of all three fixed-first runs and of the
shorter fixed-K=4 runs, and one uniform run at 100% carries the shorter uniform runs. Runs go to a
pool of worker processes (two single-threaded workers use 2 cores better than one two-threaded
process); finished runs are reused when the demo is run again.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from looped.commands.common import OverrideParser, study_parser
from looped.config import load_config, to_yaml
from looped.errors import UserError
from looped.eval.stats import bios_summary
from looped.experiments.bios import (
    FULL_DEPTH_KS,
    QUICK,
    BiosTrack,
    DemoSettings,
    collect,
    probe_benefit,
    train_bios,
)
from looped.experiments.fidelity import QUICK as QUICK_FIDELITY
from looped.experiments.fidelity import FidelitySettings, run_fidelity
from looped.experiments.results import keep_earlier_times, machine_name, write_result
from looped.experiments.runner import execute
from looped.model import LoopedTransformer
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM
from looped.report import bios as bios_report
from looped.runtime.lock import dir_lock

# The text track at demo size: one looped layer of width 64 on the standard library's source,
# 150 steps of 16x128 tokens, each schedule at the LR the reference's sweep chose (`looped
# fidelity` is the same track at a chosen size). bpe:2048, not 4096: in so
# narrow a model a 4096-token head costs as much as ~4 loops per token, far more than the head's
# share in the paper's models, and made the demo ~90 s slower.
# The LRs the reference's sweep chose on the leak-free split (validation NLL, mean of 2 seeds):
TEXT_LR = {UNIFORM: 3e-3, RECIPE_200M: 3e-3, RECIPES_1B[1]: 3e-3, FIXED: 3e-3}
TEXT = FidelitySettings(
    tokenizer="bpe:2048",
    d_model=64,
    steps=150,
    batch_size=16,
    eval_batches=12,
    seeds=3,
    lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
    chosen_lr=dict(TEXT_LR),
)
QUICK_TEXT = replace(QUICK_FIDELITY, chosen_lr=dict(TEXT_LR))  # toy size, pydoc corpus


REFERENCE = Path("results") / "demo.json"  # the committed reference, relative to the repository


def _comparison(result: dict, out: Path, figures: Path) -> str:
    """What `looped demo` prints at the end: its table beside the reference's, and where its
    figures are. Nothing when the reference is missing or is what this run wrote."""
    if not REFERENCE.is_file() or (out / "demo.json").resolve() == REFERENCE.resolve():
        return ""
    yours_text, ref_text = out / "demo_text.json", REFERENCE.parent / "demo_text.json"
    text = None
    if result["meta"].get("text_results") and yours_text.is_file() and ref_text.is_file():
        text = (json.loads(yours_text.read_text()), json.loads(ref_text.read_text()))
    reference = json.loads(REFERENCE.read_text())
    return bios_report.comparison(result, reference, (out / "demo.json", REFERENCE), figures, text)


def _result(bios: BiosTrack, runs_dir: Path, phases: dict, benefit: list, text: bool) -> dict:
    """Everything demo.json holds: settings, time per phase, every run (the sweep's too), the
    sweep, both summaries and Fig. 4."""
    settings, specs, configs = bios.settings, bios.specs, bios.configs
    names = {s.name for s in specs}
    for s in bios.sweep_specs:
        if s.name not in names:
            s.group = "sweep"
    rows = collect(specs + [s for s in bios.sweep_specs if s.name not in names], runs_dir, configs)
    top, cfg0 = max(settings.budgets), configs[specs[0].name]
    return {
        "meta": {
            "settings": asdict(settings),
            "machine": machine_name(),
            "wall_seconds": 0.0,  # the whole demo (what `make demo` runs), set-up included
            "phase_seconds": phases,
            "catchup_seconds": None,  # the optional --catch-up runs
            "runs_trained": bios.trained,
            "model": asdict(cfg0.model),
            "params": LoopedTransformer(cfg0.model).num_params(),
            "full_budget_flops": cfg0.full_budget_flops,
            "batch_size": cfg0.batch_size,
            "seq_len": cfg0.seq_len,
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
    took = result["meta"]["phase_seconds"]
    print(
        f"wrote {out / 'demo.json'} and {len(paths)} figures in {figures} "
        f"({result['meta']['wall_seconds']:.0f}s; "
        + ", ".join(f"{k} {v:.0f}s" for k, v in took.items())
        + ")"
    )
    comparison = _comparison(result, out, figures)
    if comparison:
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
        return _run_demo(settings, out, figures, fresh, quiet, text)


def _run_demo(
    settings: DemoSettings,
    out: Path,
    figures: Path,
    fresh: bool,
    quiet: bool,
    text: FidelitySettings | None,
) -> dict:
    t0, phases = time.time(), {}
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    bios = train_bios(settings, runs_dir, fresh, quiet, phases)
    text_trained = 0
    if settings.text and text is not None:
        started = time.time()
        text = replace(
            text,
            seeds=settings.seeds,
            workers=settings.workers,
            chosen_lr=None if settings.sweep else text.chosen_lr,
        )
        text_trained = run_fidelity(
            text, runs_dir / "text", out / "demo_text.json", figures, fresh, quiet, prefix="text"
        )["meta"]["runs_trained"]
        phases["text"] = time.time() - started
    benefit = []
    if settings.probe:
        started = time.time()
        benefit = probe_benefit(bios.specs, runs_dir)
        phases["probe"] = time.time() - started
    started = time.time()
    extra = [s for s in bios.specs if s.group == "catchup"]
    trained_extra = execute(extra, bios.configs, runs_dir, settings.workers, fresh, quiet)
    catchup_seconds = time.time() - started if extra else None
    result = _result(bios, runs_dir, phases, benefit, settings.text and text is not None)
    result["meta"]["runs_trained"] += trained_extra
    result["meta"]["catchup_seconds"] = catchup_seconds
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    paths = bios_report.figures(result, figures)
    phases["figures"] = time.time() - started
    result["meta"]["wall_seconds"] = time.time() - t0 - (catchup_seconds or 0.0)
    if result["meta"]["runs_trained"] + text_trained == 0:
        keep_earlier_times(
            result["meta"], out / "demo.json", ("wall_seconds", "phase_seconds", "catchup_seconds")
        )
    write_result(out / "demo.json", result, say=False)
    if not quiet:
        _print_end(result, out, figures, paths)
    return result


def _without_time_to(argv: list[str]) -> list[str]:
    """The command line as a reader would type it: without where its timing was written."""
    out, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--time-to="):
            skip = False
            continue
        skip = arg == "--time-to"
        if not skip:
            out.append(arg)
    return out


def _parser() -> OverrideParser:
    parser = study_parser(
        "looped demo",
        __doc__,
        out="results directory: runs, demo.json, figures (default: runs/demo, or "
        "runs/demo-quick with --quick)",
        reference="the committed reference: results/demo.json and figures/, with the LR sweeps "
        "and the depth runs (--sweep --full) as the README shows them; then run `looped report`",
        quick="toy size, under a minute (what the tests run)",
        overrides=True,
        example="looped demo --quick --out runs/q model.d_model=48 --fresh",
    )
    parser.add_argument("--figures", default=None, help="figures directory (default: OUT/figures)")
    parser.add_argument("--seeds", type=int, help="seeds of both tracks (default 3)")
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="first sweep the LR of every schedule (both tracks, seed 0) and use each one's "
        "best; without it, the LRs the reference's sweep chose (roughly doubles the time)",
    )
    parser.add_argument("--no-text", action="store_true", help="the bios grid only (no text track)")
    parser.add_argument(
        "--full",
        action="store_true",
        help="also the depth-specialisation runs (Fig. 5): fixed K=1, 2, 8 beside the grid's "
        "K=4; the reference is run with it",
    )
    parser.add_argument(
        "--time-to",
        default=None,
        help="also write how long this demo took, phase by phase, to this JSON file (the "
        "README's timing line reads results/demo_time.json, written from a fresh clone)",
    )
    parser.add_argument(
        "--catch-up",
        default="",
        help="also train uniform at these multiples of the full budget (seed 0), e.g. 2,3: "
        "how much compute uniform needs to reach fixed-first (adds several minutes)",
    )
    parser.add_argument(
        "--fresh", action="store_true", help="retrain every run instead of reusing finished ones"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser


def _settings(args: Any) -> DemoSettings:
    """The bios track's settings from the command line (bad values refused, one line each)."""
    settings = QUICK if args.quick else DemoSettings()
    settings = DemoSettings(
        **{**asdict(settings), "overrides": settings.overrides + args.overrides}
    )
    if args.seeds is not None:
        if args.seeds < 1:
            raise UserError(f"--seeds {args.seeds} must be >= 1")
        settings.seeds = args.seeds
    if args.catch_up:
        try:
            settings.catch_up = tuple(float(x) for x in args.catch_up.split(","))
        except ValueError:
            raise UserError(
                f"--catch-up {args.catch_up!r}: give budget multiples such as 2,3"
            ) from None
        if any(b <= 1 for b in settings.catch_up):
            raise UserError(
                f"--catch-up {args.catch_up}: multiples must be above 1 (the grid already has 100%)"
            )
    if args.workers is not None:
        if args.workers < 1:
            raise UserError(f"--workers {args.workers} must be >= 1")
        settings.workers = args.workers
    settings.sweep, settings.text = args.sweep or args.reference, not args.no_text
    if args.full or args.reference:  # the reference shows Fig. 5 and the chosen LRs' sweeps
        settings.depth_ks = FULL_DEPTH_KS
    return settings


def expected_time(quick: bool, timing: Path = Path("results/demo_time.json")) -> str:
    """The demo's first line: how long the committed reference run took, and on what machine
    (finished runs are reused, so a rerun is quicker)."""
    if quick:
        return "looped demo --quick: every code path at toy size (a smoke test, not a result)"
    if not timing.is_file():
        return "looped demo: about ten minutes on a 2-core laptop CPU"
    t = json.loads(timing.read_text())
    return (
        f"looped demo: the reference took {t['wall_seconds'] / 60:.0f} minutes on "
        f"{t['machine']} ({t['dtype']}); finished runs in the output folder are reused"
    )


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = _settings(args)
    if args.print_config:  # the config every run starts from; seed, schedule and budget vary
        print(to_yaml(load_config(settings.preset, settings.overrides)), end="")
        return 0
    if args.reference and args.out:
        raise UserError("--reference writes results/ and figures/; leave out --out")
    if args.reference:
        out, figures = REFERENCE.parent, Path(args.figures or "figures")
    else:
        out = Path(args.out or ("runs/demo-quick" if args.quick else "runs/demo"))
        figures = Path(args.figures or out / "figures")
    text = replace(QUICK_TEXT if args.quick else TEXT)
    text.overrides = text.overrides + args.overrides
    if not args.quiet:
        print(expected_time(args.quick), flush=True)
    result = run_demo(settings, out, figures, fresh=args.fresh, quiet=args.quiet, text=text)
    if args.time_to:
        keys = ("machine", "dtype", "wall_seconds", "phase_seconds", "runs_trained")
        timing = {k: result["meta"][k] for k in keys} | {
            "command": " ".join(["looped demo", *_without_time_to(argv)]),
            "text_runs": len(json.loads((out / "demo_text.json").read_text())["runs"])
            if settings.text
            else 0,
        }
        write_result(Path(args.time_to), timing, say=False)
    return 0
