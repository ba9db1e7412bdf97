"""The scaled-down reproduction: a grid of small looped models on synthetic biographies.

    looped demo                  # ~10 minutes on a 2-core laptop: runs/demo/ (runs, demo.json,
                                 # figures), then its table beside the reference's
    looped demo --quick          # the same code path at toy size, under a minute: runs/demo-quick/
    looped demo --out DIR        # write runs, results and figures under DIR
    looped demo --fresh          # retrain instead of reusing finished runs
    looped demo --reference      # regenerate the committed reference: results/demo.json, figures/
                                 # (then `looped report` to update the README)

The committed results/demo.json and figures/ are the reference that the README and notebook 05
show; a plain `looped demo` never writes them (runs/ is not tracked), so `make demo` and
`make test` pass in either order.

The grid (per seed): fixed K=4, fixed-first (K=4 for 80%, then uniform 1..16) and uniform 1..16,
each at 15%, 45% and 100% of the full modeled-FLOP budget, plus fixed K=1, 2, 8 for the
depth-specialisation figure. Every run is evaluated at serving depths 1..16 (next-token NLL on
held-out templates, recalled bits per person, two-hop recall).

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
import multiprocessing as mp
import os
import queue as queue_lib
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from looped import paper
from looped.atomic import write_text_atomic
from looped.config import OverrideParser, TrainConfig, load_config, to_yaml
from looped.device import pick_device, resolve_dtype
from looped.errors import UserError
from looped.paper import FIXED, FIXED_FIRST, LABELS, MAIN_SCHEDULES, UNIFORM


@dataclass
class DemoSettings:
    preset: str = "demo"  # base training preset (looped/configs/demo.yaml)
    seeds: int = 2  # seeds for the main comparison (bands are min-max across them)
    budgets: tuple[float, ...] = (0.15, 0.45, 1.0)  # fractions of the full modeled-FLOP budget
    depth_ks: tuple[int, ...] = (1, 2, 4, 8)  # fixed depths for the specialisation figure
    depth_budget: float = 0.45  # budget of those runs (matched compute)
    # extra uniform budgets (seed 0) to see when uniform catches up
    catch_up: tuple[float, ...] = ()
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


QUICK = DemoSettings(  # the same grid at toy size: every code path in well under a minute
    preset="demo",
    seeds=2,
    overrides=[
        "model.d_model=32", "model.n_head=2", "model.seq_len=64", "seq_len=64", "batch_size=8",
        "data.persons=16", "max_steps=60", "optim.warmup_steps=10", "eval_batches=1", "dtype=fp32",
    ],
)  # fmt: skip


@dataclass
class RunSpec:
    name: str  # directory name under runs/
    schedule: str  # depth schedule spec
    budget: float  # fraction of the full budget
    seed: int
    group: str  # "main" (Fig. 1, 2, 3, 8), "depth" (Fig. 5) or "catchup" (uniform beyond 100%)
    steps: int = 0  # total optimizer steps (from the budget)
    parent: str | None = None  # run this one branches off
    branch_step: int = 0  # step of the parent checkpoint it continues
    save_steps: list[int] = field(default_factory=list)  # checkpoints its children need
    eval_steps: list[int] = field(default_factory=list)  # extra evaluations (before the switch)


def base_config(settings: DemoSettings, seed: int, schedule: str, budget: float) -> TrainConfig:
    overrides = settings.overrides + [
        f"seed={seed}",
        f"schedule={schedule}",
        f"budget_frac={budget}",
    ]
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


def plan(settings: DemoSettings) -> tuple[list[RunSpec], dict[str, TrainConfig]]:
    """Every run of the grid, with its step count, parent and branch step."""
    from looped.schedules import parse_schedule
    from looped.train import branch_point, total_steps_for

    full, vocab = resolve_budget(settings)
    specs: dict[str, RunSpec] = {}
    configs: dict[str, TrainConfig] = {}

    def add(spec: RunSpec) -> RunSpec:
        cfg = base_config(settings, spec.seed, spec.schedule, spec.budget)
        cfg.full_budget_flops, cfg.model.vocab_size, cfg.max_steps = full, vocab, 0
        spec.steps = total_steps_for(cfg)
        specs[spec.name], configs[spec.name] = spec, cfg
        return spec

    def attach(spec: RunSpec, parent: RunSpec) -> int:
        """Branch `spec` off `parent` where their runs agree; returns the branch step (0: none)."""
        at = branch_point(configs[spec.name], spec.steps, configs[parent.name], parent.steps)
        if at > 0:
            spec.parent, spec.branch_step = parent.name, at
            parent.save_steps.append(at)
        return at

    top = max(settings.budgets)
    for seed in range(settings.seeds):
        parents = {
            s: add(RunSpec(_name(s, top, seed), s, top, seed, "main")) for s in (FIXED, UNIFORM)
        }
        for schedule in MAIN_SCHEDULES:
            for budget in settings.budgets:
                name = _name(schedule, budget, seed)
                if name in specs:
                    continue
                spec = add(RunSpec(name, schedule, budget, seed, "main"))
                at = attach(spec, parents[UNIFORM if schedule == UNIFORM else FIXED])
                if schedule == FIXED_FIRST:  # an evaluation just before the switch
                    switch = parse_schedule(schedule, seed).switch_step(spec.steps)
                    (
                        specs[spec.parent] if spec.parent and at == switch else spec
                    ).eval_steps.append(switch)
        if seed == 0:
            for k in settings.depth_ks:
                schedule = f"fixed:{k}"
                name = _name(schedule, settings.depth_budget, seed)
                if name in specs:
                    specs[name].group = "main+depth"
                    continue
                spec = add(RunSpec(name, schedule, settings.depth_budget, seed, "depth"))
                if schedule == FIXED and settings.depth_budget < top:
                    attach(spec, parents[FIXED])
            longer = sorted((b for b in settings.catch_up if b > top), reverse=True)
            for budget in longer:  # the longest from scratch, shorter ones branch off it
                spec = add(RunSpec(_name(UNIFORM, budget, seed), UNIFORM, budget, seed, "catchup"))
                if budget != longer[0]:
                    attach(spec, specs[_name(UNIFORM, longer[0], seed)])
    return list(specs.values()), configs


def _name(schedule: str, budget: float, seed: int) -> str:
    short = {FIXED_FIRST: "fixed_first", UNIFORM: "uniform"}.get(
        schedule, schedule.replace(":", "").replace("fixed", "fixed_k")
    )
    return f"{short}_b{round(budget * 100):03d}_s{seed}"


# -- execution -------------------------------------------------------------------------------
def progress_mode() -> str:
    """How to report progress where the output goes: "notebook" (tqdm widgets in a Jupyter
    kernel), "terminal" (tqdm bars when stderr is a terminal) or "lines" (one plain line per
    finished run: a log file or CI gets no escape-code redraws)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and "IPKernelApp" in shell.config:
            return "notebook"
    except ImportError:
        pass
    isatty = getattr(sys.stderr, "isatty", None)
    return "terminal" if isatty and isatty() else "lines"


