"""The paper's headline in its own terms: held-out text NLL across serving depths, equal tokens.

    looped fidelity                        # stdlib corpus, d=128, 400 steps of 16x128 tokens,
                                           # LR sweep + 3 seeds: runs/fidelity/ (json, figures)
    looped fidelity --quick                # the same code path at toy size: runs/fidelity-quick/
    looped fidelity --dataset roneneldan/TinyStories --max-docs 200000      # a hub corpus
    looped fidelity --dataset HuggingFaceFW/fineweb-edu --subset sample-10BT --max-docs 50000
    looped fidelity --dataset ~/my_texts/ --tokenizer bpe:2048              # local .txt/.jsonl
    looped fidelity --lrs 1e-3,3e-3,1e-2 --seeds 3 --steps 800 model.n_head=8   # any override

The paper claims that fixed K=2 for 67% of the run, then uniform 1..16, ends with a mean held-out
NLL across serving depths K=1..16 within 0.5% of uniform 1..16 training from the start, at the
same number of tokens (fixed-first spends fewer FLOPs per step). This command measures exactly
that on a text corpus, for uniform 1..16, the 200M recipe (K=2, 67%), the 1B recipe (K=4, 80%)
and fixed K=4:

1. LR sweep: every schedule at every learning rate and sweep seed, the same number of steps.
2. Each schedule's best LR: the lowest validation NLL (mean over serving depths 1..16 and the
   sweep seeds); the reported numbers come from test windows that chose nothing.
3. The comparison at each schedule's best LR, every seed, at *equal tokens* (the same steps for
   all: the paper's framing) and at *equal modeled FLOPs* (each schedule takes as many steps as
   fit uniform's modeled FLOPs at that step count, derived by the trainer's `budget_flops`).

It writes to its --out directory only: no committed result comes from it (the demo's text track,
`looped demo`, is this track at demo size; `looped length` measures the gap as training
lengthens, `looped length --d-model 128` at a second width).

The default corpus is the Python standard library's own source (`looped data text --dataset
stdlib`): it is on every machine that has Python, so the track runs offline, and at ~3.1M train
tokens (4096 BPE) the default run (0.8M tokens; 1.5M for the longest equal-FLOP run) sees each
token less than once. It is tokenized once into OUT/corpus-<name> and reused. A hub corpus
(`--dataset roneneldan/TinyStories`, `HuggingFaceFW/fineweb-edu --subset sample-10BT`) needs a
network the first time; `--max-docs` bounds how much of it is tokenized.

Runs train on the worker pool (`looped.experiments.runner`); uniform's equal-FLOP runs branch off its
full-length run at their decay (exactly: the same steps until then), every other run is trained
from scratch, and finished runs are reused when the command is run again (`--fresh` retrains).
The results JSON holds every run (with its training curve), the whole sweep, the chosen LRs, both
comparisons with the seed spread and the time of each phase; the figures are drawn from it.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from looped import paper
from looped.commands.common import OverrideParser, study_parser
from looped.config import TrainConfig, to_yaml
from looped.data.text import (
    META,
    NAMED_CORPORA,
    TokenShards,
    prepare_documents,
    prepare_text,
    read_meta,
)
from looped.errors import UserError
from looped.eval.baselines import corpus_baselines
from looped.eval.evaluate import token_nll_of
from looped.eval.heldout import heldout_nll
from looped.eval.stats import best_lrs, compare
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
from looped.experiments.runner import RunSpec, execute, progress_mode
from looped.experiments.textsetup import TextSetup
from looped.experiments.textsetup import run_config as text_run_config
from looped.flops import schedule_flops, tokens_per_step
from looped.model import LoopedTransformer
from looped.paper import FIXED, RECIPE_200M, RECIPES_1B, UNIFORM, label
from looped.report import text as report
from looped.runtime.lock import dir_lock
from looped.runtime.metrics import read_metrics
from looped.schedules import parse_schedule
from looped.training.trainer import total_steps_for

# the schedules compared, in the order tables and legends list them
SCHEDULES = (UNIFORM, RECIPE_200M, RECIPES_1B[1], FIXED)


@dataclass
class FidelitySettings:
    # corpus: stdlib | pydoc (offline, ship with Python), a hub name, or a local file/directory
    dataset: str = "stdlib"
    subset: str | None = None  # hub config name, e.g. sample-10BT for FineWeb-Edu
    max_docs: int | None = None  # tokenize at most this many documents (None: all of them)
    tokenizer: str = "bpe:4096"  # `looped data text --tokenizer` spec
    preset: str = "demo"  # base training preset; the fields below override it
    d_model: int = 128  # width of the main comparison's model (one looped layer)
    n_head: int = 4  # attention heads at every width
    steps: int = 400  # optimizer steps of the sweep and of the equal-token comparison
    batch_size: int = 16  # sequences per step
    seq_len: int = 128  # tokens per sequence
    warmup_steps: int = 20  # linear LR warmup (then the preset's WSD schedule)
    eval_batches: int = 8  # held-out batches per evaluation (x batch_size x seq_len tokens)
    seeds: int = 3  # seeds of the comparison
    sweep_seeds: int = 2  # seeds each LR is chosen on: the lowest mean validation NLL over them
    held_out: float = 0.05  # share of the corpus's documents in each of the val and test splits
    lrs: tuple[float, ...] = (1e-3, 3e-3, 1e-2)  # the sweep's peak learning rates
    # each schedule's LR when the sweep is skipped (None: sweep `lrs` and take each one's best)
    chosen_lr: dict[str, float] | None = None
    schedules: tuple[str, ...] = SCHEDULES  # depth schedules compared
    workers: int = 2  # worker processes (each single-threaded)
    overrides: list[str] = field(default_factory=list)  # config overrides for every run


QUICK = FidelitySettings(  # every code path at toy size, under a minute
    dataset="pydoc",
    tokenizer="bpe:512",
    d_model=32,
    n_head=2,
    steps=40,
    batch_size=8,
    seq_len=64,
    warmup_steps=5,
    eval_batches=2,
    seeds=2,
)


# -- corpus ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "corpus"


def corpus_dir(settings: FidelitySettings, out: Path) -> Path:
    """Where the tokenized corpus lives: one directory per (dataset, subset, tokenizer); "split"
    marks the train / val / test corpora (older ones held train and val only)."""
    path = Path(settings.dataset).expanduser()
    name = path.name if path.exists() else settings.dataset
    parts = [name, settings.subset or "", settings.tokenizer, "split"]
    if settings.max_docs:
        parts.append(f"{settings.max_docs}docs")
    return out / f"corpus-{_slug('-'.join(p for p in parts if p))}"


def ensure_corpus(settings: FidelitySettings, out: Path, quiet: bool = False) -> dict[str, Any]:
    """The corpus's meta.json, tokenizing it first if this is the first run. A directory written
    for another dataset or tokenizer is refused rather than silently reused.

    Train, val (LR choice) and test (reported numbers), the tokenizer fit on train alone; the
    built-in corpora also keep near-duplicate files in one split (`data.text.prepare_documents`),
    a hub or local corpus splits by a hash of each document (`prepare_text(test_frac=...)`)."""
    directory = corpus_dir(settings, out)
    dataset = str(Path(settings.dataset).expanduser()) if settings.dataset else ""
    if (directory / META).is_file():
        meta = read_meta(directory)
        if (meta["dataset"], meta["tokenizer"]) != (dataset, settings.tokenizer):
            raise UserError(
                f"{directory} holds {meta['dataset']} ({meta['tokenizer']}), not {dataset} "
                f"({settings.tokenizer}); remove that directory or pass another --out"
            )
    else:
        if not quiet:
            print(f"looped fidelity: tokenizing {dataset} ({settings.tokenizer}) into {directory}")
        if dataset in NAMED_CORPORA:
            named = NAMED_CORPORA[dataset]()[: settings.max_docs]
            meta = prepare_documents(
                directory,
                named,
                settings.tokenizer,
                settings.held_out,
                settings.held_out,
                dataset,
                overwrite=True,
            )
        else:
            meta = prepare_text(
                directory,
                dataset=dataset,
                tokenizer=settings.tokenizer,
                subset=settings.subset,
                max_docs=settings.max_docs,
                overwrite=True,
                progress=not quiet and progress_mode() != "lines",
                val_frac=settings.held_out,
                test_frac=settings.held_out,
            )
    return {**meta, "path": str(directory)}


# -- plan ------------------------------------------------------------------------------------
@dataclass
class Planned:
    spec: RunSpec  # what runner.execute trains (name, schedule, seed, steps)
    cfg: TrainConfig  # the run's resolved config
    lr: float  # its peak learning rate
    d_model: int  # its width
    roles: set[str] = field(default_factory=set)  # sweep, tokens, flops:SCHEDULE


def run_config(
    settings: FidelitySettings,
    corpus: dict[str, Any],
    *,
    schedule: str,
    lr: float,
    seed: int,
    d_model: int,
    steps: int = 0,
    budget_flops: float = 0.0,
) -> TrainConfig:
    """One run's config: the preset, the settings, then the user's overrides (the run's LR, seed
    and schedule win over them), built by the one text-run builder (`textsetup.run_config`)."""
    setup = TextSetup(
        tokenizer=settings.tokenizer,
        d_model=d_model,
        n_head=settings.n_head,
        batch_size=settings.batch_size,
        seq_len=settings.seq_len,
        warmup_steps=settings.warmup_steps,
        val_batches=settings.eval_batches,
    )
    return text_run_config(
        setup,
        corpus,
        schedule=schedule,
        lr=lr,
        seed=seed,
        steps=steps,
        preset=settings.preset,
        log_interval=5,
        before=[f"budget_flops={budget_flops}", *settings.overrides],
    )


def run_name(schedule: str, d_model: int, lr: float, steps: int, seed: int) -> str:
    return f"{_short(schedule)}_d{d_model}_lr{lr:g}_n{steps}_s{seed}"


def _short(schedule: str) -> str:
    if schedule.startswith("fixed-first"):
        k, frac = paper.fixed_phase(schedule)
        return f"ff_k{k}_{round(frac * 100)}"
    return _slug(schedule.replace("-", "to"))


class Plan:
    """The runs of every phase, one per distinct config: a run that serves two roles (the
    sweep's seed-0 run at the best LR is also the comparison's seed 0) is trained once."""

    def __init__(self, settings: FidelitySettings, corpus: dict[str, Any]) -> None:
        self.settings, self.corpus = settings, corpus
        self.runs: dict[str, Planned] = {}
        self.planner = Planner()

    def include(self, run: Planned) -> None:
        """Take `run` (planned elsewhere) into this plan as it is, so that runs can branch off it."""
        self.runs[run.spec.name] = run
        self.planner.runs[run.spec.name], self.planner.configs[run.spec.name] = run.spec, run.cfg

    def add(
        self,
        role: str,
        schedule: str,
        lr: float,
        seed: int,
        d_model: int,
        parent: Planned | None = None,
        **length: Any,
    ) -> Planned:
        """Add a run of `steps` steps, or of as many steps as fit `budget_flops`; with a `parent`,
        the run branches off the parent's checkpoint where the two agree (warmup-stable-decay:
        up to the shorter run's decay), which is exactly the run trained from scratch."""
        cfg = run_config(
            self.settings,
            self.corpus,
            schedule=schedule,
            lr=lr,
            seed=seed,
            d_model=d_model,
            **length,
        )
        steps = total_steps_for(cfg)  # the trainer's own derivation
        name = run_name(schedule, d_model, lr, steps, seed)
        if name not in self.runs:
            parents = [parent.spec.name] if parent is not None else []
            spec = self.planner.add(RunSpec(name, schedule, seed, steps), cfg, parents)
            self.runs[name] = Planned(spec, cfg, lr, d_model)
        self.runs[name].roles.add(role)
        # only a run that serves the sweep alone may end diverged without stopping the track
        self.runs[name].spec.may_diverge = self.runs[name].roles == {"sweep"}
        return self.runs[name]

    def specs(self, names: set[str] | None = None) -> tuple[list[RunSpec], dict[str, TrainConfig]]:
        """runner.execute's arguments for the runs named (all by default)."""
        return self.planner.specs(names)


