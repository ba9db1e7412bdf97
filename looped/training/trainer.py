"""Train one looped transformer: one process, or many under torchrun (DDP, or FSDP2).

    looped train --config tiny --out runs/tiny                       # bios, ~20 s on a laptop CPU
    looped train --config tiny --out runs/tiny --resume              # continue after a crash
    looped train --config tiny --out runs/k2 schedule=fixed:2 budget_frac=0.45
    looped train --config tiny --out runs/ff --branch-from runs/k4/checkpoints/step_0000120 \
        schedule=fixed-first:k=4,frac=0.8,then=uniform:1-16
    torchrun --standalone --nproc_per_node=8 -m looped train --config 200m --out runs/200m

Each optimizer step: K = schedule.depth(step) (the same on every rank, no communication), then
`grad_accum` micro-batches at depth K, each drawn from a generator seeded by (seed, step, micro,
rank) (with `global_batch`, by the micro-batch's index in the whole step), then AdamW with the
LR `schedules.lr_at(step)`. Because the depth, the batch and the LR are functions of the step, a
resumed run repeats the uninterrupted one bitwise (fp32, CPU), and a run branched off another at
step s is exactly the run that would have been trained from scratch, when the two agree on every
depth and learning rate before s (`training.lineage` checks both before anything is written).

The run stops at `max_steps`, or at the step count whose modeled FLOPs fit `budget_flops` (or
`budget_frac` of the preset's `full_budget_flops`): fixed, fixed-first and uniform schedules then
spend the same modeled compute. A NaN/inf loss stops the run and keeps the last good checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from looped.commands.common import OverrideParser
from looped.config import TrainConfig, load_config, to_yaml, validate
from looped.data.batching import DataSource, build_source, train_generator
from looped.errors import UserError
from looped.eval.evaluate import evaluate
from looped.eval.recall import check_queries_fit, recall_queries
from looped.flops import flops_per_token, schedule_flops, steps_for_budget, tokens_per_step
from looped.model import LoopedTransformer, fit_vocab
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime import faults
from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import device_name, peak_flops, resolve_dtype
from looped.runtime.distributed import (
    Dist,
    StopRequested,
    load_optimizer_state,
    no_sync,
    optimizer_state,
    wrap_distributed,
)
from looped.runtime.lock import dir_lock
from looped.schedules import Schedule, lr_at, parse_depths, parse_schedule
from looped.training.lineage import Restored, restore, write_start


# -- set-up ----------------------------------------------------------------------------------
def make_optimizer(model: torch.nn.Module, optim: Any, fused: bool = False) -> torch.optim.AdamW:
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
    return torch.optim.AdamW(groups, lr=optim.lr, betas=tuple(optim.betas), fused=fused or None)


def resolve_batch(cfg: TrainConfig, world_size: int = 1) -> None:
    """Set grad_accum so that global_batch sequences make one step at this world size: the
    same preset then trains the same way on 1 GPU or 64."""
    if cfg.global_batch <= 0:
        return
    per_pass = cfg.batch_size * world_size
    if cfg.global_batch % per_pass:
        raise UserError(
            f"global_batch={cfg.global_batch} is not a multiple of batch_size x processes = {per_pass}; "
            "change batch_size or global_batch"
        )
    cfg.grad_accum = cfg.global_batch // per_pass


def total_steps_for(cfg: TrainConfig, world_size: int = 1) -> int:
    """Optimizer steps this run takes: the smallest of the given stop criteria."""
    schedule = parse_schedule(cfg.schedule, cfg.seed)
    tokens = tokens_per_step(cfg, world_size)
    candidates = []
    if cfg.max_steps > 0:
        candidates.append(cfg.max_steps)
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


def check_config(cfg: TrainConfig) -> None:
    """Catch bad values early, with one line each, before any work is done."""
    validate(cfg)


def full_weights(model: torch.nn.Module, cfg: TrainConfig, dist: Dist) -> dict[str, torch.Tensor]:
    """Unsharded CPU weights for a checkpoint (gathers FSDP2 shards on every rank)."""
    if dist.enabled and cfg.fsdp:
        # torch.distributed.checkpoint takes over a second to import; one process never needs it
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if cfg.model.tie_embeddings:
            sd.pop("head.weight", None)
        return {k: v.contiguous() for k, v in sd.items()}
    return ckpt_lib.unique_state_dict(model)


@dataclass
class RunOptions:
    # continue from the latest checkpoint in the run directory
    resume: bool = False
    # start a new run from these weights (run or checkpoint dir)
    init_from: str | None = None
    # continue this checkpoint (weights, optimizer, step); checked exact
    branch_from: str | None = None
    # no progress bar
    quiet: bool = False
    # extra checkpoints at these steps, never pruned (branch points)
    save_steps: tuple[int, ...] = ()
    # extra evaluations at these steps (e.g. just before a switch)
    eval_steps: tuple[int, ...] = ()
    # on_step(done, total, loss, depth) replaces the bar (the demo's workers)
    on_step: Any = None
    # progress bar label (default: the run directory name)
    desc: str | None = None


@dataclass
class Run:
    """A prepared run: everything the loop and its hooks read, fixed before the first step."""

    cfg: TrainConfig
    out: Path  # the run directory
    dist: Dist
    opts: RunOptions
    source: DataSource  # training batches, evaluation batches, the bios corpus for recall
    schedule: Schedule
    total: int  # optimizer steps of the whole run
    model: LoopedTransformer  # the model itself: evaluation, weights, parameter count
    # what a step calls: DDP(model), or the model itself (one process, or sharded by FSDP2)
    wrapped: torch.nn.Module
    optimizer: torch.optim.Optimizer
    # where it starts: the step (0, or the one resumed or branched from), the lineage, the run
    # id of its checkpoints (kept across resumes), the loss of the step before (NaN afresh)
    start: Restored
    config_yaml: str  # the resolved config, stored in every checkpoint
    # derived from the above
    tokens_per_step: int = field(init=False)  # over all processes
    autocast: Any = field(init=False)  # bf16 autocast context, or a null context for fp32
    flops_at: dict[int, float] = field(init=False)  # modeled training FLOPs/token at each depth
    planned: float = field(init=False)  # modeled FLOPs of the whole run (expected over K)
    peak: float | None = field(init=False)  # the device's peak FLOP/s for MFU; None when unknown
    board: Any = field(init=False)  # TensorBoard writer, or None

    def __post_init__(self) -> None:
        cfg, device = self.cfg, self.dist.device
        self.tokens_per_step = tokens_per_step(cfg, self.dist.world)
        bf16 = cfg.dtype == "bf16"
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else nullcontext()
        depths = range(1, self.schedule.max_depth() + 1)
        self.flops_at = {k: flops_per_token(cfg.model, k, cfg.seq_len) for k in depths}
        self.planned = schedule_flops(
            cfg.model, self.schedule, self.total, self.tokens_per_step, cfg.seq_len
        )
        self.peak = peak_flops(device_name(device), cfg.dtype)
        self.board = _tensorboard(self.out) if cfg.tensorboard and self.dist.main else None

    @property
    def start_flops(self) -> float:
        """Modeled FLOPs spent before the first step this process trains."""
        return self.start.flops if self.start.step else 0.0

    @property
    def sharded(self) -> bool:
        return self.dist.enabled and self.cfg.fsdp

    def say(self, msg: str) -> None:
        if self.dist.main and not self.opts.quiet:
            tqdm.write(msg, file=sys.stderr)


@dataclass
class Progress:
    """What the loop and its hooks update as the run goes."""

    flops: float  # modeled FLOPs spent so far
    t0: float = field(default_factory=time.time)  # when this process started stepping
    overhead: float = 0.0  # seconds spent in evaluation and checkpoints (not training)
    saved: set[int] = field(default_factory=set)  # steps checkpointed by this process
    last_loss: float = math.nan
    last_eval: dict[str, Any] | None = None
    t_last: float = field(default_factory=time.time)  # the previous train record: time,
    tokens_since: int = 0  # tokens since then,
    flops_last: float = 0.0  # and FLOPs spent then (throughput and MFU per record)
    grad_norm: Any = None  # the last step's pre-clip global gradient norm (a tensor)


def train(cfg: TrainConfig, out_dir: str | Path, **options: Any) -> dict[str, Any]:
    """Train a run into `out_dir` (options: see RunOptions); returns the final summary, also
    written to out_dir/summary.json."""
    opts = RunOptions(**options)
    check_config(cfg)
    dist = Dist(cfg.device)
    cfg.dtype = resolve_dtype(cfg.dtype, dist.device)  # config.yaml records what was used
    out = Path(out_dir)
    try:
        # One writer per run directory, taken before anything is read or written there (a
        # second writer is refused with one line naming the holder); rank 0 writes, so it
        # alone holds the lock under torchrun.
        with dir_lock(out, "looped train") if dist.main else nullcontext():
            return _train(cfg, out, dist, opts)
    finally:
        dist.close()


# -- the loop --------------------------------------------------------------------------------
def _train(cfg: TrainConfig, out: Path, dist: Dist, opts: RunOptions) -> dict[str, Any]:
    run = prepare(cfg, out, dist, opts)
    if run is None:  # resumed a run that had already finished
        return json.loads((out / "summary.json").read_text())
    run.model.train()
    bar = tqdm(
        total=run.total,
        initial=run.start.step,
        desc=opts.desc or out.name,
        disable=opts.quiet or opts.on_step is not None or not dist.main,
        dynamic_ncols=True,
    )
    run.say(
        f"{out.name}: {run.total} steps x {run.tokens_per_step} tokens, schedule {run.schedule} "
        f"(mean K {run.schedule.mean_depth(run.total):.2f}), modeled compute {run.planned:.3g} "
        f"FLOPs, {run.model.num_params() / 1e6:.2f}M params"
    )
    progress = Progress(flops=run.start_flops, flops_last=run.start_flops, last_loss=run.start.loss)
    try:
        with StopRequested() as stop:
            for step in range(run.start.step, run.total):
                depths = step_depths(run, step)
                depth = depths[0]
                lr = lr_at(step, run.total, cfg.optim)
                logged = (step + 1) % cfg.log_interval == 0 or step + 1 == run.total
                loss, stop_now = train_step(run, step, depths, lr, stop, progress, logged)
                progress.flops += step_flops(run, depths)
                progress.tokens_since += run.tokens_per_step
                progress.last_loss = loss
                done = step + 1
                _say_eta(run, progress, done)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", K=depth, refresh=False)
                if opts.on_step is not None:
                    opts.on_step(done, run.total, loss, depth)
                if done % cfg.log_interval == 0 or done == run.total:
                    log_train(run, progress, done, loss, depths, lr)
                if _due(cfg.eval_interval, done, opts.eval_steps) and done < run.total:
                    progress.last_eval = evaluate_now(run, progress, done)
                if _due(cfg.ckpt_interval, done, opts.save_steps):
                    save(run, progress, done)
                if stop_now and done < run.total:
                    if done not in progress.saved:
                        save(run, progress, done)
                    bar.close()
                    print(f"stopped at step {done}; continue with --resume", file=sys.stderr)
                    return {"stopped": done}
    finally:
        bar.close()
    if run.total not in progress.saved:
        save(run, progress, run.total)  # the weights first: a failing evaluation must not lose them
    faults.failpoint("train.before_summary", run.total)
    progress.last_eval = evaluate_now(run, progress, run.total)
    if run.board is not None:
        run.board.close()
    return write_summary(run, progress)


# -- preparing a run -------------------------------------------------------------------------
def prepare(cfg: TrainConfig, out: Path, dist: Dist, opts: RunOptions) -> Run | None:
    """Data, model, the restore point (resume, branch or init), optimizer and the run directory:
    everything before the first step. None when resuming a run that has already finished."""
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    source = _data(cfg, dist.world)
    schedule = parse_schedule(cfg.schedule, cfg.seed)
    total = total_steps_for(cfg, dist.world)
    existing = ckpt_lib.list_checkpoints(out)
    if existing and not opts.resume:
        raise UserError(
            f"{out} already holds checkpoints; pass --resume to continue or choose a new --out"
        )

    torch.manual_seed(cfg.seed)
    model = LoopedTransformer(cfg.model)
    start = restore(
        cfg,
        out,
        model,
        schedule,
        total,
        existing,
        dist,
        resume=opts.resume,
        branch_from=opts.branch_from,
        init_from=opts.init_from,
    )
    if start.finished:
        if dist.main and not opts.quiet:
            print(f"{out} already finished {total} steps; nothing to resume", file=sys.stderr)
        return None
    wrapped, optimizer = _place(model, cfg, dist, schedule, total, start.optimizer)
    config_yaml = to_yaml(cfg)
    if dist.main:
        with _writing(out):  # the first write: everything before it only reads
            out.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out / "config.yaml", config_yaml)
            write_start(out, start)
    return Run(
        cfg=cfg,
        out=out,
        dist=dist,
        opts=opts,
        source=source,
        schedule=schedule,
        total=total,
        model=model,
        wrapped=wrapped,
        optimizer=optimizer,
        start=start,
        config_yaml=config_yaml,
    )


def _data(cfg: TrainConfig, world: int) -> DataSource:
    """The run's data, and what it settles in the config: the vocabulary (fitted to the
    corpus) and, with global_batch, grad_accum at this world size."""
    source = build_source(cfg.data)
    cfg.model.vocab_size = fit_vocab(cfg.model.vocab_size, source.vocab_size)
    if source.bios is not None:  # fail now, not at the first evaluation
        check_queries_fit(recall_queries(source.bios), cfg.model.seq_len)
    resolve_batch(cfg, world)
    return source


def _place(
    model: LoopedTransformer,
    cfg: TrainConfig,
    dist: Dist,
    schedule: Schedule,
    total: int,
    state: dict[str, Any] | None,
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model on its device (compiled, wrapped or sharded) and its optimizer, with the
    restored state when the run continues a checkpoint."""
    model.to(dist.device)
    if cfg.compile:
        model.compile_block()
    depths = [k for k, n in schedule.step_counts(total).items() if n > 0]
    wrapped = wrap_distributed(model, cfg.fsdp, dist, depths)
    optimizer = make_optimizer(model, cfg.optim)  # after sharding: FSDP2 swaps in DTensor params
    if state is not None:
        load_optimizer_state(model, optimizer, state, dist.enabled and cfg.fsdp, dist.device)
    return wrapped, optimizer


