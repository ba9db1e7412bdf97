"""Train one looped transformer: one process, or many under torchrun (DDP, or FSDP2).

    looped train --config tiny --out runs/tiny                       # bios, ~20 s on a laptop CPU
    looped train --config tiny --out runs/tiny --resume              # continue after a crash
    looped train --config tiny --out runs/k2 schedule=fixed:2 budget_frac=0.45
    looped train --config tiny --out runs/ff --branch-from runs/k4/checkpoints/step_0000120 \
        schedule=fixed-first:k=4,frac=0.8,then=uniform:1-16
    torchrun --standalone --nproc_per_node=8 -m looped train --config 200m --out runs/200m

Each optimizer step: K = schedule.depth(step) (the same on every rank, no communication), then
`grad_accum` micro-batches at depth K, each drawn from a generator seeded by (seed, step, micro,
rank), then AdamW. Because both the depth and the batch are functions of the step, a resumed run
repeats the uninterrupted one bitwise (fp32, CPU), and a run branched off another at step s is
exactly the run that would have been trained from scratch, when the two agree on every depth and
learning rate before s (checked).

The run stops at `max_steps`, or at the step count whose modeled FLOPs fit `budget_flops` (or
`budget_frac` of the preset's `full_budget_flops`): fixed, fixed-first and uniform schedules then
spend the same modeled compute. A NaN/inf loss stops the run and keeps the last good checkpoint.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from looped import checkpoint as ckpt_lib
from looped.config import OverrideParser, TrainConfig, load_config, to_yaml, validate
from looped.data.batching import batch_generator, build_source
from looped.errors import UserError
from looped.evaluate import evaluate
from looped.flops import flops_per_token, peak_flops, schedule_flops, steps_for_budget
from looped.model import LoopedTransformer
from looped.schedules import parse_depths, parse_schedule


# -- learning rate ---------------------------------------------------------------------------
def lr_at(step: int, total_steps: int, optim: Any) -> float:
    """Learning rate at `step`: linear warmup, then cosine to min, or warmup-stable-decay.

    WSD keeps the LR constant until the last `decay_frac` of the run, so two runs of different
    length agree on every LR before that point: that is what lets a fixed-first run branch off a
    longer fixed-K run exactly.
    """
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    warm = min(optim.warmup_steps, max(total_steps - 1, 0))
    if step < warm:
        return peak * (step + 1) / warm
    if optim.lr_schedule == "cosine":
        progress = (step - warm) / max(1, total_steps - warm - 1)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, progress)))
    if optim.lr_schedule == "wsd":
        decay_start = total_steps - max(1, round(optim.decay_frac * total_steps))
        if step < max(decay_start, warm):
            return peak
        progress = (step - decay_start + 1) / max(1, total_steps - decay_start)
        return peak - (peak - floor) * min(1.0, progress)
    raise UserError(f"optim.lr_schedule={optim.lr_schedule!r}: choose cosine or wsd")


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


# -- set-up ----------------------------------------------------------------------------------
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
    tokens_per_step = cfg.batch_size * cfg.grad_accum * cfg.seq_len * world_size
    candidates = []
    if cfg.max_steps > 0:
        candidates.append(cfg.max_steps)
    if cfg.max_tokens > 0:
        candidates.append(cfg.max_tokens // tokens_per_step)
    budget = cfg.budget_flops
    if cfg.budget_frac > 0:
        if cfg.full_budget_flops <= 0:
            raise UserError(
                "budget_frac needs full_budget_flops (the preset's 100% budget); set full_budget_flops=..."
            )
        budget = cfg.budget_frac * cfg.full_budget_flops
    if budget > 0:
        candidates.append(
            steps_for_budget(cfg.model, schedule, budget, tokens_per_step, cfg.seq_len)
        )
    if not candidates:
        raise UserError("no stop criterion: set max_steps, max_tokens, budget_flops or budget_frac")
    steps = min(candidates)
    if steps < 1:
        raise UserError(
            f"the budget is too small for one step of {tokens_per_step} tokens; raise the budget or shrink the batch"
        )
    return steps


def check_config(cfg: TrainConfig) -> None:
    """Catch bad values early, with one line each, before any work is done."""
    validate(cfg)


def pick_device(name: str, local_rank: int) -> torch.device:
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device={name} but no CUDA GPU is visible; use device=cpu")
    return torch.device(f"cuda:{local_rank}" if name == "cuda" else name)


class Dist:
    """torchrun's environment, or a single process."""

    def __init__(self, device_name: str) -> None:
        self.enabled = "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world = int(os.environ.get("WORLD_SIZE", 1))
        self.device = pick_device(device_name, self.local_rank)
        if self.enabled and not torch.distributed.is_initialized():
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            torch.distributed.init_process_group(
                backend="nccl" if self.device.type == "cuda" else "gloo"
            )

    @property
    def main(self) -> bool:
        return self.rank == 0

    def close(self) -> None:
        if self.enabled and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def wrap_distributed(model: LoopedTransformer, cfg: TrainConfig, dist: Dist) -> torch.nn.Module:
    if not dist.enabled:
        return model
    if cfg.fsdp:
        from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

        for stack in (model.prelude, model.block, model.coda):
            for layer in stack.layers:
                fully_shard(layer)
        fully_shard(model)
        # Evaluation calls forward_depths, not forward: it must gather the root's shards too.
        register_fsdp_forward_method(model, "forward_depths")
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    # The concat injection map is unused at depth 1, so DDP must tolerate unused parameters.
    return DDP(
        model,
        device_ids=[dist.device.index] if dist.device.type == "cuda" else None,
        find_unused_parameters=cfg.model.injection == "concat",
    )


