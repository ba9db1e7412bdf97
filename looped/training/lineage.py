"""Where a run starts: afresh, or resumed, branched or initialised from a checkpoint.

A resume continues the same run; a branch continues another run's checkpoint only when it is
exactly the run training from scratch would have produced (same depth and LR at every step
before it); an init-from takes the weights alone. Each refusal is one line, before any write.
"""

from __future__ import annotations

import json
import math
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looped.config import RESUMABLE, TrainConfig, differences, load_config, lr_at
from looped.errors import UserError
from looped.model import LoopedTransformer
from looped.runtime import checkpoint as ckpt_lib
from looped.runtime.atomic import write_text_atomic
from looped.runtime.distributed import Dist
from looped.runtime.metrics import read_metrics
from looped.schedule_spec import parse_schedule
from looped.schedules import Schedule

# What a branch must share with its parent (a section name stands for all of its fields); the
# schedule and the run length may differ, as long as depths and learning rates agree up to the
# branch step (checked step by step). grad_accum is exempt when global_batch fixes the data.
BRANCH_FIXED = (
    "model",
    "data",
    "optim",
    "seed",
    "batch_size",
    "grad_accum",
    "depth_per_micro",
    "global_batch",
    "seq_len",
    "dtype",
)


@dataclass
class Restored:
    """Where a run starts: from scratch, or from a checkpoint it resumes or branches off."""

    step: int = 0  # the first step to train
    flops: float = 0.0  # modeled FLOPs spent before it
    lineage: dict[str, Any] = field(default_factory=dict)  # the parent of a branch or init
    optimizer: dict[str, Any] | None = None  # the AdamW state to continue with
    finished: bool = False  # resuming a run that already wrote its summary
    # identifies the run in its checkpoints' files: kept by a resume, new for a branch or init
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    loss: float = math.nan  # the loss of the step before it (the summary's final_loss if last)
    # seconds the run spent before a resume, in all and training only (a branch starts at 0: a
    # study adds its parent's share, `results.from_scratch`); 0 from a checkpoint without them
    wall: float = 0.0
    train_wall: float = 0.0


def restore(
    cfg: TrainConfig,
    out: Path,
    model: LoopedTransformer,
    schedule: Schedule,
    total: int,
    dist: Dist,
    resume: bool = False,
    branch_from: str | None = None,
    init_from: str | None = None,
) -> Restored:
    """Load the start weights into `model` and say where it starts, before any write."""
    existing = ckpt_lib.list_checkpoints(out)
    if existing and not resume:
        raise UserError(
            f"{out} already holds checkpoints; pass --resume to continue or choose a new --out"
        )
    if existing:
        ckpt, state = _newest_intact(existing, dist.main)
        check_resume(cfg, out, ckpt, state, dist.world)
        if state["total_steps"] != total or state["schedule"] != str(schedule):
            raise UserError(
                f"{out} was trained with schedule {state['schedule']} for {state['total_steps']} "
                "steps; resume with the same config"
            )
        ckpt_lib.load_weights(ckpt, model)
        step = state["step"]
        finished = step >= total and (out / "summary.json").is_file()
        run_id = state.get("run_id") or uuid.uuid4().hex
        lineage = state.get("lineage", {})
        loss = state.get("loss", math.nan)
        spent = {k: state.get(k, 0.0) for k in ("wall", "train_wall")}
        return Restored(
            step, state["flops"], lineage, state["optimizer"], finished, run_id, loss, **spent
        )
    if not (branch_from or init_from):
        return Restored()
    ckpt = ckpt_lib.resolve_checkpoint(branch_from or init_from)
    state = ckpt_lib.load_state(ckpt)
    ckpt_lib.load_weights(ckpt, model)
    mode = "branch" if branch_from else "init"
    lineage = {"parent": str(ckpt), "parent_step": state["step"], "mode": mode}
    if not branch_from:
        return Restored(lineage=lineage)
    check_branch(cfg, schedule, total, ckpt, state, dist.world)
    return Restored(state["step"], state["flops"], lineage, state["optimizer"])


def _newest_intact(existing: list[tuple[int, Path]], say: bool) -> tuple[Path, dict[str, Any]]:
    """The newest intact checkpoint and its state (`say`: warn about each damaged one passed
    over). Falling back is safe: the later steps repeat bitwise."""
    first: ckpt_lib.DamagedCheckpoint | None = None
    for _, ckpt in reversed(existing):
        try:
            return ckpt, ckpt_lib.load_state(ckpt)
        except ckpt_lib.DamagedCheckpoint as err:
            first = first or err
            if say:
                print(f"looped train: warning: {str(err).split('; ')[0]}", file=sys.stderr)
    assert first is not None
    raise first


# -- the checks ------------------------------------------------------------------------------
def _mismatches(
    old: TrainConfig,
    new: TrainConfig,
    old_world: int,
    world: int,
    allowed: tuple[str, ...] = (),
    only: tuple[str, ...] | None = None,
) -> list[tuple[str, Any, Any]]:
    """(key, then, now) for each config field that differs (see `config.differences`), and
    world_size last unless both runs set `global_batch` (which also frees grad_accum)."""
    if new.global_batch > 0:
        allowed = (*allowed, "grad_accum")
    diffs = differences(old, new, allowed, only)
    if old_world != world and not (new.global_batch > 0 and old.global_batch > 0):
        diffs.append(("world_size", old_world, world))
    return diffs