def plan_sweep(plan: Plan) -> None:
    """Every schedule at every LR and sweep seed, the same steps. Uniform's runs keep the checkpoints
    the equal-FLOP runs will branch off, whichever LR wins (a checkpoint costs seconds; training
    the run again would cost minutes)."""
    s = plan.settings
    for schedule, lr, seed in itertools.product(s.schedules, s.lrs, range(s.sweep_seeds)):
        run = plan.add("sweep", schedule, lr, seed, s.d_model, steps=s.steps)
        if schedule == UNIFORM:
            for partner in _flop_partners(plan, run):
                if partner.spec.branch_step not in run.spec.save_steps:
                    run.spec.save_steps.append(partner.spec.branch_step)


def _flop_partners(plan: Plan, uni: Planned) -> list[Planned]:
    """Uniform runs (not added to the plan) at each other schedule's modeled FLOPs of `steps`
    steps, branching off `uni`, uniform's `steps`-step run."""
    s, scratch = plan.settings, Plan(plan.settings, plan.corpus)
    scratch.include(replace(uni, spec=replace(uni.spec, save_steps=[])))
    partners = []
    for schedule in s.schedules:
        if schedule != UNIFORM:
            cfg = run_config(
                s, plan.corpus, schedule=schedule, lr=uni.lr, seed=0, d_model=uni.d_model
            )
            budget = schedule_flops(
                cfg.model, parse_schedule(schedule), s.steps, tokens_per_step(cfg), cfg.seq_len
            )
            partners.append(
                scratch.add(
                    f"flops:{schedule}",
                    UNIFORM,
                    uni.lr,
                    uni.spec.seed,
                    uni.d_model,
                    parent=scratch.runs[uni.spec.name],
                    budget_flops=budget,
                )
            )
    return partners


