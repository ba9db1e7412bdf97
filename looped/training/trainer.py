"""Train one looped transformer: one process, or many under torchrun (DDP, or FSDP2).

    looped train --config tiny --out runs/tiny                       # bios, ~20 s on a laptop CPU
    looped train --config tiny --out runs/k2 schedule=fixed:2 budget_frac=0.45
    torchrun --standalone --nproc_per_node=8 -m looped train --config 200m --out runs/200m

Each optimizer step: K = schedule.depth(step), then `grad_accum` micro-batches at depth K, each
from a generator seeded by (seed, step, micro, rank), then AdamW at `lr_at(step)`. All three are
functions of the step, so a resumed run repeats the uninterrupted one bitwise (fp32, CPU). The
run stops at `max_steps` or where its modeled FLOPs fit the budget; a NaN/inf loss stops it.

This file reads top to bottom: the set-up, the loop, one step, then what a run leaves behind
(train and eval records, checkpoints, the summary). `run.` is a `training.run.Run`, prepared
before the first step; `cfg.` is a `looped.config.TrainConfig`, where `lr_at` lives too.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from looped.config import TrainConfig, lr_at, to_yaml, validate
from looped.data.batching import train_generator
from looped.errors import UserError
from looped.eval.evaluate import evaluate
from looped.flops import flops_per_token
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime.device import autocast, cpu_kernels, device_name, peak_flops, resolve_dtype
from looped.runtime.distributed import Dist, StopRequested, full_state, no_sync
from looped.runtime.lock import dir_lock
from looped.schedule_spec import parse_depths
from looped.training.run import Run, RunOptions, prepare


# -- set-up ----------------------------------------------------------------------------------
def train(cfg: TrainConfig, out_dir: str | Path, **options: Any) -> dict[str, Any]:
    """Train a run into `out_dir` (options: RunOptions); returns and writes the summary."""
    opts = RunOptions(**options)
    validate(cfg)
    dist = Dist(cfg.device)
    cfg = replace(cfg, dtype=resolve_dtype(cfg.dtype, dist.device))  # config.yaml records it
    out = Path(out_dir)
    try:
        # One writer per run directory; rank 0 writes, so it alone holds the lock.
        with dir_lock(out, "looped train") if dist.main else nullcontext():
            return _train(cfg, out, dist, opts)
    finally:
        dist.close()


@dataclass
class Progress:
    """What the loop and the records update as the run goes."""

    flops: float  # modeled FLOPs spent so far
    t0: float = field(default_factory=time.time)  # when the run started, less any resume's gap
    overhead: float = 0.0  # seconds spent in evaluation and checkpoints (not training)
    saved: set[int] = field(default_factory=set)  # steps checkpointed by this process
    last_loss: float = math.nan
    last_eval: dict[str, Any] | None = None
    t_last: float = field(default_factory=time.time)  # the previous train record: time,
    tokens_since: int = 0  # tokens since then,
    flops_last: float = 0.0  # and FLOPs spent then (throughput and MFU per record)


def _train(cfg: TrainConfig, out: Path, dist: Dist, opts: RunOptions) -> dict[str, Any]:
    run = prepare(cfg, out, dist, opts)
    if run is None:  # resumed a run that had already finished
        return json.loads((out / "summary.json").read_text())
    run.model.train()
    run.say(
        f"{out.name}: {run.total} steps x {run.tokens_per_step} tokens, schedule {run.schedule} "
        f"(mean K {run.schedule.mean_depth(run.total):.2f}), modeled compute {run.planned:.3g} "
        f"FLOPs, {run.model.num_params() / 1e6:.2f}M params"
    )
    start = run.start  # a resumed run's clocks go on from its checkpoint: its seconds are its own
    progress = Progress(flops=start.flops, flops_last=start.flops, last_loss=start.loss)
    progress.t0, progress.overhead = time.time() - start.wall, start.wall - start.train_wall
    stopped = _loop(run, progress)
    if stopped is not None:
        print(f"stopped at step {stopped}; continue with --resume", file=sys.stderr)
        return {"stopped": stopped}
    if run.total not in progress.saved:
        save(run, progress, run.total)  # the weights first: a failing evaluation must not lose them
    progress.last_eval = evaluate_now(run, progress, run.total)
    return write_summary(run, progress)


# -- the loop --------------------------------------------------------------------------------
def _loop(run: Run, progress: Progress) -> int | None:
    """Train to the end; returns the step at which a stop request (Ctrl-C) saved it."""
    cfg, opts, first = run.cfg, run.opts, run.start.step
    hidden = opts.quiet or opts.on_step is not None or not run.dist.main
    bar = tqdm(
        total=run.total, initial=first, desc=run.out.name, disable=hidden, dynamic_ncols=True
    )
    with bar, StopRequested() as stop:
        for step in range(first, run.total):
            depths = step_depths(run, step)
            lr = lr_at(step, run.total, cfg.optim)
            done = step + 1
            logged = done % cfg.log_interval == 0 or done == run.total
            loss, grad_norm, stop_now = train_step(run, step, depths, lr, stop, logged)
            progress.flops += step_flops(run, depths)
            progress.tokens_since += run.tokens_per_step
            progress.last_loss = loss
            show_step(run, progress, bar, done, loss, depths[0])
            if logged:
                log_train(run, progress, done, loss, depths, lr, grad_norm)
            if _due(cfg.eval_interval, done, opts.eval_steps) and done < run.total:
                progress.last_eval = evaluate_now(run, progress, done)
            if _due(cfg.ckpt_interval, done, opts.save_steps):
                save(run, progress, done)
            if stop_now and done < run.total:
                if done not in progress.saved:
                    save(run, progress, done)
                return done
    return None


def _due(interval: int, done: int, extra: tuple[int, ...]) -> bool:
    """Every `interval` steps (0 = never), and at the listed steps."""
    return bool(interval and done % interval == 0) or done in extra


# -- one step --------------------------------------------------------------------------------
def step_depths(run: Run, step: int) -> list[int]:
    """K for each micro-batch: the step's K, or one draw each under depth_per_micro."""
    cfg = run.cfg
    if not cfg.depth_per_micro:
        return [run.schedule.depth(step, run.total)] * cfg.grad_accum
    return [run.schedule.depth(step, run.total, micro=m) for m in range(cfg.grad_accum)]