def run_line(name: str, summary: dict) -> str:
    """The line a finished run prints when the output is not a terminal (`summary` is what
    `train` returns; its wall time counts this run's own steps, not its parent's)."""
    return (
        f"finished {name}: {summary['steps']} steps, {summary['wall']:.1f}s, "
        f"final loss {summary['final_loss']:.3f}"
    )


def _run_one(
    spec: dict, cfg: TrainConfig, run_dir: str, branch_dir: str | None, progress: Any
) -> dict:
    """One run in a worker process: single-threaded, progress sent to the parent's queue."""
    import torch

    from looped.train import train

    torch.set_num_threads(1)
    last = [0.0]

    def on_step(done: int, total: int, loss: float, depth: int) -> None:
        now = time.time()
        if now - last[0] > 0.25 or done == total:
            last[0] = now
            progress.put((spec["name"], done, total, loss, depth))

    return train(
        cfg,
        run_dir,
        branch_from=branch_dir,
        save_steps=tuple(spec["save_steps"]),
        eval_steps=tuple(spec["eval_steps"]),
        on_step=on_step,
        quiet=True,
    )


def _finished(run_dir: Path, cfg: TrainConfig, spec: RunSpec) -> bool:
    """A finished run with the same config and every checkpoint its children need."""
    if not (run_dir / "summary.json").is_file():
        return False
    if (run_dir / "config.yaml").read_text() != to_yaml(cfg):
        return False
    return all((run_dir / "checkpoints" / f"step_{s:07d}").is_dir() for s in spec.save_steps)