def plan_comparison(plan: Plan, best: dict[str, float]) -> None:
    """Each schedule at its own best LR, every seed, at equal tokens (`steps` steps for all) and
    at equal modeled FLOPs: uniform trained for as many steps as fit each other schedule's
    FLOPs (`budget_flops`). Those shorter uniform runs branch off uniform's `steps`-step run at
    their decay, so the equal-FLOP comparison costs only their decay phases."""
    s = plan.settings
    for seed in range(s.seeds):
        uni = plan.add("tokens", UNIFORM, best[UNIFORM], seed, s.d_model, steps=s.steps)
        for schedule in s.schedules:
            if schedule != UNIFORM:
                plan.add("tokens", schedule, best[schedule], seed, s.d_model, steps=s.steps)
        for partner in _flop_partners(plan, uni):
            for role in partner.roles:  # two schedules of equal FLOPs share one uniform run
                plan.add(
                    role,
                    UNIFORM,
                    uni.lr,
                    seed,
                    s.d_model,
                    parent=uni,
                    budget_flops=partner.cfg.budget_flops,
                )


# -- results ---------------------------------------------------------------------------------
def collect(plan: Plan, runs_dir: Path) -> list[dict]:
    """One row per run: what it was (schedule, LR, seed, width, steps, tokens, modeled FLOPs)
    and what it measured (train wall seconds, token NLL per serving depth, final loss)."""
    params: dict[int, int] = {}
    rows = []
    windows = test_windows(plan)
    for name, p in plan.runs.items():
        if diverged(runs_dir / name):  # a sweep run whose LR was too high: no numbers
            continue
        metrics = read_metrics(runs_dir / name)
        summary = json.loads((runs_dir / name / "summary.json").read_text())
        train = [m for m in metrics if m["kind"] == "train"]
        evals = [m for m in metrics if m["kind"] == "eval"]
        inherited = before_branch(runs_dir, p.spec.parent, p.spec.branch_step)
        parent = [m for m in inherited if m["kind"] == "train"]
        nll = token_nll_of(evals[-1])  # the validation windows
        depths = sorted(int(k) for k in nll)
        val = [nll[str(k)] for k in depths]
        # a reported run is scored on the test windows; a sweep-only run needs no test score
        reported = windows is not None and bool(p.roles - {"sweep"})
        held = heldout_nll(runs_dir / name, p.cfg, windows) if reported else None
        tokens = tokens_per_step(p.cfg)
        if p.d_model not in params:
            params[p.d_model] = LoopedTransformer(p.cfg.model).num_params()
        rows.append(
            {
                "name": name,
                "schedule": p.spec.schedule,
                "label": label(p.spec.schedule),
                "roles": sorted(p.roles),
                "lr": p.lr,
                "seed": p.spec.seed,
                "d_model": p.d_model,
                "params": params[p.d_model],
                "steps": p.spec.steps,
                "tokens": p.spec.steps * tokens,
                "flops": schedule_flops(
                    p.cfg.model,
                    parse_schedule(p.spec.schedule, p.spec.seed),
                    p.spec.steps,
                    tokens,
                    p.cfg.seq_len,
                ),
                "wall": branched_wall(train, parent, p.spec.branch_step),
                "final_loss": summary["final_loss"],
                "own_wall": own_wall(train),
                "depths": depths,
                "val_token_nll": val,
                "val_mean_nll": float(np.mean(val)),
                "token_nll": held["token_nll"] if held else val,
                "mean_nll": held["mean_nll"] if held else float(np.mean(val)),
                "se_windows": held["se"] if held else None,
                "curve": [[m["step"], m["loss"], m["depth"]] for m in parent + train],
            }
        )
    return rows


