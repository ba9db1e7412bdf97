"""A prepared run: everything settled before the first step (data, model, where it starts,
optimizer, run directory), as one plain `Run`; and the AdamW it trains with.

The config is never changed in place: what the run settles (dtype, vocabulary, grad_accum)
makes a new config, the one recorded in config.yaml and every checkpoint.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from looped.config import OptimConfig, TrainConfig, to_yaml
from looped.data.batching import DataSource, build_source
from looped.errors import UserError
from looped.eval.recall import check_queries_fit, recall_queries
from looped.flops import schedule_flops, steps_for_budget, tokens_per_step
from looped.model import LoopedTransformer, fit_vocab
from looped.runtime.atomic import write_text_atomic
from looped.runtime.distributed import Dist, load_optimizer_state, wrap_distributed
from looped.runtime.metrics import RunLog, writing
from looped.schedule_spec import parse_schedule
from looped.schedules import Schedule
from looped.training.lineage import Restored, restore, write_start


@dataclass
class RunOptions:
    resume: bool = False  # continue from the latest checkpoint in the run directory
    init_from: str | None = None  # start a new run from these weights (run or checkpoint dir)
    branch_from: str | None = None  # continue this checkpoint (weights, optimizer, step); exact
    quiet: bool = False  # no progress bar
    save_steps: tuple[int, ...] = ()  # extra checkpoints at these steps, never pruned
    eval_steps: tuple[int, ...] = ()  # extra evaluations at these steps
    on_step: Any = None  # on_step(done, total, loss, depth) replaces the bar (demo workers)


@dataclass
class Run:
    """What the loop reads, fixed before the first step (`prepare` builds it)."""

    cfg: TrainConfig  # as resolved for this run (see the module docstring)
    out: Path  # the run directory
    dist: Dist  # this process under torchrun, or the one process
    opts: RunOptions
    source: DataSource  # training batches, evaluation batches, the bios corpus for recall
    schedule: Schedule  # the depth K of every step
    total: int  # optimizer steps of the whole run
    tokens_per_step: int  # over all processes
    planned: float  # modeled FLOPs of the whole run (expected over K)
    model: LoopedTransformer  # the model itself: evaluation, weights, parameter count
    wrapped: torch.nn.Module  # what a step calls: DDP(model), or the model (one process, FSDP2)
    optimizer: torch.optim.Optimizer
    start: Restored  # the first step, lineage, run id and the loss of the step before
    log: RunLog  # metrics.jsonl (and TensorBoard), summary.json

    def say(self, msg: str) -> None:
        if self.dist.main and not self.opts.quiet:
            tqdm.write(msg, file=sys.stderr)  # a line that does not break the progress bar


def prepare(cfg: TrainConfig, out: Path, dist: Dist, opts: RunOptions) -> Run | None:
    """Everything before the first step; None when resuming a finished run."""
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    source, cfg = _data(cfg, dist.world)
    schedule = parse_schedule(cfg.schedule, cfg.seed)  # the run's one parse of its spec
    total = total_steps_for(cfg, dist.world, schedule)
    torch.manual_seed(cfg.seed)
    model = LoopedTransformer(cfg.model)
    start = restore(
        cfg, out, model, schedule, total, dist, opts.resume, opts.branch_from, opts.init_from
    )
    if start.finished:
        if dist.main and not opts.quiet:
            print(f"{out} already finished {total} steps; nothing to resume", file=sys.stderr)
        return None
    depths = [k for k, n in schedule.step_counts(total).items() if n > 0]  # the K it trains at
    wrapped, optimizer = _place(model, cfg, dist, depths, start.optimizer)
    if dist.main:
        with writing(out):  # the first write: everything before it only reads
            out.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out / "config.yaml", to_yaml(cfg))
            write_start(out, start)
    tokens = tokens_per_step(cfg, dist.world)
    return Run(
        cfg=cfg,
        out=out,
        dist=dist,
        opts=opts,
        source=source,
        schedule=schedule,
        total=total,
        tokens_per_step=tokens,
        planned=schedule_flops(cfg.model, schedule, total, tokens, cfg.seq_len),
        model=model,
        wrapped=wrapped,
        optimizer=optimizer,
        start=start,
        log=RunLog(out, dist.main, cfg.tensorboard),
    )


def _data(cfg: TrainConfig, world: int) -> tuple[DataSource, TrainConfig]:
    """The run's data, and the config with its fitted vocabulary and grad_accum."""
    source = build_source(cfg.data)
    vocab = fit_vocab(cfg.model.vocab_size, source.vocab_size)
    cfg = replace(cfg, model=replace(cfg.model, vocab_size=vocab))
    if source.bios is not None:  # fail now, not at the first evaluation
        check_queries_fit(recall_queries(source.bios), cfg.model.seq_len)
    return source, resolve_batch(cfg, world)


def resolve_batch(cfg: TrainConfig, world_size: int = 1) -> TrainConfig:
    """grad_accum set so that global_batch makes one step at any world size."""
    if cfg.global_batch <= 0:
        return cfg
    per_pass = cfg.batch_size * world_size
    if cfg.global_batch % per_pass:
        raise UserError(
            f"global_batch={cfg.global_batch} is not a multiple of batch_size x processes = {per_pass}; "
            "change batch_size or global_batch"
        )
    return replace(cfg, grad_accum=cfg.global_batch // per_pass)


def total_steps_for(cfg: TrainConfig, world_size: int = 1, schedule: Schedule | None = None) -> int:
    """Optimizer steps this run takes: the smallest of the given stop criteria. `schedule`: the
    run's parsed `cfg.schedule` (a run parses its spec once, in `prepare`)."""
    schedule = schedule or parse_schedule(cfg.schedule, cfg.seed)
    tokens = tokens_per_step(cfg, world_size)
    candidates = [cfg.max_steps] if cfg.max_steps > 0 else []
    if cfg.max_tokens > 0:
        candidates.append(cfg.max_tokens // tokens)
    budget = cfg.budget_flops
    if cfg.budget_frac > 0:
        if cfg.full_budget_flops <= 0:
            raise UserError(
                "budget_frac needs full_budget_flops (the preset's 100% budget); set full_budget_flops=..."
            )
        budget = cfg.budget_frac * cfg.full_budget_flops
    if budget > 0:
        candidates.append(steps_for_budget(cfg.model, schedule, budget, tokens, cfg.seq_len))
    if not candidates:
        raise UserError("no stop criterion: set max_steps, max_tokens, budget_flops or budget_frac")
    steps = min(candidates)
    if steps < 1:
        raise UserError(
            f"the budget is too small for one step of {tokens} tokens; raise the budget or shrink the batch"
        )
    return steps


def _place(
    model: LoopedTransformer, cfg: TrainConfig, dist: Dist, depths: list[int], state: dict | None
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model on its device (compiled, wrapped or sharded) and its optimizer, with `state` (the
    checkpoint's) when it continues one; `depths`: the K the run trains at (DDP needs them)."""
    model.to(dist.device)
    if cfg.compile:
        model.compile_block()
    wrapped = wrap_distributed(model, cfg.fsdp, dist, depths)
    optimizer = make_optimizer(model, cfg.optim)  # after sharding: FSDP2 swaps in DTensor params
    if state is not None:
        load_optimizer_state(model, optimizer, state, dist.enabled and cfg.fsdp)
    return wrapped, optimizer


def make_optimizer(model: torch.nn.Module, optim: OptimConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: not on norms, not on the embedding (or tied head)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and "embed" not in name else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": optim.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=optim.lr, betas=tuple(optim.betas))