def _cost(spec: RunSpec, cfg: TrainConfig) -> float:
    """Modeled FLOPs this run trains itself (a branch leaves its parent's share out)."""
    from looped.flops import schedule_flops, tokens_per_step
    from looped.schedules import parse_schedule

    schedule, tokens = parse_schedule(spec.schedule, spec.seed), tokens_per_step(cfg)
    total = schedule_flops(cfg.model, schedule, spec.steps, tokens, cfg.seq_len)
    if spec.parent:
        total -= schedule_flops(cfg.model, schedule, spec.branch_step, tokens, cfg.seq_len)
    return total


def _to_train(
    specs: list[RunSpec], configs: dict[str, TrainConfig], runs_dir: Path, fresh: bool
) -> dict[str, RunSpec]:
    """The runs to (re)train, their old directories removed: the unfinished ones and every child
    of one (a retrained parent means its children must be retrained too)."""
    import shutil

    todo = {}
    for spec in specs:
        run_dir = runs_dir / spec.name
        if not fresh and _finished(run_dir, configs[spec.name], spec):
            continue
        shutil.rmtree(run_dir, ignore_errors=True)
        todo[spec.name] = spec
    for spec in specs:
        if spec.parent in todo and spec.name not in todo:
            shutil.rmtree(runs_dir / spec.name, ignore_errors=True)
            todo[spec.name] = spec
    return todo


class _Bars:
    """Progress of the pool: an overall bar in modeled GFLOPs and one bar per busy worker, fed
    by the (name, step, total, loss, depth) messages workers put on a queue. `disable` turns the
    bars off (quiet, or one plain line per run instead)."""

    def __init__(self, todo: dict[str, RunSpec], workers: int, disable: bool) -> None:
        self.todo, self.disable = todo, disable
        self.costs = {name: _cost(spec, spec_cfg) for name, (spec, spec_cfg) in todo.items()}
        self.overall = tqdm(
            total=sum(self.costs.values()) / 1e9,
            desc="demo",
            unit="GFLOP",
            disable=disable,
            position=0,
            bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} GFLOP [{elapsed}<{remaining}]",
        )
        self.slots: dict[str, Any] = {}
        self.seen: dict[str, int] = {}
        self.free = list(range(1, workers + 1))

    def open(self, spec: RunSpec) -> None:
        self.slots[spec.name] = tqdm(
            total=spec.steps,
            initial=spec.branch_step,
            desc=spec.name,
            position=self.free.pop(0),
            leave=False,
            disable=self.disable,
            dynamic_ncols=True,
        )
        self.seen[spec.name] = spec.branch_step

    def close(self, name: str) -> None:
        bar = self.slots.pop(name)
        self.free.append(bar.pos if bar.pos is not None else 1)
        self.free.sort()
        bar.close()

    def drain(self, progress: Any) -> None:
        while True:
            try:
                name, done, total, loss, depth = progress.get_nowait()
            except (queue_lib.Empty, EOFError, OSError):
                return
            if name in self.slots:
                self.slots[name].update(done - self.slots[name].n)
                self.slots[name].set_postfix(loss=f"{loss:.3f}", K=depth, refresh=True)
            spec = self.todo[name][0]
            share = (done - self.seen.get(name, 0)) / max(1, spec.steps - spec.branch_step)
            self.seen[name] = done
            self.overall.update(share * self.costs[name] / 1e9)

    def finish(self) -> None:
        self.overall.n = self.overall.total
        self.overall.close()


def execute(
    specs: list[RunSpec],
    configs: dict[str, TrainConfig],
    runs_dir: Path,
    workers: int,
    fresh: bool,
    quiet: bool,
) -> int:
    """Run the grid on a process pool, parents before children, costliest first; returns how
    many runs were trained (finished ones are reused unless `fresh`)."""
    todo = _to_train(specs, configs, runs_dir, fresh)
    if not todo:
        return 0
    lines = not quiet and progress_mode() == "lines"
    bars = _Bars({n: (s, configs[n]) for n, s in todo.items()}, workers, quiet or lines)
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        progress = manager.Queue()
        running: dict[Any, str] = {}
        done: set[str] = set()

        def ready() -> list[RunSpec]:
            ok = [
                s
                for s in todo.values()
                if s.name not in done
                and s.name not in running.values()
                and (s.parent is None or s.parent not in todo or s.parent in done)
            ]
            return sorted(ok, key=lambda s: -bars.costs[s.name])

        while len(done) < len(todo):
            while len(running) < workers and ready():
                spec = ready()[0]
                branch = (
                    str(runs_dir / spec.parent / "checkpoints" / f"step_{spec.branch_step:07d}")
                    if spec.parent
                    else None
                )
                run_dir = str(runs_dir / spec.name)
                args = (asdict(spec), configs[spec.name], run_dir, branch, progress)
                running[pool.submit(_run_one, *args)] = spec.name
                bars.open(spec)
            finished, _ = wait(list(running), timeout=0.3, return_when=FIRST_COMPLETED)
            bars.drain(progress)
            for future in finished:
                name = running.pop(future)
                summary = future.result()  # re-raise a worker's error here
                if lines:
                    print(run_line(name, summary), flush=True)
                bars.drain(progress)
                bars.close(name)
                done.add(name)
        bars.drain(progress)
    bars.finish()
    return len(todo)