def held_out_baselines(plan: Plan) -> dict[str, Any]:
    """Unigram and bigram count tables fit on train, scored on the windows the reported numbers
    use (test; validation for a corpus without a test split), k chosen on validation."""
    c, path = next(iter(plan.runs.values())).cfg, plan.corpus["path"]  # as the runs evaluate
    val = list(TokenShards(path, "val").iter_eval_batches(c.batch_size, c.seq_len, c.eval_batches))
    scored_on = test_windows(plan)
    out = corpus_baselines(path, plan.corpus["vocab_size"], val, scored_on or val)
    return {**out, "windows": "test" if scored_on else "val"}


def test_windows(plan: Plan) -> list | None:
    """The test windows every reported run is scored on (None for a corpus written before
    corpora had a test split: its validation windows are then the only held-out ones)."""
    if "test" not in read_meta(plan.corpus["path"])["splits"]:
        return None
    c = next(iter(plan.runs.values())).cfg  # the windows' shape: as the runs' own evaluation
    shards = TokenShards(plan.corpus["path"], "test")
    return list(shards.iter_eval_batches(c.batch_size, c.seq_len, c.eval_batches, "test"))


# -- entry point -----------------------------------------------------------------------------
def check_settings(settings: FidelitySettings) -> None:
    """Bad settings as one line each, before the corpus is built or anything trains."""
    positive = {
        "--seeds": settings.seeds,
        "--workers": settings.workers,
        "--steps": settings.steps,
        "--d-model": settings.d_model,
        "--batch-size": settings.batch_size,
    }
    for flag, value in positive.items():
        if value < 1:
            raise UserError(f"{flag} {value} must be >= 1")
    if not settings.lrs or any(lr <= 0 for lr in settings.lrs):
        raise UserError(f"--lrs {settings.lrs}: give positive learning rates such as 1e-3,3e-3")
    if settings.chosen_lr is not None and set(settings.schedules) - set(settings.chosen_lr):
        missing = sorted(set(settings.schedules) - set(settings.chosen_lr))
        raise UserError(f"no learning rate given for {', '.join(missing)}: add it or run the sweep")
    if UNIFORM not in settings.schedules:
        raise UserError(f"the schedules must include {UNIFORM}: every comparison is against it")


