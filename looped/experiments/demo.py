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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped import paper
from looped.config import OverrideParser, TrainConfig, load_config, to_yaml
from looped.errors import UserError
from looped.eval.stats import beats_bigram, best_lrs, bios_summary, worst_nll
from looped.experiments.fidelity import QUICK as QUICK_FIDELITY
from looped.experiments.fidelity import FidelitySettings
from looped.experiments.runner import (
    RunSpec,
    before_branch,
    diverged,
    execute,
    keep_earlier_times,
    machine_name,
    read_metrics,
    train_wall,
)
from looped.paper import (
    FIXED,
    FIXED_FIRST,
    LABELS,
    MAIN_SCHEDULES,
    RECIPE_200M,
    RECIPES_1B,
    UNIFORM,
)
from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import pick_device, resolve_dtype
from looped.runtime.lock import dir_lock

# Each main schedule's peak LR on the bios track, as the reference's LR sweep chose it
# (`looped demo --reference`; tests/test_demo.py checks these against results/demo.json).
BIOS_LR = {FIXED: 1e-2, FIXED_FIRST: 1e-2, UNIFORM: 1e-2}
BUDGET_MINUTES = 12  # what a plain `make demo` may take on 2 CPU cores (the README's timing line)


@dataclass
class DemoSettings:
    preset: str = "demo"  # base training preset (looped/configs/demo.yaml)
    seeds: int = 3  # seeds for the main comparison (bands are min-max across them)
    budgets: tuple[float, ...] = (0.15, 0.45, 1.0)  # fractions of the full modeled-FLOP budget
    # fixed depths for the specialisation figure (Fig. 5, seed 0); `--full` sets FULL_DEPTH_KS
    depth_ks: tuple[int, ...] = ()
    depth_budget: float = 0.45  # budget of those runs (matched compute)
    # extra uniform budgets (seed 0) to see when uniform catches up
    catch_up: tuple[float, ...] = ()
    # each main schedule's peak LR (the depth runs use fixed K=4's)
    lr: dict[str, float] = field(default_factory=lambda: dict(BIOS_LR))
    # LR sweep first (both tracks: every main schedule at every LR, seed 0), then each
    # schedule's best LR; off, the LRs above and the text track's chosen ones are used
    sweep: bool = False
    sweep_lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2, 3e-2)  # the sweep's LRs (about 3x apart)
    text: bool = True  # the text track (held-out text NLL, the paper's metric) after the grid
    probe: bool = True  # the paper's Fig. 4 at fixed K=4's checkpoints (seed 0)
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


FULL_DEPTH_KS = (1, 2, 4, 8)  # `looped demo --full`: the depth-specialisation runs (Fig. 5)

# The text track at demo size: one looped layer of width 64 on the standard library's source,
# 150 steps of 16x128 tokens, each schedule at the LR the reference's sweep chose (`looped
# fidelity` is the same track at a chosen size, with the scale study). bpe:2048, not 4096: in so
# narrow a model a 4096-token head costs as much as ~4 loops per token, far more than the head's
# share in the paper's models, and made the demo ~90 s slower.
# The LRs the reference's sweep chose on the leak-free split (validation NLL, mean of 2 seeds):
TEXT_LR = {UNIFORM: 3e-3, RECIPE_200M: 3e-3, RECIPES_1B[1]: 3e-3, FIXED: 3e-3}
TEXT = FidelitySettings(
    tokenizer="bpe:2048", d_model=64, steps=150, batch_size=16, eval_batches=12, seeds=3,
    lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2), chosen_lr=dict(TEXT_LR),
)  # fmt: skip
QUICK_TEXT = replace(QUICK_FIDELITY, chosen_lr=dict(TEXT_LR))  # toy size, pydoc corpus

QUICK = DemoSettings(  # the full grid at toy size: every code path in well under a minute
    preset="demo",
    seeds=2,
    depth_ks=FULL_DEPTH_KS,
    overrides=[
        "model.d_model=32", "model.n_head=2", "model.seq_len=64", "seq_len=64", "batch_size=8",
        "data.persons=16", "max_steps=60", "optim.warmup_steps=10", "eval_batches=1", "dtype=fp32",
    ],
)  # fmt: skip