def step_flops(run: Run, depths: list[int]) -> float:
    """Modeled FLOPs of one step whose micro-batches ran at `depths`."""
    per_token = [flops_per_token(run.cfg.model, k, run.cfg.seq_len) for k in depths]
    if len(set(depths)) == 1:
        return per_token[0] * run.tokens_per_step
    per_micro = run.tokens_per_step // len(depths)
    return sum(f * per_micro for f in per_token)


def micro_batches(run: Run, step: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The step's micro-batches, each from its own generator; with `split_step_batch`, the whole
    batch drawn once and cut, so K per micro-batch and K per step train on the same sequences."""
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
    run: Run, step: int, depths: list[int], lr: float, stop: StopRequested, logged: bool = True
) -> tuple[float, torch.Tensor | None, bool]:
    """One optimizer step: micro-batch m at depth depths[m], then AdamW. Returns the mean loss,
    the pre-clip gradient norm (None when neither clipping nor the record needs it) and whether
    any process was asked to stop."""
    cfg, dist = run.cfg, run.dist
    for group in run.optimizer.param_groups:
        group["lr"] = lr
    loss_acc = torch.zeros((), device=dist.device)  # summed on device: one sync per step
    for micro, (x, y) in enumerate(micro_batches(run, step)):
        x, y = x.to(dist.device), y.to(dist.device)
        last = micro == cfg.grad_accum - 1
        with no_sync(run.wrapped, cfg.fsdp, dist, last), autocast(dist.device, cfg.dtype):
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
    grad_norm = None
    if cfg.optim.grad_clip > 0 or logged:
        clip = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(run.wrapped.parameters(), clip)
    run.optimizer.step()
    run.optimizer.zero_grad(set_to_none=True)
    return loss_value, grad_norm, stop_now


# -- what a run leaves behind ----------------------------------------------------------------
def log_train(
    run: Run,
    progress: Progress,
    done: int,
    loss: float,
    depths: list[int],
    lr: float,
    grad_norm: torch.Tensor | None,
) -> None:
    """A train record of the last step, with throughput since the previous record."""
    now = time.time()
    dt = max(now - progress.t_last, 1e-9)
    device, world = run.dist.device, run.dist.world
    peak = peak_flops(device_name(device), run.cfg.dtype)
    mfu = (progress.flops - progress.flops_last) / dt / (peak * world) if peak else None
    if grad_norm is not None:  # FSDP: a DTensor
        grad_norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
    record = {"kind": "train", "step": done, "loss": loss, "depth": depths[0], "lr": lr}
    record["grad_norm"] = None if grad_norm is None else float(grad_norm)
    record |= {"depths": depths} if run.cfg.depth_per_micro else {}
    record |= {
        "tokens": done * run.tokens_per_step,
        "flops": progress.flops,
        "wall": now - progress.t0,
        "train_wall": now - progress.t0 - progress.overhead,
        "tokens_per_s": progress.tokens_since / dt,
        "mfu": mfu,
    }
    cuda = device.type == "cuda"
    record["mem_gb"] = torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None
    run.log.append(record)
    progress.tokens_since, progress.t_last, progress.flops_last = 0, now, progress.flops


def show_step(run: Run, progress: Progress, bar: Any, done: int, loss: float, depth: int) -> None:
    """The progress bar (or on_step), and after ~20 steps the wall time still to go."""
    eta_at = min(run.start.step + 20, run.total - 1)
    if done == eta_at and done > run.start.step + 5:
        rate = (progress.flops - run.start.flops) / max(time.time() - progress.t0, 1e-9)
        left = run.planned - progress.flops  # at the modeled throughput so far
        run.say(
            f"{run.out.name}: {rate / 1e12:.3g} modeled TFLOP/s so far; the remaining "
            f"{left:.3g} FLOPs need about {duration(left / rate)}"
        )
    bar.update(1)
    bar.set_postfix(loss=f"{loss:.3f}", K=depth, refresh=False)
    if run.opts.on_step is not None:
        run.opts.on_step(done, run.total, loss, depth)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def evaluate_now(run: Run, progress: Progress, step: int) -> dict[str, Any]:
    """Evaluate at every serving depth and log the record (its time counts as overhead)."""
    started = time.time()
    cfg, device = run.cfg, run.dist.device
    depths = parse_depths(cfg.eval_depths)
    with autocast(device, cfg.dtype):  # `evaluate` puts the model in eval mode and back
        result = evaluate(
            run.model, run.source, depths, cfg.batch_size, cfg.seq_len, cfg.eval_batches, device
        )
    record = {"kind": "eval", "step": step, "flops": progress.flops, **result}
    run.log.append(record)
    progress.overhead += time.time() - started
    return record


def save(run: Run, progress: Progress, step: int) -> None:
    """Checkpoint weights, optimizer and position (every rank gathers; rank 0 writes)."""
    started = time.time()
    progress.saved.add(step)
    cfg = run.cfg
    weights, opt_state = full_state(run.model, run.optimizer, run.dist.enabled and cfg.fsdp)
    if not run.dist.main:
        return
    state = {"step": step, "total_steps": run.total, "schedule": str(run.schedule)}
    state |= {
        "optimizer": opt_state,
        "flops": progress.flops,
    }
    wall = started - progress.t0  # the clocks a resume goes on from (`Restored.wall`)
    state |= {
        "wall": wall,
        "train_wall": wall - progress.overhead,
        "lineage": run.start.lineage,
    }
    state["lr_schedule"] = [cfg.optim.lr_schedule, cfg.optim.lr, cfg.optim.warmup_steps]
    state["world_size"] = run.dist.world  # checked on resume and branch (lineage.check_resume)
    state["run_id"] = run.start.run_id  # binds the checkpoint's files together (load_state)
    state["loss"] = progress.last_loss  # the summary's final_loss when resumed at the last step
    keep = tuple(run.opts.save_steps)
    ckpt_lib.save_checkpoint(run.out, step, weights, state, to_yaml(cfg), cfg.keep_last, keep)
    progress.overhead += time.time() - started


def write_summary(run: Run, progress: Progress) -> dict[str, Any]:
    """The run's summary, returned and written to summary.json (the run is then finished)."""
    summary = {"steps": run.total, "schedule": str(run.schedule), "flops": progress.flops}
    summary |= {
        "final_loss": progress.last_loss,
        "wall": time.time() - progress.t0,
    }
    summary["params"] = run.model.num_params()
    summary["device"] = run.dist.device.type  # "cpu" | "cuda": a study flags a cell mixing the two
    if run.dist.device.type == "cpu":  # which kernels: a rerun repeats bitwise only on the same
        summary["cpu_kernels"] = cpu_kernels()
    summary["tokens"] = run.total * run.tokens_per_step
    summary["switch_step"] = run.schedule.switch_step(run.total)
    summary |= {
        "eval": progress.last_eval,
        "lineage": run.start.lineage,
    }
    run.log.finish(summary)
    return summary