def _result(
    settings: FidelitySettings,
    plan: Plan,
    runs_dir: Path,
    corpus: dict[str, Any],
    sweep_rows: list[dict],
    best: dict[str, float],
    phases: dict[str, float],
    t0: float,
) -> dict:
    """Everything `fidelity.json` holds: the setting, every run, the sweep and both comparisons."""
    rows = collect(plan, runs_dir)
    cfg0 = next(iter(plan.runs.values())).cfg
    result = {
        "meta": {
            "settings": asdict(settings),
            "machine": machine_name(),
            "corpus": {k: corpus[k] for k in ("dataset", "tokenizer", "vocab_size", "python")}
            | {s: corpus["splits"][s]["tokens"] for s in corpus["splits"]},
            "dtype": cfg0.dtype,
            "lr_schedule": cfg0.optim.lr_schedule,
            "tokens_per_step": settings.batch_size * settings.seq_len,
            "phase_seconds": phases,
            "wall_seconds": time.time() - t0,
            "metric": "mean held-out token NLL over serving depths 1..16 (nats/token)",
        },
        "runs": rows,
        "sweep": [  # what chose the LRs: validation NLL, per sweep seed
            {k: r.get(k) for k in ("schedule", "label", "lr", "seed", "final_loss")}
            | {
                "mean_nll": r.get("val_mean_nll", r["mean_nll"]),
                "token_nll": r.get("val_token_nll", r["token_nll"]),
            }
            for r in sweep_rows
        ],
        "baselines": held_out_baselines(plan),
        "chosen_lr": best,
        "equal_tokens": compare(rows, "tokens", settings.schedules),
        "equal_flops": compare(rows, "flops", settings.schedules),
    }
    return result