# -- collecting results ----------------------------------------------------------------------
def read_metrics(run_dir: Path) -> list[dict]:
    """Every record of a run's metrics.jsonl (none when the run has not started)."""
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


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
        cfg = configs[spec.name]
        metrics = read_metrics(runs_dir / spec.name)
        summary = json.loads((runs_dir / spec.name / "summary.json").read_text())
        train = [m for m in metrics if m["kind"] == "train"]
        evals = [m for m in metrics if m["kind"] == "eval"]
        curve = [[m["step"], m["loss"], m["depth"]] for m in train]
        wall = train_wall(train[-1]) if train else 0.0
        pre_switch = None
        if spec.parent:
            parent = read_metrics(runs_dir / spec.parent)
            ptrain = [m for m in parent if m["kind"] == "train" and m["step"] <= spec.branch_step]
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
            "switch_step": summary.get("switch_step"), "wall": wall, "flops_sampled": summary["flops"],
            "flops": schedule_flops(cfg.model, parse_schedule(spec.schedule, spec.seed), spec.steps, tokens_per_step(cfg), cfg.seq_len),
            "parent": spec.parent, "branch_step": spec.branch_step or None,
            **final, "pre_switch": pre_switch, "curve": curve,
        })  # fmt: skip
    return rows


def train_wall(record: dict) -> float:
    """Seconds spent training (evaluations and checkpoints excluded where the log has it)."""
    return record.get("train_wall", record["wall"])


def eval_row(record: dict) -> dict:
    """Per-depth numbers of one evaluation record.

    `fact_nll` (bios data only) is the summed next-token loss on each attribute value in a
    held-out template sentence, averaged over persons and the six attributes (nats per fact). It
    tracks knowledge; the `token_nll` of whole held-out-template biographies (nats per token) is
    dominated by the unseen template words and rises as a small model fits its training templates.
    """
    from looped.evaluate import token_nll_of

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


def summarize(rows: list[dict], budget: float) -> list[dict]:
    """The README table: each main schedule at the full budget, seed means, against uniform."""

    def mean(schedule: str, key: str, reduce=np.mean) -> float:
        vals = [
            r[key]
            for r in rows
            if r["schedule"] == schedule and r["budget"] == budget and "main" in r["group"]
        ]
        return float(np.mean([reduce(v) for v in vals])) if vals else float("nan")

    uni_flops, uni_wall, uni_nll = (
        mean(UNIFORM, "flops"),
        mean(UNIFORM, "wall"),
        mean(UNIFORM, "fact_nll"),
    )
    table = []
    for schedule in MAIN_SCHEDULES:
        runs = [
            r
            for r in rows
            if r["schedule"] == schedule and r["budget"] == budget and "main" in r["group"]
        ]
        if not runs:
            continue
        depths = runs[0]["depths"]
        bits = np.mean([r["bits"] for r in runs], axis=0) if "bits" in runs[0] else None
        nll = mean(schedule, "fact_nll")
        table.append({
            "schedule": schedule, "label": LABELS[schedule], "seeds": len(runs), "steps": runs[0]["steps"],
            "compute_vs_uniform": mean(schedule, "flops") / uni_flops,
            "wall_vs_uniform": mean(schedule, "wall") / uni_wall,
            "mean_fact_nll": nll, "fact_nll_vs_uniform": nll / uni_nll - 1,
            "bits": {str(k): float(bits[depths.index(k)]) for k in (1, 4, 8, 16) if bits is not None and k in depths},
        })  # fmt: skip
    return table


