"""Train one looped transformer: one process, or many under torchrun (DDP, or FSDP2).

    looped train --config tiny --out runs/tiny                       # bios, ~20 s on a laptop CPU
    looped train --config tiny --out runs/k2 schedule=fixed:2 budget_frac=0.45
    torchrun --standalone --nproc_per_node=8 -m looped train --config 200m --out runs/200m

Each optimizer step: K = schedule.depth(step), then `grad_accum` micro-batches at depth K, each
from a generator seeded by (seed, step, micro, rank), then AdamW at `lr_at(step)`. All three are
functions of the step, so a resumed run repeats the uninterrupted one bitwise (fp32, CPU). The
run stops at `max_steps` or where its modeled FLOPs fit the budget; a NaN/inf loss stops it.
`training.run` prepares a run, `training.records` writes what it leaves behind.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from looped.config import TrainConfig, validate
from looped.data.batching import train_generator
from looped.errors import UserError
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime import faults
from looped.runtime import progress as console
from looped.runtime.device import resolve_dtype
from looped.runtime.distributed import Dist, StopRequested, no_sync
from looped.runtime.lock import dir_lock
from looped.training.optimizer import lr_at
from looped.training.records import evaluate_now, log_train, save, show_step, write_summary
from looped.training.run import Progress, Run, RunOptions, prepare


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
    progress = Progress(flops=run.start_flops, flops_last=run.start_flops, last_loss=run.start.loss)
    stopped = _loop(run, progress)
    if stopped is not None:
        print(f"stopped at step {stopped}; continue with --resume", file=sys.stderr)
        return {"stopped": stopped}
    if run.total not in progress.saved:
        save(run, progress, run.total)  # the weights first: a failing evaluation must not lose them
    faults.failpoint("train.before_summary", run.total)
    progress.last_eval = evaluate_now(run, progress, run.total)
    if run.board is not None:
        run.board.close()
    return write_summary(run, progress)


def _loop(run: Run, progress: Progress) -> int | None:
    """Train to the end; returns the step at which a stop request (Ctrl-C) saved it."""
    cfg, opts = run.cfg, run.opts
    hidden = opts.quiet or opts.on_step is not None or not run.dist.main
    bar = console.bar(run.total, run.start.step, opts.desc or run.out.name, hidden)
    with bar, StopRequested() as stop:
        for step in range(run.start.step, run.total):
            depths = step_depths(run, step)
            lr = lr_at(step, run.total, cfg.optim)
            done = step + 1
            logged = done % cfg.log_interval == 0 or done == run.total
            loss, stop_now = train_step(run, step, depths, lr, stop, progress, logged)
            progress.flops += step_flops(run, depths)
            progress.tokens_since += run.tokens_per_step
            progress.last_loss = loss
            show_step(run, progress, bar, done, loss, depths[0])
            if logged:
                log_train(run, progress, done, loss, depths, lr)
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
    if len(set(depths)) == 1:
        return run.flops_at[depths[0]] * run.tokens_per_step
    per_micro = run.tokens_per_step // len(depths)
    return sum(run.flops_at[k] * per_micro for k in depths)


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
    run: Run,
    step: int,
    depths: list[int],
    lr: float,
    stop: StopRequested,
    progress: Progress,
    logged: bool = True,
) -> tuple[float, bool]:
    """One optimizer step: micro-batch m at depth depths[m], then AdamW. Returns the mean loss and
    whether any process was asked to stop; leaves the pre-clip gradient norm in `progress`."""
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