def base_config(
    settings: DemoSettings, seed: int, schedule: str, budget: float, lr: float | None = None
) -> TrainConfig:
    overrides = settings.overrides + [
        f"seed={seed}",
        f"schedule={schedule}",
        f"budget_frac={budget}",
    ]
    if lr is not None:
        overrides.append(f"optim.lr={lr}")
    cfg = load_config(settings.preset, overrides)
    cfg.dtype = resolve_dtype(cfg.dtype, pick_device(cfg.device))  # as the trainer will
    return cfg


def resolve_budget(settings: DemoSettings) -> tuple[float, int]:
    """(full budget in modeled FLOPs, vocabulary size): the full budget is `full_steps` steps of
    fixed K=4, with the model's vocabulary set from the corpus the preset describes."""
    from looped.data.batching import build_source
    from looped.flops import flops_per_token, tokens_per_step
    from looped.model import fit_vocab

    cfg = load_config(settings.preset, settings.overrides)
    vocab = build_source(cfg.data).vocab_size
    cfg.model.vocab_size = fit_vocab(cfg.model.vocab_size, vocab)
    if cfg.full_budget_flops > 0:
        return cfg.full_budget_flops, cfg.model.vocab_size
    steps = cfg.max_steps or 60
    return steps * tokens_per_step(cfg) * flops_per_token(
        cfg.model, 4, cfg.seq_len
    ), cfg.model.vocab_size


def lr_of(settings: DemoSettings, schedule: str) -> float:
    """A schedule's peak LR: its own for the main schedules, fixed K=4's for other fixed K."""
    return settings.lr.get(schedule, settings.lr[FIXED])