# -- one step --------------------------------------------------------------------------------
def step_depths(run: Run, step: int) -> list[int]:
    """K for each micro-batch of `step`: the step's K for all, or (depth_per_micro) a draw per
    micro-batch index, the same on every process (FSDP needs the same collectives everywhere)."""
    cfg = run.cfg
    if not cfg.depth_per_micro:
        return [run.schedule.depth(step, run.total)] * cfg.grad_accum
    return [run.schedule.depth(step, run.total, micro=m) for m in range(cfg.grad_accum)]


def step_flops(run: Run, depths: list[int]) -> float:
    """Modeled FLOPs of one step whose micro-batches ran at `depths`."""
    if len(set(depths)) == 1:
        return run.flops_at[depths[0]] * run.tokens_per_step
    per_micro = run.tokens_per_step // len(depths)
    return sum(run.flops_at[k] * per_micro for k in depths)


def micro_batches(run: Run, step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The step's micro-batches, each drawn from its own generator; with `split_step_batch`, the
    step's whole batch drawn once (as a one-micro-batch run draws it) and cut into pieces, so
    that K per micro-batch and K per step train on the same sequences."""
    cfg, rank = run.cfg, run.dist.rank
    if cfg.split_step_batch:
        gen = train_generator(cfg.seed, step, 0, rank, 1, cfg.global_batch)
        x, y = run.source.train.sample_batch(cfg.batch_size * cfg.grad_accum, cfg.seq_len, gen)
        yield from zip(x.split(cfg.batch_size), y.split(cfg.batch_size))
        return
    for micro in range(cfg.grad_accum):
        gen = train_generator(cfg.seed, step, micro, rank, cfg.grad_accum, cfg.global_batch)
        yield run.source.train.sample_batch(cfg.batch_size, cfg.seq_len, gen)


def train_step(
    run: Run,
    step: int,
    depths: list[int],
    lr: float,
    stop: StopRequested,
    progress: Progress,
    logged: bool = True,
) -> tuple[float, bool]:
    """One optimizer step: micro-batch m at depth depths[m], then AdamW. Returns the loss (mean
    over micro-batches and processes) and whether any process was asked to stop; leaves the
    pre-clip gradient norm in `progress` when the step is `logged` or clipped (read at logging
    steps only: no extra sync)."""
    cfg, dist = run.cfg, run.dist
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    loss_acc = torch.zeros((), device=dist.device)  # summed on device: one sync per step
    for micro, (x, y) in enumerate(micro_batches(run, step)):
        x, y = x.to(dist.device), y.to(dist.device)
        last = micro == cfg.grad_accum - 1
        with no_sync(run.wrapped, cfg.fsdp, dist, last), run.autocast:
            _, loss = run.wrapped(x, depth=depths[micro], targets=y)
        (loss / cfg.grad_accum).backward()
        loss_acc += loss.detach().float() / cfg.grad_accum
    loss_acc, stop_now = dist.agree(loss_acc, stop.flag)
    loss_value = loss_acc.item()
    if not math.isfinite(loss_value):  # stop before the update: the last checkpoint stays good
        good = ckpt_lib.list_checkpoints(run.out)
        where = f"; the last good checkpoint is {good[-1][1]}" if good else ""
        raise UserError(
            f"loss became {loss_value} at step {step} (depth {depths[0]}, lr {lr:.2e}); lower optim.lr or check the data{where}"
        )
    # The norm comes free with clipping; without it, only a logged step pays for it (max_norm=inf
    # leaves the gradients as they are: a multiply by exactly 1)
    if cfg.optim.grad_clip > 0 or logged:
        clip = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else math.inf
        progress.grad_norm = torch.nn.utils.clip_grad_norm_(run.wrapped.parameters(), clip)
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return loss_value, stop_now


# -- logging, evaluation, checkpoints, summary -----------------------------------------------
def log(run: Run, record: dict[str, Any]) -> None:
    """Append a record to metrics.jsonl (and TensorBoard)."""
    if run.dist.main:
        line = json.dumps(record) + "\n"
        with _writing(run.out), open(run.out / "metrics.jsonl", "a") as f:
            if faults.armed("metrics.mid_line", record["step"]):
                f.write(line[: len(line) // 2])
                f.flush()
                faults.kill()
            f.write(line)
    if run.board is not None:
        for key, value in _scalars(record):
            run.board.add_scalar(f"{record['kind']}/{key}", value, record["step"])


def log_train(
    run: Run, progress: Progress, done: int, loss: float, depths: list[int], lr: float
) -> None:
    """A train record: loss, depth, pre-clip gradient norm and LR of the last step (with each
    micro-batch's depth under depth_per_micro); throughput since the previous record."""
    now = time.time()
    dt = max(now - progress.t_last, 1e-9)
    tps = progress.tokens_since / dt
    world = run.dist.world
    mfu = (progress.flops - progress.flops_last) / dt / (run.peak * world) if run.peak else None
    cuda = run.dist.device.type == "cuda"
    log(
        run,
        {
            "kind": "train",
            "step": done,
            "loss": loss,
            "depth": depths[0],
            "lr": lr,
            "grad_norm": _grad_norm(progress),
            **({"depths": depths} if run.cfg.depth_per_micro else {}),
            "tokens": done * run.tokens_per_step,
            "flops": progress.flops,
            "wall": now - progress.t0,
            "train_wall": now - progress.t0 - progress.overhead,
            "tokens_per_s": tps,
            "mfu": mfu,
            "mem_gb": torch.cuda.max_memory_allocated(run.dist.device) / 2**30 if cuda else None,
        },
    )
    progress.tokens_since, progress.t_last, progress.flops_last = 0, now, progress.flops


def _grad_norm(progress: Progress) -> float | None:
    norm = progress.grad_norm
    if norm is None:
        return None
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # FSDP: DTensor


def _say_eta(run: Run, progress: Progress, done: int) -> None:
    """Once the first steps are measured, the wall time the rest of the run will take."""
    eta_at = min(run.start.step + 20, run.total - 1)
    if done != eta_at or done <= run.start.step + 5:
        return
    rate = (progress.flops - run.start_flops) / max(time.time() - progress.t0, 1e-9)
    left = run.planned - progress.flops
    run.say(
        f"{run.out.name}: {rate / 1e12:.3g} modeled TFLOP/s so far; the remaining "
        f"{left:.3g} FLOPs need about {_duration(left / rate)}"
    )


def _due(interval: int, done: int, extra: tuple[int, ...]) -> bool:
    """Every `interval` steps (0 = never), and at the listed steps."""
    return bool(interval and done % interval == 0) or done in extra


def evaluate_now(run: Run, progress: Progress, step: int) -> dict[str, Any]:
    """Evaluate at every serving depth and log the record (its time counts as overhead)."""
    started = time.time()
    cfg = run.cfg
    run.model.eval()
    with run.autocast:
        result = evaluate(
            run.model,
            run.source,
            parse_depths(cfg.eval_depths),
            cfg.batch_size,
            cfg.seq_len,
            cfg.eval_batches,
            run.dist.device,
        )
    run.model.train()
    record = {"kind": "eval", "step": step, "flops": progress.flops, **result}
    log(run, record)
    progress.overhead += time.time() - started
    return record


def save(run: Run, progress: Progress, step: int) -> None:
    """Checkpoint weights, optimizer and position (every rank gathers; rank 0 writes)."""
    started = time.time()
    progress.saved.add(step)
    cfg = run.cfg
    weights = full_weights(run.model, cfg, run.dist)
    opt_state = optimizer_state(run.model, run.optimizer, run.sharded)
    if not run.dist.main:
        return
    state = {
        "step": step,
        "total_steps": run.total,
        "schedule": str(run.schedule),
        "optimizer": opt_state,
        "flops": progress.flops,
        "lineage": run.start.lineage,
        "lr_schedule": [cfg.optim.lr_schedule, cfg.optim.lr, cfg.optim.warmup_steps],
        "world_size": run.dist.world,  # checked on resume and branch (lineage.check_resume)
        "run_id": run.start.run_id,  # binds the checkpoint's files together (checkpoint.check)
        "loss": progress.last_loss,  # the summary's final_loss when resumed at the last step
    }
    ckpt_lib.save_checkpoint(
        run.out,
        step,
        weights,
        state,
        run.config_yaml,
        cfg.keep_last,
        keep=tuple(run.opts.save_steps),
    )
    progress.overhead += time.time() - started


def write_summary(run: Run, progress: Progress) -> dict[str, Any]:
    """The run's summary, returned and written to summary.json."""
    summary = {
        "steps": run.total,
        "schedule": str(run.schedule),
        "flops": progress.flops,
        "final_loss": progress.last_loss,
        "wall": time.time() - progress.t0,
        "params": run.model.num_params(),
        "tokens": run.total * run.tokens_per_step,
        "switch_step": run.schedule.switch_step(run.total),
        "eval": progress.last_eval,
        "lineage": run.start.lineage,
    }
    if run.dist.main:
        with _writing(run.out):
            write_text_atomic(run.out / "summary.json", json.dumps(summary, indent=2))
    return summary


@contextmanager
def _writing(out: Path) -> Iterator[None]:
    """Turn a failed write in the run directory (disk full, read-only, quota) into one line
    naming the file and the reason; checkpoints already written stay as they are."""
    try:
        yield
    except OSError as err:  # name the file, not the hidden temporary it was written through
        name = re.sub(r"/\.tmp-(.*)-[0-9a-f]{8}$", r"/\1", str(err.filename or out))
        raise UserError(
            f"cannot write {name}: {err.strerror or err}; free space in {out} (or make it "
            "writable) and continue with --resume"
        ) from None


def _tensorboard(out: Path) -> Any:
    try:  # tensorboard is an optional extra, imported only when a run asks for it
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UserError(
            "tensorboard=true needs the tensorboard package: pip install -e '.[tensorboard]'"
        ) from None
    return SummaryWriter(str(out / "tb"))


def _scalars(record: dict[str, Any], prefix: str = ""):
    """Flatten a metrics record into (name, number) pairs, e.g. nll/4 or recall/4/bits_per_person."""
    for key, value in record.items():
        if key in ("kind", "step"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _scalars(value, name + "/")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield name, value


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# -- command line ----------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    parser = OverrideParser(
        prog="looped train",
        description="Train a looped transformer. Overrides are key=value pairs on the config "
        "fields of looped/config.py, e.g. schedule=fixed:2 model.d_model=128 optim.lr=1e-3.",
        epilog="examples (flags and overrides in any order):\n"
        "  looped train --config tiny --out runs/tiny\n"
        "  looped train --config tiny --out runs/k2 --budget-frac 0.45 schedule=fixed:2\n"
        "  looped train --config tiny --out runs/a --print-config model.d_model=128",
    )
    parser.add_argument("--config", default="tiny", help="preset name or YAML path (default: tiny)")
    parser.add_argument("--out", required=True, help="run directory (checkpoints, metrics.jsonl)")
    parser.add_argument(
        "--resume", action="store_true", help="continue from the latest checkpoint in --out"
    )
    parser.add_argument("--init-from", help="start a new run from this run's/checkpoint's weights")
    parser.add_argument(
        "--branch-from",
        help="continue another run's checkpoint (weights, optimizer, step) under this config",
    )
    parser.add_argument(
        "--budget-flops", type=float, help="stop at this many modeled training FLOPs"
    )
    parser.add_argument(
        "--budget-frac", type=float, help="budget as a fraction of the preset's full budget"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    overrides = list(args.overrides)
    if (args.budget_flops is not None or args.budget_frac is not None) and not any(
        o.startswith("max_steps=") for o in overrides
    ):
        overrides.append("max_steps=0")  # a budget decides the length, not the preset's steps
    if args.budget_flops is not None:
        overrides.append(f"budget_flops={args.budget_flops}")
    if args.budget_frac is not None:
        if not 0 < args.budget_frac:
            raise UserError(f"--budget-frac={args.budget_frac} must be > 0")
        overrides.append(f"budget_frac={args.budget_frac}")
    cfg = load_config(args.config, overrides)
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    summary = train(
        cfg,
        args.out,
        resume=args.resume,
        init_from=args.init_from,
        branch_from=args.branch_from,
        quiet=args.quiet,
    )
    if "stopped" in summary:
        return 130
    if int(os.environ.get("RANK", 0)) == 0:
        nll = (summary.get("eval") or {}).get("token_nll", {})
        shown = ", ".join(f"K={k}: {v:.3f}" for k, v in list(nll.items())[:8])
        print(
            f"done: {summary['steps']} steps, {summary['flops']:.3g} modeled FLOPs, {summary['wall']:.0f}s; eval NLL {shown}"
        )
    return 0