def format_summary(table: list[dict]) -> str:
    lines = [
        "| schedule | steps | compute vs uniform | wall-clock vs uniform | mean fact NLL K=1..16 | vs uniform | bits/person K=1 | K=4 | K=8 | K=16 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        bits = [f"{r['bits'].get(str(k), float('nan')):.1f}" for k in (1, 4, 8, 16)]
        lines.append(
            f"| {r['label']} | {r['steps']} | {r['compute_vs_uniform']:.2f}x | {r['wall_vs_uniform']:.2f}x | {r['mean_fact_nll']:.3f} | {r['fact_nll_vs_uniform']:+.1%} | "
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


def _settings_that_change_the_table(yours: dict, reference: dict) -> list[str]:
    """Settings that differ and bear on the full-budget table; the number of workers and the
    optional catch-up runs (not in the table) do not."""
    ignored = {"workers", "catch_up"}
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
    text.append(
        f"Your figures: {figures}/ (the reference's: figures/). "
        f"README sections from your numbers: looped report --results {out / 'demo.json'}"
    )
    return "\n".join(text)


def machine_name() -> str:
    """CPU model and core count, for the record."""
    from looped.device import cpu_name

    return f"{cpu_name()} ({os.cpu_count()} cores)"


# -- entry point -----------------------------------------------------------------------------
def run_demo(
    settings: DemoSettings, out: Path, figures: Path, fresh: bool = False, quiet: bool = False
) -> dict:
    from looped import plots

    t0 = time.time()
    specs, configs = plan(settings)
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    if not quiet:
        n_main = sum("main" in s.group for s in specs)
        print(
            f"looped demo: {len(specs)} runs ({n_main} in the main grid, {settings.seeds} seeds), {settings.workers} workers -> {out}"
        )
    grid = [s for s in specs if s.group != "catchup"]
    extra = [s for s in specs if s.group == "catchup"]
    trained = execute(grid, configs, runs_dir, settings.workers, fresh, quiet)
    grid_seconds, t1 = time.time() - t0, time.time()
    trained_extra = (
        execute(extra, configs, runs_dir, settings.workers, fresh, quiet) if extra else 0
    )
    rows = collect(specs, runs_dir, configs)
    top = max(settings.budgets)
    cfg0 = configs[specs[0].name]
    result = {
        "meta": {
            "settings": asdict(settings),
            "machine": machine_name(),
            "wall_seconds": grid_seconds,  # the grid (what `make demo` runs), set-up included
            "catchup_seconds": time.time() - t1 if extra else None,  # the optional --catch-up runs
            "runs_trained": trained + trained_extra,
            "model": asdict(cfg0.model),
            "params": None,
            "full_budget_flops": cfg0.full_budget_flops,
            "batch_size": cfg0.batch_size,
            "seq_len": cfg0.seq_len,
            "dtype": cfg0.dtype,
            "persons": cfg0.data.persons,
            "nll_label": "fact NLL (nats per fact, held-out templates)",
        },
        "runs": rows,
        "summary": summarize(rows, top),
    }
    from looped.model import LoopedTransformer

    result["meta"]["params"] = LoopedTransformer(cfg0.model).num_params()
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "demo.json"
    if previous.is_file():  # a phase that retrained nothing keeps the time it took before
        before = json.loads(previous.read_text())["meta"]
        if trained == 0:
            result["meta"]["wall_seconds"] = before["wall_seconds"]
        if extra and trained_extra == 0 and before.get("catchup_seconds"):
            result["meta"]["catchup_seconds"] = before["catchup_seconds"]
    write_text_atomic(out / "demo.json", json.dumps(result, indent=1))
    paths = plots.demo_figures(result, figures)
    if not quiet:
        print(format_summary(result["summary"]))
        print(
            f"wrote {out / 'demo.json'} and {len(paths)} figures in {figures} ({time.time() - t0:.0f}s)"
        )
        comparison = _comparison(result, out, figures)
        if comparison:
            print(comparison)
    return result


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
        help="regenerate the committed reference: results/demo.json and figures/ "
        "(then run `looped report`)",
    )
    parser.add_argument("--seeds", type=int, help="seeds for the main comparison")
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
    run_demo(settings, out, figures, fresh=args.fresh, quiet=args.quiet)
    return 0
