"""What a run leaves behind as it goes: metrics records, evaluations, checkpoints, the summary,
and the progress shown on the console."""

from __future__ import annotations

import json
import time
from typing import Any

import torch

from looped.config import TrainConfig
from looped.eval.evaluate import evaluate
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime import progress as console
from looped.runtime.atomic import write_text_atomic
from looped.runtime.distributed import Dist, optimizer_state
from looped.runtime.metrics import append_record, writing
from looped.schedule_spec import parse_depths
from looped.training.run import Progress, Run


def log(run: Run, record: dict[str, Any]) -> None:
    """Append a record to metrics.jsonl (and TensorBoard)."""
    if run.dist.main:
        append_record(run.out, record)
    if run.board is not None:
        run.board.write(record)


def log_train(
    run: Run, progress: Progress, done: int, loss: float, depths: list[int], lr: float
) -> None:
    """A train record of the last step, with throughput since the previous record."""
    now = time.time()
    dt = max(now - progress.t_last, 1e-9)
    world = run.dist.world
    mfu = (progress.flops - progress.flops_last) / dt / (run.peak * world) if run.peak else None
    cuda = run.dist.device.type == "cuda"
    record = {
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
        "tokens_per_s": progress.tokens_since / dt,
        "mfu": mfu,
        "mem_gb": torch.cuda.max_memory_allocated(run.dist.device) / 2**30 if cuda else None,
    }
    log(run, record)
    progress.tokens_since, progress.t_last, progress.flops_last = 0, now, progress.flops


def _grad_norm(progress: Progress) -> float | None:
    norm = progress.grad_norm
    if norm is None:
        return None
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # FSDP: DTensor


def show_step(run: Run, progress: Progress, bar: Any, done: int, loss: float, depth: int) -> None:
    """The progress bar (or on_step), and after ~20 steps the wall time still to go."""
    eta_at = min(run.start.step + 20, run.total - 1)
    if done == eta_at and done > run.start.step + 5:
        rate = (progress.flops - run.start_flops) / max(time.time() - progress.t0, 1e-9)
        run.say(console.eta_line(run.out.name, rate, run.planned - progress.flops))
    bar.update(1)
    bar.set_postfix(loss=f"{loss:.3f}", K=depth, refresh=False)
    if run.opts.on_step is not None:
        run.opts.on_step(done, run.total, loss, depth)


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
        "run_id": run.start.run_id,  # binds the checkpoint's files together (checkpoint.load_state)
        "loss": progress.last_loss,  # the summary's final_loss when resumed at the last step
    }
    keep = tuple(run.opts.save_steps)
    ckpt_lib.save_checkpoint(run.out, step, weights, state, run.config_yaml, cfg.keep_last, keep)
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
        with writing(run.out):
            write_text_atomic(run.out / "summary.json", json.dumps(summary, indent=2))
    return summary