def full_weights(model: torch.nn.Module, cfg: TrainConfig, dist: Dist) -> dict[str, torch.Tensor]:
    """Unsharded CPU weights for a checkpoint (gathers FSDP2 shards on every rank)."""
    if dist.enabled and cfg.fsdp:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(
            model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if cfg.model.tie_embeddings:
            sd.pop("head.weight", None)
        return {k: v.contiguous() for k, v in sd.items()}
    return ckpt_lib.unique_state_dict(model)


# -- the loop --------------------------------------------------------------------------------
class StopRequested:
    """First Ctrl-C / SIGTERM: finish the step, checkpoint, exit. Second Ctrl-C: stop at once."""

    def __init__(self) -> None:
        self.flag = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopRequested:
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread (e.g. a notebook worker): no handlers
            pass
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.flag and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.flag = True

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


@dataclass
class RunOptions:
    resume: bool = False  # continue from the latest checkpoint in the run directory
    init_from: str | None = None  # start a new run from these weights (run or checkpoint dir)
    branch_from: str | None = (
        None  # continue this checkpoint (weights, optimizer, step); checked exact
    )
    quiet: bool = False  # no progress bar
    save_steps: tuple[
        int, ...
    ] = ()  # extra checkpoints at these steps, never pruned (branch points)
    eval_steps: tuple[int, ...] = ()  # extra evaluations at these steps (e.g. just before a switch)
    on_step: Any = None  # on_step(done, total, loss, depth) replaces the bar (the demo's workers)
    desc: str | None = None  # progress bar label (default: the run directory name)


def train(cfg: TrainConfig, out_dir: str | Path, **options: Any) -> dict[str, Any]:
    """Train a run into `out_dir` (options: see RunOptions); returns the final summary, also
    written to out_dir/summary.json."""
    opts = RunOptions(**options)
    check_config(cfg)
    dist = Dist(cfg.device)
    try:
        return _train(cfg, Path(out_dir), dist, opts)
    finally:
        dist.close()


def _train(cfg: TrainConfig, out: Path, dist: Dist, opts: RunOptions) -> dict[str, Any]:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    source = build_source(cfg.data)
    if cfg.model.vocab_size < source.vocab_size:
        cfg.model.vocab_size = 64 * math.ceil(source.vocab_size / 64)  # round up: faster matmuls
    if source.bios is not None:  # fail now, not at the first evaluation
        from looped.recall import recall_queries

        longest = max(qs.inputs.shape[1] for qs in recall_queries(source.bios).values())
        if longest > cfg.model.seq_len:
            raise UserError(
                f"recall queries are {longest} tokens, longer than model.seq_len={cfg.model.seq_len}; raise model.seq_len"
            )
    resolve_batch(cfg, dist.world)
    schedule = parse_schedule(cfg.schedule, cfg.seed)
    total = total_steps_for(cfg, dist.world)
    tokens_per_step = cfg.batch_size * cfg.grad_accum * cfg.seq_len * dist.world
    eval_depths = parse_depths(cfg.eval_depths)

    existing = ckpt_lib.list_checkpoints(out)
    if existing and not opts.resume:
        raise UserError(
            f"{out} already holds checkpoints; pass --resume to continue or choose a new --out"
        )
    if dist.main:
        out.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(cfg.seed)
    model = LoopedTransformer(cfg.model)
    start_step, lineage, resumed_flops, opt_state = 0, {}, 0.0, None
    if opts.resume and existing:
        ckpt = existing[-1][1]
        ckpt_lib.load_weights(ckpt, model)
        state = ckpt_lib.load_state(ckpt)
        if state["total_steps"] != total or state["schedule"] != str(schedule):
            raise UserError(
                f"{out} was trained with schedule {state['schedule']} for {state['total_steps']} steps; resume with the same config"
            )
        opt_state = state["optimizer"]
        start_step, lineage, resumed_flops = state["step"], state.get("lineage", {}), state["flops"]
        if start_step >= total and (out / "summary.json").is_file():
            if dist.main and not opts.quiet:
                print(f"{out} already finished {total} steps; nothing to resume", file=sys.stderr)
            return json.loads((out / "summary.json").read_text())
    elif opts.branch_from or opts.init_from:
        ckpt = ckpt_lib.resolve_checkpoint(opts.branch_from or opts.init_from)
        ckpt_lib.load_weights(ckpt, model)
        state = ckpt_lib.load_state(ckpt)
        lineage = {
            "parent": str(ckpt),
            "parent_step": state["step"],
            "mode": "branch" if opts.branch_from else "init",
        }
        if opts.branch_from:
            _check_branch(cfg, schedule, total, ckpt, state)
            opt_state = state["optimizer"]
            start_step, resumed_flops = state["step"], state["flops"]
    model.to(dist.device)
    if cfg.compile:
        model.compile_block()
    ddp = wrap_distributed(model, cfg, dist)
    is_sharded = dist.enabled and cfg.fsdp
    optimizer = make_optimizer(model, cfg.optim)  # after sharding: FSDP2 swaps in DTensor params
    if opt_state is not None and is_sharded:
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        set_optimizer_state_dict(
            model, optimizer, opt_state, options=StateDictOptions(full_state_dict=True)
        )
    elif opt_state is not None:
        optimizer.load_state_dict(opt_state)
        _move_optimizer_state(optimizer, dist.device)

    config_yaml = to_yaml(cfg)
    if dist.main:
        (out / "config.yaml").write_text(config_yaml)
        if lineage:
            (out / "lineage.json").write_text(json.dumps(lineage, indent=2))
    metrics_path = out / "metrics.jsonl"
    if dist.main:
        _truncate_metrics(metrics_path, start_step)

    autocast = (
        torch.autocast(dist.device.type, dtype=torch.bfloat16)
        if cfg.dtype == "bf16"
        else nullcontext()
    )
    fpt = {
        k: flops_per_token(cfg.model, k, cfg.seq_len) for k in range(1, schedule.max_depth() + 1)
    }
    flops_done = resumed_flops if start_step else 0.0
    device_name = torch.cuda.get_device_name(dist.device) if dist.device.type == "cuda" else "cpu"
    peak = peak_flops(device_name, cfg.dtype)

    saved: set[int] = set()

    def save(step: int) -> None:
        started = time.time()
        saved.add(step)
        weights = full_weights(ddp if is_sharded else model, cfg, dist)
        if is_sharded:
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_optimizer_state_dict,
            )

            opt_state = get_optimizer_state_dict(
                ddp, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
            )
        else:
            opt_state = optimizer.state_dict()
        if not dist.main:
            return
        state = {
            "step": step,
            "total_steps": total,
            "schedule": str(schedule),
            "optimizer": opt_state,
            "flops": flops_done,
            "lineage": lineage,
            "lr_schedule": [cfg.optim.lr_schedule, cfg.optim.lr, cfg.optim.warmup_steps],
        }
        ckpt_lib.save_checkpoint(
            out, step, weights, state, config_yaml, cfg.keep_last, keep=tuple(opts.save_steps)
        )
        overhead[0] += time.time() - started

    board = _tensorboard(out) if cfg.tensorboard and dist.main else None

    def log(record: dict[str, Any]) -> None:
        if dist.main:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(record) + "\n")
        if board is not None:
            for key, value in _scalars(record):
                board.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def run_eval(step: int) -> dict[str, Any]:
        started = time.time()
        model.eval()
        with autocast:
            result = evaluate(
                model,
                source,
                eval_depths,
                cfg.batch_size,
                cfg.seq_len,
                cfg.eval_batches,
                dist.device,
            )
        model.train()
        record = {"kind": "eval", "step": step, "flops": flops_done, **result}
        log(record)
        overhead[0] += time.time() - started
        return record

    model.train()
    bar = tqdm(
        total=total,
        initial=start_step,
        desc=opts.desc or out.name,
        disable=opts.quiet or opts.on_step is not None or not dist.main,
        dynamic_ncols=True,
    )
    planned = schedule_flops(cfg.model, schedule, total, tokens_per_step, cfg.seq_len)
    say = (
        (lambda msg: tqdm.write(msg, file=sys.stderr))
        if dist.main and not opts.quiet
        else (lambda msg: None)
    )
    say(
        f"{out.name}: {total} steps x {tokens_per_step} tokens, schedule {schedule} (mean K "
        f"{schedule.mean_depth(total):.2f}), modeled compute {planned:.3g} FLOPs, {model.num_params() / 1e6:.2f}M params"
    )
    eta_at = min(start_step + 20, total - 1)  # estimate wall time once the first steps are measured
    t0, tokens_since, t_last, flops_last = time.time(), 0, time.time(), flops_done
    overhead = [0.0]  # seconds spent in evaluation and checkpoints (not training)
    last_loss, last_eval = float("nan"), None
    with StopRequested() as stop:
        for step in range(start_step, total):
            depth = schedule.depth(step, total)
            lr = lr_at(step, total, cfg.optim)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss_acc = torch.zeros((), device=dist.device)  # summed on device: one sync per step
            for micro in range(cfg.grad_accum):
                x, y = source.train.sample_batch(
                    cfg.batch_size, cfg.seq_len, batch_generator(cfg.seed, step, micro, dist.rank)
                )
                x, y = x.to(dist.device), y.to(dist.device)
                last = micro == cfg.grad_accum - 1
                with _no_sync(ddp, cfg, dist, last), autocast:
                    _, loss = ddp(x, depth=depth, targets=y)
                (loss / cfg.grad_accum).backward()
                loss_acc += loss.detach().float() / cfg.grad_accum
            stop_now = stop.flag
            if dist.enabled:  # ranks must agree on the loss (NaN stop) and on a stop request
                t = torch.stack([loss_acc, torch.tensor(float(stop.flag), device=dist.device)])
                torch.distributed.all_reduce(t)
                loss_acc, stop_now = t[0] / dist.world, t[1].item() > 0
            loss_sum = loss_acc.item()
            if not math.isfinite(loss_sum):
                bar.close()
                good = ckpt_lib.list_checkpoints(out)
                where = f"; the last good checkpoint is {good[-1][1]}" if good else ""
                raise UserError(
                    f"loss became {loss_sum} at step {step} (depth {depth}, lr {lr:.2e}); lower optim.lr or check the data{where}"
                )
            if cfg.optim.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(ddp.parameters(), cfg.optim.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            flops_done += fpt[depth] * tokens_per_step
            tokens_since += tokens_per_step
            last_loss = loss_sum
            done = step + 1
            if done == eta_at and done > start_step + 5:
                rate = (flops_done - resumed_flops) / max(time.time() - t0, 1e-9)
                say(
                    f"{out.name}: {rate / 1e12:.3g} modeled TFLOP/s so far; the remaining "
                    f"{planned - flops_done:.3g} FLOPs need about {_duration((planned - flops_done) / rate)}"
                )
            bar.update(1)
            bar.set_postfix(loss=f"{loss_sum:.3f}", K=depth, refresh=False)
            if opts.on_step is not None:
                opts.on_step(done, total, loss_sum, depth)
            if done % cfg.log_interval == 0 or done == total:
                now = time.time()
                dt = max(now - t_last, 1e-9)
                tps = tokens_since / dt
                mfu = (flops_done - flops_last) / dt / (peak * dist.world) if peak else None
                log({
                    "kind": "train", "step": done, "loss": loss_sum, "depth": depth, "lr": lr,
                    "tokens": done * tokens_per_step, "flops": flops_done, "wall": now - t0,
                    "train_wall": now - t0 - overhead[0], "tokens_per_s": tps, "mfu": mfu,
                    "mem_gb": torch.cuda.max_memory_allocated(dist.device) / 2**30 if dist.device.type == "cuda" else None,
                })  # fmt: skip
                tokens_since, t_last, flops_last = 0, now, flops_done
            if (
                cfg.eval_interval and done % cfg.eval_interval == 0 or done in opts.eval_steps
            ) and done < total:
                last_eval = run_eval(done)
            if (cfg.ckpt_interval and done % cfg.ckpt_interval == 0) or done in opts.save_steps:
                save(done)
            if stop_now and done < total:
                if done not in saved:
                    save(done)
                bar.close()
                print(f"stopped at step {done}; continue with --resume", file=sys.stderr)
                return {"stopped": done}
    bar.close()
    if total not in saved:
        save(total)  # the weights first: a failing final evaluation must not lose them
    last_eval = run_eval(total)
    if board is not None:
        board.close()
    summary = {
        "steps": total, "schedule": str(schedule), "flops": flops_done, "final_loss": last_loss,
        "wall": time.time() - t0, "params": model.num_params(), "tokens": total * tokens_per_step,
        "switch_step": schedule.switch_step(total), "eval": last_eval, "lineage": lineage,
    }  # fmt: skip
    if dist.main:
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def _tensorboard(out: Path) -> Any:
    try:
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


def _no_sync(ddp: torch.nn.Module, cfg: TrainConfig, dist: Dist, last: bool):
    """Skip the gradient all-reduce on all but the last micro-batch of a step."""
    if not dist.enabled or last:
        if dist.enabled and cfg.fsdp:
            ddp.set_requires_gradient_sync(True)
        return nullcontext()
    if cfg.fsdp:
        ddp.set_requires_gradient_sync(False)
        return nullcontext()
    return ddp.no_sync()


def _move_optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    for state in optimizer.state.values():
        for k, v in state.items():
            if torch.is_tensor(v) and k != "step":
                state[k] = v.to(device)


def branch_point(
    child: TrainConfig, child_total: int, parent: TrainConfig, parent_total: int
) -> int:
    """The first step at which two runs differ in depth or learning rate (their shared prefix).

    A child run can branch off the parent's checkpoint at any step up to this one and be exactly
    the run it would have been from scratch (same seed, data and batch; checked by the trainer).
    """
    a, b = parse_schedule(child.schedule, child.seed), parse_schedule(parent.schedule, parent.seed)
    for s in range(min(child_total, parent_total)):
        if a.depth(s, child_total) != b.depth(s, parent_total):
            return s
        if lr_at(s, child_total, child.optim) != lr_at(s, parent_total, parent.optim):
            return s
    return min(child_total, parent_total)


def _check_branch(cfg: TrainConfig, schedule, total: int, ckpt: Path, state: dict) -> None:
    """A branch must be the run that training from scratch would have produced: same depths,
    learning rates and data up to the branch step."""
    parent = load_config(str(ckpt / "config.yaml"))
    step = state["step"]
    if step > total:
        raise UserError(
            f"cannot branch from {ckpt}: it is at step {step}, past this run's {total} steps"
        )
    parent_schedule = parse_schedule(state["schedule"], parent.seed)
    same = (
        parent.seed == cfg.seed
        and parent.batch_size == cfg.batch_size
        and parent.grad_accum == cfg.grad_accum
        and parent.seq_len == cfg.seq_len
        and parent.data == cfg.data
        and parent.optim == cfg.optim
        and parent.model == cfg.model
        and parent.dtype == cfg.dtype
    )
    if not same:
        raise UserError(
            f"cannot branch from {ckpt}: seed, batch, data, model, dtype or optimizer settings differ; use --init-from for a new run from its weights"
        )
    for s in range(step):
        if parent_schedule.depth(s, state["total_steps"]) != schedule.depth(s, total):
            raise UserError(
                f"cannot branch from {ckpt}: depth at step {s} differs from this schedule; branch at or before the switch"
            )
        if lr_at(s, state["total_steps"], parent.optim) != lr_at(s, total, cfg.optim):
            raise UserError(
                f"cannot branch from {ckpt}: the LR at step {s} differs (use optim.lr_schedule=wsd so runs of different length agree)"
            )


def _truncate_metrics(path: Path, step: int) -> None:
    """On resume, drop records written after the checkpoint we resume from."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                keep.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in keep))
    tmp.replace(path)


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
        nll = (summary.get("eval") or {}).get("nll", {})
        shown = ", ".join(f"K={k}: {v:.3f}" for k, v in list(nll.items())[:8])
        print(
            f"done: {summary['steps']} steps, {summary['flops']:.3g} modeled FLOPs, {summary['wall']:.0f}s; eval NLL {shown}"
        )
    return 0