def run_fidelity(
    settings: FidelitySettings,
    out: Path,
    results: Path,
    figures_dir: Path,
    fresh: bool = False,
    quiet: bool = False,
    prefix: str = "fidelity",
) -> dict:
    """Corpus, sweep, comparison: train what is missing, write `results`, draw the figures
    (FIGURES_DIR/PREFIX_*.png), print the table; returns the result dict."""
    check_settings(settings)
    for schedule in settings.schedules:  # every config checked before the corpus is built
        run_config(
            settings,
            {"path": str(out), "vocab_size": 1},
            schedule=schedule,
            lr=settings.lrs[0],
            seed=0,
            d_model=settings.d_model,
            steps=settings.steps,
        )
    with dir_lock(out, "looped fidelity"):  # one writer: a second one into OUT is refused
        return _run_fidelity(settings, out, results, figures_dir, fresh, quiet, prefix)


def _run_fidelity(
    settings: FidelitySettings,
    out: Path,
    results: Path,
    figures_dir: Path,
    fresh: bool,
    quiet: bool,
    prefix: str,
) -> dict:
    phases: dict[str, float] = {}
    t0 = time.time()
    corpus = ensure_corpus(settings, out, quiet)
    phases["corpus"] = time.time() - t0
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    plan = Plan(settings, corpus)
    trained: set[str] = set()
    retrained = 0  # runs actually trained (finished ones are reused)

    def phase(name: str) -> None:
        nonlocal retrained
        started = time.time()
        todo = set(plan.runs) - trained
        specs, configs = plan.specs(todo)
        if not quiet:
            print(f"looped fidelity: {name}: {len(specs)} runs, {settings.workers} workers")
        retrained += execute(specs, configs, runs_dir, settings.workers, fresh, quiet)
        trained.update(todo)
        phases[name] = time.time() - started

    if settings.chosen_lr is None:
        plan_sweep(plan)
        phase("sweep")
        sweep_rows = sweep_results(plan, runs_dir)
        best = best_lrs([r for r in sweep_rows if r["mean_nll"] is not None])
    else:  # each schedule's LR given (e.g. the demo's, chosen by its reference's sweep): no sweep
        sweep_rows, best = [], dict(settings.chosen_lr)
    plan_comparison(plan, best)
    phase("comparison")
    result = _result(settings, plan, runs_dir, corpus, sweep_rows, best, phases, t0)
    result["meta"]["runs_trained"] = retrained  # by this invocation (reused ones not counted)
    if retrained == 0:
        keep_earlier_times(result["meta"], results, ("wall_seconds", "phase_seconds"))
    write_result(results, result, say=False)
    paths = report.figures(result, figures_dir, prefix)
    print(report.format_table(result))  # the result, even with --quiet (which silences the bars)
    print(
        f"wrote {results} and {len(paths)} figures in {figures_dir} "
        f"({result['meta']['wall_seconds']:.0f}s; phases: "
        + ", ".join(f"{k} {v:.0f}s" for k, v in result["meta"]["phase_seconds"].items())
        + ")"
    )
    return result