def _refusal(action: str, diffs: list[tuple[str, Any, Any]], fix: str) -> UserError:
    """The one-line error of a refused start: the first difference, the rest listed, the fix."""
    (key, a, b), more = diffs[0], diffs[1:]
    extra = ", ".join(f"{k} {x} -> {y}" for k, x, y in more)
    return UserError(
        f"cannot {action}: it was trained with {key}={a}, this config says {key}={b}"
        + (f" (and {len(more)} more: {extra})" if more else "")
        + f"; {fix}"
    )


def check_resume(
    cfg: TrainConfig, out: Path, ckpt: Path, state: dict[str, Any], world: int
) -> None:
    """A resume continues the same run or refuses: every field outside RESUMABLE, and the number
    of processes unless `global_batch` is set, must equal the checkpoint's."""
    old = load_config(str(ckpt / "config.yaml"), check=False)
    old_world = state.get("world_size", world)  # older checkpoints did not record it
    diffs = _mismatches(old, cfg, old_world, world, allowed=RESUMABLE)
    if diffs:
        where = f" on {old_world} processes" if diffs[-1][0] == "world_size" else ""
        raise _refusal(
            f"resume {out}", diffs, f"resume with the same config{where} or start a new --out"
        )


def check_branch(
    cfg: TrainConfig,
    schedule: Schedule,
    total: int,
    ckpt: Path,
    state: dict[str, Any],
    world: int = 1,
) -> None:
    """A branch must be the run that training from scratch would have produced: BRANCH_FIXED,
    and the depths and learning rates before the branch step, equal to the parent's."""
    step = state["step"]
    if step > total:
        raise UserError(
            f"cannot branch from {ckpt}: it is at step {step}, past this run's {total} steps"
        )
    parent = load_config(str(ckpt / "config.yaml"))
    parent_world = state.get("world_size", world)  # older checkpoints did not record it
    diffs = _mismatches(parent, cfg, parent_world, world, only=BRANCH_FIXED)
    if diffs:
        fixes = []
        if diffs[0][0] != "world_size":
            fixes.append("use --init-from for a new run from its weights")
        if diffs[-1][0] == "world_size":
            fixes.append(
                f"branch on {parent_world} processes, or set global_batch in both runs to make "
                "the data independent of the process count"
            )
        raise _refusal(f"branch from {ckpt}", diffs, "; or ".join(fixes))
    parent_schedule = parse_schedule(state["schedule"], parent.seed)
    parent_run = (parent_schedule, state["total_steps"], parent.optim)
    micros = cfg.grad_accum if cfg.depth_per_micro else 1
    first = _divergence(parent_run, (schedule, total, cfg.optim), step, micros)
    if first is not None:
        at, key, a, b = first
        fix = f"branch from a checkpoint at or before step {at}"
        if key == "lr" and cfg.optim.lr_schedule != "wsd":  # the parent's too (optim is fixed)
            fix += ", or set optim.lr_schedule=wsd in both runs so runs of different length agree"
        raise _refusal(f"branch from {ckpt}", [(f"{key}(step {at})", a, b)], fix)


def branch_point(
    child: TrainConfig, child_total: int, parent: TrainConfig, parent_total: int
) -> int:
    """The first step where two runs differ in depth or LR: where a child may branch off."""
    a = (parse_schedule(child.schedule, child.seed), child_total, child.optim)
    b = (parse_schedule(parent.schedule, parent.seed), parent_total, parent.optim)
    steps = min(child_total, parent_total)
    first = _divergence(a, b, steps)
    return steps if first is None else first[0]


def _divergence(
    a: tuple[Schedule, int, Any], b: tuple[Schedule, int, Any], steps: int, micros: int = 1
) -> tuple[int, str, Any, Any] | None:
    """(step, "K" or "lr", a, b) at the first step before `steps` where two runs, each (schedule,
    total steps, optim), differ; None if they agree. `micros` > 1 compares every micro-batch."""
    (a_sched, a_total, a_optim), (b_sched, b_total, b_optim) = a, b
    for s in range(steps):
        for m in range(micros):
            ka, kb = a_sched.depth(s, a_total, m), b_sched.depth(s, b_total, m)
            if ka != kb:
                return s, "K", ka, kb
        lr_a, lr_b = lr_at(s, a_total, a_optim), lr_at(s, b_total, b_optim)
        if lr_a != lr_b:
            return s, "lr", lr_a, lr_b
    return None


def write_start(out: Path, restored: Restored) -> None:
    """Record where the run starts: lineage.json for a branch or init, and metrics.jsonl cut back
    to the start step (a resume writes the later records again; a line cut by a crash goes)."""
    if restored.lineage:
        write_text_atomic(out / "lineage.json", json.dumps(restored.lineage, indent=2))
    path = out / "metrics.jsonl"
    if path.exists():
        keep = [r for r in read_metrics(out) if r.get("step", 0) <= restored.step]
        write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in keep))