def plan(settings: DemoSettings) -> tuple[list[RunSpec], dict[str, TrainConfig]]:
    """Every run of the grid, with its step count, parent and branch step.

    Per seed: each main schedule at each budget (equal FLOPs), fixed-first and fixed K=4 at
    uniform's full-budget steps (equal tokens, group "tokens"); seed 0 also gets the depth
    runs and the catch-up runs. A run branches off the root run of its seed (one trained from
    scratch) with which it shares the longest prefix: same LR, depths and batches."""
    from looped.schedules import parse_schedule
    from looped.training.trainer import branch_point, total_steps_for

    full, vocab = resolve_budget(settings)
    specs: dict[str, RunSpec] = {}
    configs: dict[str, TrainConfig] = {}

    def add(spec: RunSpec, steps: int = 0) -> RunSpec:
        if spec.name in specs:
            if spec.group not in specs[spec.name].group:
                specs[spec.name].group += "+" + spec.group
            return specs[spec.name]
        cfg = base_config(
            settings, spec.seed, spec.schedule, spec.budget, lr_of(settings, spec.schedule)
        )
        cfg.full_budget_flops, cfg.model.vocab_size, cfg.max_steps = full, vocab, 0
        if steps:  # a run of given steps (equal tokens), not of a budget
            cfg.budget_frac, cfg.max_steps = 0.0, steps
        spec.steps = total_steps_for(cfg)
        specs[spec.name], configs[spec.name] = spec, cfg
        roots = [
            r for r in specs.values() if r.seed == spec.seed and not r.parent and r is not spec
        ]
        best = max(
            ((branch_point(cfg, spec.steps, configs[r.name], r.steps), -i, r)
             for i, r in enumerate(roots)),
            default=(0, 0, None), key=lambda t: t[:2],
        )  # fmt: skip
        at, _, parent = best
        if parent is not None and at >= max(2, spec.steps // 10):  # a few shared steps: not worth
            spec.parent, spec.branch_step = parent.name, at  # waiting for the parent
            if at not in parent.save_steps:
                parent.save_steps.append(at)
        return spec

    def name(schedule: str, budget: float | str, seed: int) -> str:
        return _name(schedule, budget, seed, lr_of(settings, schedule))

    top = max(settings.budgets)
    for seed in range(settings.seeds):
        for s in (FIXED, UNIFORM, FIXED_FIRST):  # roots first: the others branch off them
            add(RunSpec(name(s, top, seed), s, top, seed, "main"))
        for schedule in MAIN_SCHEDULES:
            for budget in settings.budgets:
                spec = add(RunSpec(name(schedule, budget, seed), schedule, budget, seed, "main"))
                if schedule == FIXED_FIRST:  # an evaluation just before the switch
                    switch = parse_schedule(schedule, seed).switch_step(spec.steps)
                    at_switch = spec.parent and spec.branch_step == switch
                    (specs[spec.parent] if at_switch else spec).eval_steps.append(switch)
        uniform_steps = specs[name(UNIFORM, top, seed)].steps
        for schedule in (FIXED_FIRST, FIXED):  # equal tokens: uniform's full-budget steps
            spec = RunSpec(name(schedule, "tok", seed), schedule, 0.0, seed, "tokens")
            add(spec, steps=uniform_steps)
        if seed == 0:
            for k in settings.depth_ks:
                schedule = f"fixed:{k}"
                budget = settings.depth_budget
                add(RunSpec(name(schedule, budget, seed), schedule, budget, seed, "depth"))
            for budget in sorted(b for b in settings.catch_up if b > top):  # after the grid
                add(RunSpec(name(UNIFORM, budget, seed), UNIFORM, budget, seed, "catchup"))
    if settings.probe:  # Fig. 4's checkpoints: where each fixed-first run switches
        specs[name(FIXED, top, 0)].save_steps += _probe_steps(list(specs.values()))
    for spec in specs.values():
        spec.eval_steps = sorted(set(spec.eval_steps))
        spec.save_steps = sorted(set(spec.save_steps))
    return list(specs.values()), configs


def _name(schedule: str, budget: float | str, seed: int, lr: float) -> str:
    short = {FIXED_FIRST: "fixed_first", UNIFORM: "uniform"}.get(
        schedule, schedule.replace(":", "").replace("fixed", "fixed_k")
    )
    size = budget if isinstance(budget, str) else f"b{round(budget * 100):03d}"
    return f"{short}_{size}_lr{lr:g}_s{seed}"


# -- collecting results ----------------------------------------------------------------------
def collect(specs: list[RunSpec], runs_dir: Path, configs: dict[str, TrainConfig]) -> list[dict]:
    """Per run: schedule, budget, seed, modeled FLOPs, wall seconds (a branch counts its parent's
    time up to the branch), NLL / bits / two-hop per depth, the training curve, pre-switch eval.

    `flops` is the schedule's modeled compute (the exact expectation over sampled depths, which is
    what budgets match); `flops_sampled` sums the depths this seed actually drew.
    """
    from looped.flops import schedule_flops, tokens_per_step
    from looped.schedules import parse_schedule

    rows = []
    for spec in specs:
        if diverged(runs_dir / spec.name):  # a sweep run whose LR was too high: no numbers
            continue
        cfg = configs[spec.name]
        metrics = read_metrics(runs_dir / spec.name)
        summary = json.loads((runs_dir / spec.name / "summary.json").read_text())
        train = [m for m in metrics if m["kind"] == "train"]
        evals = [m for m in metrics if m["kind"] == "eval"]
        curve = [[m["step"], m["loss"], m["depth"]] for m in train]
        wall = train_wall(train[-1]) if train else 0.0
        pre_switch = None
        if spec.parent:
            parent = before_branch(runs_dir, spec)
            ptrain = [m for m in parent if m["kind"] == "train"]
            curve = [[m["step"], m["loss"], m["depth"]] for m in ptrain] + curve
            wall += train_wall(ptrain[-1]) if ptrain else 0.0
            evals = [
                m for m in parent if m["kind"] == "eval" and m["step"] == spec.branch_step
            ] + evals
        switch = summary.get("switch_step")
        pre = [m for m in evals if switch and m["step"] == switch]
        pre_switch = eval_row(pre[0]) if pre else None
        final = eval_row(evals[-1])
        rows.append({
            "name": spec.name, "schedule": spec.schedule, "label": paper.label(spec.schedule),
            "budget": spec.budget, "seed": spec.seed, "group": spec.group, "steps": spec.steps,
            "lr": cfg.optim.lr, "switch_step": summary.get("switch_step"), "wall": wall, "flops_sampled": summary["flops"],
            "flops": schedule_flops(cfg.model, parse_schedule(spec.schedule, spec.seed), spec.steps, tokens_per_step(cfg), cfg.seq_len),
            "parent": spec.parent, "branch_step": spec.branch_step or None,
            **final, "pre_switch": pre_switch, "curve": curve,
        })  # fmt: skip
    return rows


def eval_row(record: dict) -> dict:
    """Per-depth numbers of one evaluation record.

    `fact_nll` (bios data only) is the summed next-token loss on each attribute value in a
    held-out template sentence, averaged over persons and the six attributes (nats per fact). It
    tracks knowledge; the `token_nll` of whole held-out-template biographies (nats per token) is
    dominated by the unseen template words and rises as a small model fits its training templates.
    """
    from looped.eval.evaluate import token_nll_of

    token_nll = token_nll_of(record)
    depths = sorted(int(k) for k in token_nll)
    row: dict[str, Any] = {"depths": depths}
    recall = record.get("recall")
    if recall:
        row["fact_nll"] = [
            float(np.mean([a["nll"] for a in recall[str(k)]["attributes"].values()]))
            for k in depths
        ]
    row["token_nll"] = [token_nll[str(k)] for k in depths]
    if recall:
        row["bits"] = [recall[str(k)]["bits_per_person"] for k in depths]
        row["full_bits"] = recall[str(depths[0])].get("full_bits_per_person")
        row["exact"] = [
            float(np.mean([a["acc"] for a in recall[str(k)]["attributes"].values()]))
            for k in depths
        ]
        two_hop = [recall[str(k)].get("two_hop") for k in depths]
        if all(two_hop):
            row["two_hop_acc"] = [t["acc"] for t in two_hop]
            row["two_hop_nll"] = [t["nll"] for t in two_hop]
        row["attributes"] = {str(k): recall[str(k)].get("attributes") for k in depths}
    return row


def format_summary(table: list[dict]) -> str:
    """A summary table as markdown: seed means, the seed range of the mean fact NLL and the
    per-seed range of the difference from uniform (paired by seed)."""
    lines = [
        "| schedule | LR | steps | compute vs uniform | wall-clock vs uniform | mean fact NLL K=1..16 (seed range) | vs uniform | per-seed range | bits/person K=1 | K=4 | K=8 | K=16 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        bits = [f"{r['bits'].get(str(k), float('nan')):.1f}" for k in (1, 4, 8, 16)]
        n, v = r.get("fact_nll"), r.get("vs_uniform_by_seed")
        nll = f"{r['mean_fact_nll']:.3f}" + (f" ({n['min']:.3f}-{n['max']:.3f})" if n else "")
        per_seed = f"{v['min']:+.1%} to {v['max']:+.1%}" if v else "-"
        lr = f"{r['lr']:g}" if r.get("lr") else "-"
        lines.append(
            f"| {r['label']} | {lr} | {r['steps']} | {r['compute_vs_uniform']:.2f}x | {r['wall_vs_uniform']:.2f}x | {nll} | {r['fact_nll_vs_uniform']:+.1%} | {per_seed} | "
            + " | ".join(bits)
            + " |"
        )
    return "\n".join(lines)


REFERENCE = Path("results") / "demo.json"  # the committed reference, relative to the repository
COMPARED = (  # (summary key, label, format of a value, format of a difference)
    ("steps", "steps", "{:.0f}", "{:+.0f}"),
    ("compute_vs_uniform", "compute vs uniform", "{:.2f}x", "{:+.2f}"),
    ("wall_vs_uniform", "wall-clock vs uniform", "{:.2f}x", "{:+.2f}"),
    ("mean_fact_nll", "mean fact NLL K=1..16", "{:.3f}", "{:+.3f}"),
    ("fact_nll_vs_uniform", "fact NLL vs uniform", "{:+.1%}", "{:+.1%}"),
    ("bits.1", "bits/person K=1", "{:.1f}", "{:+.1f}"),
    ("bits.4", "bits/person K=4", "{:.1f}", "{:+.1f}"),
    ("bits.8", "bits/person K=8", "{:.1f}", "{:+.1f}"),
    ("bits.16", "bits/person K=16", "{:.1f}", "{:+.1f}"),
)


def _cell(row: dict, key: str) -> float:
    if key.startswith("bits."):
        return float(row.get("bits", {}).get(key.split(".")[1], float("nan")))
    return float(row.get(key, float("nan")))


def compare_summaries(yours: list[dict], reference: list[dict]) -> str:
    """Your full-budget table beside the reference's: one row per schedule and measure, with
    yours minus the reference's in the last column."""
    lines = [
        "| schedule | measure | yours | reference | difference |",
        "|---|---|---:|---:|---:|",
    ]
    ref = {r["schedule"]: r for r in reference}
    for row in yours:
        other = ref.get(row["schedule"])
        for key, label, fmt, diff_fmt in COMPARED:
            a = _cell(row, key)
            b = _cell(other, key) if other else float("nan")
            lines.append(
                f"| {row['label']} | {label} | {fmt.format(a)} | "
                + (f"{fmt.format(b)} | {diff_fmt.format(a - b)} |" if other else "- | - |")
            )
    return "\n".join(lines)


def compare_text(yours: dict, reference: dict) -> str:
    """Your text track beside the reference's: per basis and schedule, the seed-mean NLL and
    its difference from uniform, with yours minus the reference's."""
    lines = [
        "| basis | schedule | measure | yours | reference | difference |",
        "|---|---|---|---:|---:|---:|",
    ]
    for basis, key in (("equal tokens", "equal_tokens"), ("equal FLOPs", "equal_flops")):
        ref = {r["schedule"]: r for r in reference.get(key, [])}
        for row in yours.get(key, []):
            other = ref.get(row["schedule"])
            cells = (
                ("mean NLL K=1..16", row["mean_nll"]["mean"],
                 other["mean_nll"]["mean"] if other else None, "{:.3f}", "{:+.3f}"),
                ("vs uniform", row["vs_uniform"], other["vs_uniform"] if other else None,
                 "{:+.1%}", "{:+.1%}"),
            )  # fmt: skip
            for measure, a, b, fmt, diff in cells:
                theirs = f"{fmt.format(b)} | {diff.format(a - b)}" if b is not None else "- | -"
                lines.append(
                    f"| {basis} | {row['label']} | {measure} | {fmt.format(a)} | {theirs} |"
                )
    return "\n".join(lines)


def text_note(result: dict) -> list[str]:
    """What the text track can say at the demo's budget: when its models lose to a bigram
    table on the same windows, nothing about the paper's claim, and where the answer is."""
    base = result.get("baselines")
    if not base or beats_bigram(result, base):
        return []
    worst = worst_nll(result["equal_tokens"])
    return [
        f"(your text models score worse than a bigram count table on the same windows: worst "
        f"seed {worst:.2f} vs bigram {base['bigram']:.2f} nats/token. At the demo's budget the "
        "text track cannot speak to the paper's claim; `looped length` trains long enough to, "
        "and docs/RESULTS.md shows its committed results.)"
    ]


def _settings_that_change_the_table(yours: dict, reference: dict) -> list[str]:
    """Settings that differ and bear on the full-budget table; the number of workers and the
    optional catch-up runs (not in the table) do not."""
    ignored = {"workers", "catch_up", "sweep", "sweep_lrs", "text", "probe", "depth_ks"}
    yours, reference = json.loads(json.dumps(yours)), json.loads(json.dumps(reference))
    return [
        k
        for k in sorted(set(yours) | set(reference))
        if k not in ignored and yours.get(k) != reference.get(k)
    ]


def _comparison(result: dict, out: Path, figures: Path) -> str:
    """What `looped demo` prints at the end: its table beside the reference's, and where its
    figures are. Nothing when the reference is missing or is what this run wrote."""
    if not REFERENCE.is_file() or (out / "demo.json").resolve() == REFERENCE.resolve():
        return ""
    reference = json.loads(REFERENCE.read_text())
    text = [
        f"\nYour demo ({out / 'demo.json'}) beside the reference ({REFERENCE}, measured on "
        f"{reference['meta']['machine']}), full budget, seed means:",
        compare_summaries(result["summary"], reference["summary"]),
    ]
    ours, theirs = result["meta"].get("dtype"), reference["meta"].get("dtype")
    if ours != theirs:
        text.append(
            f"(you trained in {ours}, the reference in {theirs}: dtype=auto picks bf16 only "
            "where the CPU has a bf16 path, so expect small differences from rounding)"
        )
    differ = _settings_that_change_the_table(
        result["meta"]["settings"], reference["meta"]["settings"]
    )
    if differ:
        text.append(
            f"(your {', '.join(differ)} differ from the reference's: the differences show the "
            "change, not a reproduction check)"
        )
    yours_text, ref_text = out / "demo_text.json", REFERENCE.parent / "demo_text.json"
    if result["meta"].get("text_results") and yours_text.is_file() and ref_text.is_file():
        yours, theirs = json.loads(yours_text.read_text()), json.loads(ref_text.read_text())
        text += [
            "\nYour text track beside the reference's, seed means:",
            compare_text(yours, theirs),
            *text_note(yours),
        ]
        if "test" not in theirs["meta"]["corpus"] and "test" in yours["meta"]["corpus"]:
            text.append(
                "(the reference's text track was measured on the older train/val split, scored "
                "on the windows that chose its LRs; yours on test windows of the leak-free "
                "split: the differences show that change, not a reproduction check)"
            )
    text.append(
        f"Your figures: {figures}/ (the reference's: figures/). "
        f"README sections from your numbers: looped report --results {out / 'demo.json'}"
    )
    return "\n".join(text)


# -- entry point -----------------------------------------------------------------------------
def sweep_plan(settings: DemoSettings) -> tuple[list[RunSpec], dict[str, TrainConfig]]:
    """The bios LR sweep's runs: seed 0's grid (main schedules, every budget, the equal-token
    runs, Fig. 4's checkpoints) at each LR of `sweep_lrs`. At the LR a schedule then uses, these
    are exactly the grid's seed-0 runs (same names, configs and checkpoints), so none is
    trained twice."""
    specs: list[RunSpec] = []
    configs: dict[str, TrainConfig] = {}
    for lr in settings.sweep_lrs:
        one = replace(
            settings, seeds=1, lr=dict.fromkeys(MAIN_SCHEDULES, lr), depth_ks=(), catch_up=()
        )
        s, c = plan(one)
        specs += [x for x in s if x.name not in configs]
        configs.update(c)
    for spec in specs:
        spec.may_diverge = True
    return specs, configs


def merge_sweep(specs: list[RunSpec], sweep: list[RunSpec]) -> list[RunSpec]:
    """The grid with its seed-0 runs replaced by the sweep's runs of the same name (trained
    already, maybe branching off another run than the grid would pick: fixed-first off fixed K=4
    when the two LRs differ but both were swept). A checkpoint a grid run needs is added."""
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
) -> tuple[list[RunSpec], dict[str, TrainConfig], list[dict], dict[str, float], int]:
    """Train the sweep; each main schedule's best LR by mean fact NLL over K=1..16 at the full
    budget (ties: the smaller LR); the last item is how many runs it trained."""
    specs, configs = sweep_plan(settings)
    if not quiet:
        print(f"looped demo: bios LR sweep: {len(specs)} runs, LRs {settings.sweep_lrs}")
    trained = execute(specs, configs, runs_dir, settings.workers, fresh, quiet)
    rows = collect(specs, runs_dir, configs)
    top = max(settings.budgets)
    sweep = [
        {"schedule": r["schedule"], "label": r["label"], "lr": r["lr"],
         "mean_nll": float(np.mean(r["fact_nll"])), "fact_nll": r["fact_nll"]}
        for r in rows if r["budget"] == top and "main" in r["group"]
    ]  # fmt: skip
    sweep += [  # an LR at which the full-budget run diverged: a result, never the best
        {"schedule": s.schedule, "label": LABELS[s.schedule], "lr": configs[s.name].optim.lr,
         "mean_nll": None, "diverged": True}
        for s in specs if s.budget == top and "main" in s.group and diverged(runs_dir / s.name)
    ]  # fmt: skip
    best = best_lrs([r for r in sweep if r["mean_nll"] is not None])
    return specs, configs, sweep, best, trained


def probe_benefit(specs: list[RunSpec], runs_dir: Path) -> list[dict]:
    """The paper's Fig. 4 at seed 0's full-budget fixed K=4 run: at each checkpoint where a
    fixed-first run switches, NLL at every serving depth after one K=4 update minus after one
    K=16 update (`probes.update_benefit`)."""
    from looped.experiments.probes import update_benefit

    fixed = _fixed_root(specs)
    keys = ("step", "shallow", "deep", "depths", "benefit", "mean_benefit")
    return [
        {k: r[k] for k in keys}
        for r in (
            update_benefit(runs_dir / fixed.name / "checkpoints" / f"step_{s:07d}",
                           list(range(1, 17)), n_batches=2)
            for s in _probe_steps(specs)
        )
    ]  # fmt: skip


def _fixed_root(specs: list[RunSpec]) -> RunSpec:
    top = max(s.budget for s in specs if "main" in s.group)
    return next(
        s
        for s in specs
        if s.schedule == FIXED and s.seed == 0 and s.budget == top and "main" in s.group
    )


def _probe_steps(specs: list[RunSpec]) -> list[int]:
    from looped.schedules import parse_schedule

    return sorted({
        parse_schedule(s.schedule, 0).switch_step(s.steps)
        for s in specs if s.schedule == FIXED_FIRST and s.seed == 0 and "main" in s.group
    })  # fmt: skip


@dataclass
class _Bios:
    """What the bios phases leave for the rest of the demo."""

    settings: DemoSettings  # with each schedule's LR (the sweep's choice, with --sweep)
    specs: list[RunSpec]  # the grid (with the sweep's runs it reuses)
    configs: dict[str, TrainConfig]
    sweep_specs: list[RunSpec]  # every run of the sweep
    sweep: list[dict]  # the sweep's full-budget results, per schedule and LR
    trained: int  # runs trained (reused ones not counted)


def _bios(
    settings: DemoSettings, runs_dir: Path, fresh: bool, quiet: bool, phases: dict[str, float]
) -> _Bios:
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
    return _Bios(settings, specs, configs, sweep_specs, sweep, trained)


def _result(bios: _Bios, runs_dir: Path, phases: dict, benefit: list, text: bool) -> dict:
    """Everything demo.json holds: settings, time per phase, every run (the sweep's too), the
    sweep, both summaries and Fig. 4."""
    from looped.model import LoopedTransformer

    settings, specs, configs = bios.settings, bios.specs, bios.configs
    names = {s.name for s in specs}
    for s in bios.sweep_specs:
        if s.name not in names:
            s.group = "sweep"
    rows = collect(specs + [s for s in bios.sweep_specs if s.name not in names], runs_dir, configs)
    top, cfg0 = max(settings.budgets), configs[specs[0].name]
    return {
        "meta": {
            "settings": asdict(settings), "machine": machine_name(),
            "wall_seconds": 0.0,  # the whole demo (what `make demo` runs), set-up included
            "phase_seconds": phases,
            "catchup_seconds": None,  # the optional --catch-up runs
            "runs_trained": bios.trained, "model": asdict(cfg0.model),
            "params": LoopedTransformer(cfg0.model).num_params(),
            "full_budget_flops": cfg0.full_budget_flops, "batch_size": cfg0.batch_size,
            "seq_len": cfg0.seq_len, "dtype": cfg0.dtype, "persons": cfg0.data.persons,
            "nll_label": "fact NLL (nats per fact, held-out templates)",
            "text_results": "demo_text.json" if text else None,
        },
        "runs": rows, "sweep": bios.sweep, "chosen_lr": dict(settings.lr),
        "summary": bios_summary(rows, top),
        "summary_tokens": bios_summary(rows, top, tokens=True),
        "update_benefit": benefit,
    }  # fmt: skip


def _draw(result: dict, figures: Path) -> list[Path]:
    """The bios figures, the LR sweep's (with --sweep) and Fig. 4."""
    from looped.experiments.fidelity import fig_lr_sweep
    from looped.experiments.probes import plot_benefit
    from looped.report import plots

    paths = plots.demo_figures(result, figures)
    if result["sweep"]:
        view = {"meta": {"settings": {"schedules": list(MAIN_SCHEDULES)}},
                "sweep": result["sweep"], "chosen_lr": result["chosen_lr"]}  # fmt: skip
        paths.append(fig_lr_sweep(
            view, figures / "demo_lr_sweep.png", "mean fact NLL, K=1..16",
            "Bios LR sweep (seed 0, full FLOP budget; circled: chosen)",
        ))  # fmt: skip
    if result["update_benefit"]:
        ints = [dict(r, benefit={int(k): v for k, v in r["benefit"].items()})
                for r in result["update_benefit"]]  # fmt: skip
        paths.append(plot_benefit(ints, figures / "fig4_update_benefit.png"))
    return paths


def _print_end(result: dict, out: Path, figures: Path, paths: list[Path]) -> None:
    print("\nBios track, equal FLOPs (full budget):")
    print(format_summary(result["summary"]))
    print("\nBios track, equal tokens (uniform's full-budget steps):")
    print(format_summary(result["summary_tokens"]))
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
    from looped.experiments.fidelity import run_fidelity

    t0, phases = time.time(), {}
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    bios = _bios(settings, runs_dir, fresh, quiet, phases)
    text_trained = 0
    if settings.text and text is not None:
        started = time.time()
        text = replace(text, seeds=settings.seeds, workers=settings.workers,
                       chosen_lr=None if settings.sweep else text.chosen_lr)  # fmt: skip
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
    paths = _draw(result, figures)
    phases["figures"] = time.time() - started
    result["meta"]["wall_seconds"] = time.time() - t0 - (catchup_seconds or 0.0)
    if result["meta"]["runs_trained"] + text_trained == 0:
        keep_earlier_times(
            result["meta"], out / "demo.json", ("wall_seconds", "phase_seconds", "catchup_seconds")
        )
    write_text_atomic(out / "demo.json", json.dumps(result, indent=1))
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


def main(argv: list[str]) -> int:
    parser = OverrideParser(
        prog="looped demo",
        description=__doc__.splitlines()[0],
        overrides_help="config overrides for every run",
        epilog="example: looped demo --quick --out runs/q model.d_model=48 --fresh",
    )
    parser.add_argument(
        "--quick", action="store_true", help="toy size, under a minute (what the tests run)"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="results directory: runs, demo.json, figures (default: runs/demo, or "
        "runs/demo-quick with --quick)",
    )
    parser.add_argument("--figures", default=None, help="figures directory (default: OUT/figures)")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="regenerate the committed reference: results/demo.json and figures/, with the LR "
        "sweeps and the depth runs (--sweep --full) as the README shows them; then run "
        "`looped report`",
    )
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
    parser.add_argument("--workers", type=int, help="worker processes (default 2)")
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
    args = parser.parse_args(argv)
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
    if args.print_config:  # the config every run starts from; seed, schedule and budget vary
        print(to_yaml(load_config(settings.preset, settings.overrides)), end="")
        return 0
    if args.reference and (args.out or args.quick):
        raise UserError("--reference writes results/ and figures/; leave out --out and --quick")
    if args.reference:
        out, figures = REFERENCE.parent, Path(args.figures or "figures")
    else:
        out = Path(args.out or ("runs/demo-quick" if args.quick else "runs/demo"))
        figures = Path(args.figures or out / "figures")
    settings.sweep, settings.text = args.sweep or args.reference, not args.no_text
    if args.full or args.reference:  # the reference shows Fig. 5 and the chosen LRs' sweeps
        settings.depth_ks = FULL_DEPTH_KS
    text = replace(QUICK_TEXT if args.quick else TEXT)
    text.overrides = text.overrides + args.overrides
    result = run_demo(settings, out, figures, fresh=args.fresh, quiet=args.quiet, text=text)
    if args.time_to:
        keys = ("machine", "dtype", "wall_seconds", "phase_seconds", "runs_trained")
        timing = {k: result["meta"][k] for k in keys} | {
            "command": " ".join(["looped demo", *_without_time_to(argv)]),
            "text_runs": len(json.loads((out / "demo_text.json").read_text())["runs"])
            if settings.text
            else 0,
        }
        write_text_atomic(Path(args.time_to), json.dumps(timing, indent=1))
    return 0