def sweep_results(plan: Plan, runs_dir: Path) -> list[dict]:
    """The sweep's rows: each finished sweep run's numbers, and a row for each LR at which a run
    diverged (a result, never the best)."""
    rows = [r for r in collect(plan, runs_dir) if "sweep" in r["roles"]]
    return rows + [
        {
            "schedule": p.spec.schedule,
            "label": label(p.spec.schedule),
            "lr": p.lr,
            "mean_nll": None,
            "token_nll": None,
            "final_loss": None,
            "diverged": True,
        }
        for p in plan.runs.values()
        if "sweep" in p.roles and diverged(runs_dir / p.spec.name)
    ]


def _floats(text: str, flag: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise UserError(
            f"{flag} {text!r}: give comma-separated numbers such as 1e-3,3e-3"
        ) from None


def _parser() -> OverrideParser:
    parser = study_parser(
        "looped fidelity",
        __doc__,
        out="corpus, runs, fidelity.json, figures (default runs/fidelity)",
        reference=None,  # no committed result: `looped length` is the text study of record
        quick="toy size, under a minute (pydoc corpus)",
        overrides=True,
        example="looped fidelity --quick --out runs/fq",
    )
    add = parser.add_argument
    add("--dataset", help="stdlib (default) | pydoc | hub name | local file or directory")
    add("--subset", help="hub config name, e.g. sample-10BT")
    add("--max-docs", type=int, help="tokenize at most this many documents")
    add("--tokenizer", help="tokenizer spec (default bpe:4096)")
    add("--steps", type=int, help="steps of the sweep and the equal-token comparison")
    add("--d-model", type=int, help="width of the main comparison")
    add("--batch-size", type=int, help="sequences per step")
    add("--seeds", type=int, help="seeds of the comparison (default 3)")
    add("--lrs", help="the sweep's learning rates, e.g. 1e-3,3e-3,1e-2")
    add("--held-out", type=float, help="share of documents in each of val and test (default 0.05)")
    add("--fresh", action="store_true", help="retrain every run instead of reusing finished ones")
    add("--quiet", action="store_true", help="no progress bars")
    return parser


def _settings(args: Any) -> FidelitySettings:
    """The track's settings from the command line (bad values refused, one line each)."""
    settings = replace(QUICK if args.quick else FidelitySettings())
    settings.overrides = settings.overrides + args.overrides
    for flag in (
        "dataset",
        "subset",
        "max_docs",
        "tokenizer",
        "steps",
        "d_model",
        "batch_size",
        "seeds",
        "workers",
        "held_out",
    ):
        if getattr(args, flag) is not None:
            setattr(settings, flag, getattr(args, flag))
    if args.max_docs is not None and args.max_docs < 1:
        raise UserError(f"--max-docs {args.max_docs} must be >= 1")
    if args.lrs:
        settings.lrs = _floats(args.lrs, "--lrs")
    check_settings(settings)
    return settings


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = _settings(args)
    out = Path(args.out or ("runs/fidelity-quick" if args.quick else "runs/fidelity"))
    if args.print_config:  # the config every run starts from; schedule, LR and seed vary
        corpus = {"path": str(corpus_dir(settings, out)), "vocab_size": 0}
        cfg = run_config(
            settings,
            corpus,
            schedule=UNIFORM,
            lr=settings.lrs[0],
            seed=0,
            d_model=settings.d_model,
            steps=settings.steps,
        )
        print(to_yaml(cfg), end="")
        return 0
    results, figures_dir = out / "fidelity.json", out / "figures"
    run_fidelity(settings, out, results, figures_dir, fresh=args.fresh, quiet=args.quiet)
    return 0
