"""Modeled training compute of a looped transformer: FLOPs per token at depth K, a schedule's
total, its saving against uniform depth, the steps a budget buys, and MFU, each from the model's
shape (`LoopedConfig`), never from a run config (`looped flops` prints them per preset, in
`looped.commands.flops`). Every budget in the package is counted here.

Per token (d = d_model, f = SwiGLU width, V = vocabulary, T = seq_len), forward:

    layer   L = 2 * (3d*d + d*d + d*2f + f*d) + 2*T*d + 2*T*d   qkv, out, gate+up, down, QK^T, AV
    inject  I = 2 * (2d * d)  for injection="concat"; 0 for add / none
    head    E = 2 * d * V
    forward(K) = (n_prelude + n_coda) * L  +  K * n_block * L  +  (K - 1) * I  +  E

Training is 3x forward (Kaplan et al. 2020), so C(K) = F + K * R with R = 3 (n_block L + I) and
F = 3 ((n_prelude + n_coda) L + E - I); truncated backprop runs the first K - bptt loops 1x.
Elementwise work (norms, RoPE, softmax, the loss, the optimizer) is not counted; the tests hold
the formula exactly to FlopCounterMode on the real model. Fixed K0 for a fraction p of the run
saves p (8.5 - K0) / (F/R + 8.5) against uniform 1..16: the abstract's 45% and 31-37% fit
F/R = 1.2, which the 200m and 1b presets reproduce.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from looped.errors import UserError
from looped.model import LoopedConfig, LoopedTransformer
from looped.schedules import Schedule

if TYPE_CHECKING:  # a run config's batch shape, read for tokens_per_step alone
    from looped.config import TrainConfig

REFERENCE = "uniform:1-16"  # the adaptive-from-the-start baseline every saving is measured against


# -- per-token model ----------------------------------------------------------------------------
def _parts(config: LoopedConfig, seq_len: int) -> tuple[float, float, float]:
    """Forward FLOPs per token (L, I, E) of a layer, the injection map and the head (see above)."""
    d, f = config.d_model, config.ff_dim
    layer = 2 * (3 * d * d + d * d + d * 2 * f + f * d) + 2 * (2 * seq_len * d)
    inject = 2 * (2 * d * d) if config.injection == "concat" else 0
    return float(layer), float(inject), float(2 * d * config.vocab_size)


def flops_per_token(
    config: LoopedConfig, depth: int, seq_len: int, bptt: int | None = None, backward: bool = True
) -> float:
    """Modeled training FLOPs per token at `depth`; `backward=False` gives inference cost."""
    if depth < 1:
        raise ValueError(f"depth={depth} must be >= 1")
    layer, inject_cost, head = _parts(config, seq_len)
    bptt = config.bptt if bptt is None else bptt
    frozen = max(0, depth - bptt) if backward and bptt > 0 else 0  # loops under no_grad
    frozen_inject = max(0, frozen - 1)  # loop k (0-based) injects for k >= 1, frozen if k < frozen
    train = 3.0 if backward else 1.0
    ends = config.n_prelude * layer * (1.0 if frozen and config.injection == "none" else train)
    ends += config.n_coda * layer * train + head * train
    loops = config.n_block * layer * ((depth - frozen) * train + frozen)
    inject = inject_cost * ((depth - 1 - frozen_inject) * train + frozen_inject)
    return ends + loops + inject


def fixed_and_loop_cost(config: LoopedConfig, seq_len: int) -> tuple[float, float]:
    """(F, R) with training cost C(K) = F + K * R per token, full backprop (F: prelude, coda,
    head, minus one injection; R: one more loop). Truncated backprop is not affine in K."""
    layer, inject, head = _parts(config, seq_len)
    loop = 3 * (config.n_block * layer + inject)
    fixed = 3 * ((config.n_prelude + config.n_coda) * layer + head - inject)
    return fixed, loop


# -- schedules -----------------------------------------------------------------------------------
def _cost_fn(config: LoopedConfig, schedule: Schedule, seq_len: int) -> Callable[[int], float]:
    """Per-token cost as a function of K, precomputed for every depth the schedule can draw."""
    top = schedule.max_depth()
    if top > config.max_depth:
        raise UserError(
            f"schedule {schedule} reaches depth {top} but model.max_depth={config.max_depth}; "
            f"raise model.max_depth or cap the schedule"
        )
    table = {k: flops_per_token(config, k, seq_len) for k in range(1, top + 1)}
    return table.__getitem__


def schedule_flops(
    config: LoopedConfig, schedule: Schedule, total_steps: int, tokens_per_step: int, seq_len: int
) -> float:
    """Total modeled training FLOPs of a run of `total_steps` steps (exact expectation over K)."""
    cost = _cost_fn(config, schedule, seq_len)
    return tokens_per_step * schedule.run_expectation(cost, total_steps)


def saving(
    config: LoopedConfig, schedule: Schedule, reference: Schedule, total_steps: int, seq_len: int
) -> float:
    """Fraction of the reference's compute `schedule` saves at equal steps (0.45 = 45%)."""
    ours = schedule_flops(config, schedule, total_steps, 1, seq_len)
    return 1.0 - ours / schedule_flops(config, reference, total_steps, 1, seq_len)


def saving_at_ratio(
    fixed_over_loop: float, schedule: Schedule, reference: Schedule, total_steps: int
) -> float:
    """`saving` for any model whose fixed cost is `fixed_over_loop` loop passes (F/R, full
    backprop): with C(K) = F + K R it depends only on F/R and the two mean depths."""
    if not fixed_over_loop >= 0:
        raise UserError(f"F/R={fixed_over_loop} must be >= 0 (a cost in loop passes)")
    ours = fixed_over_loop + schedule.mean_depth(total_steps)
    return 1.0 - ours / (fixed_over_loop + reference.mean_depth(total_steps))


def steps_for_budget(
    config: LoopedConfig,
    schedule: Schedule,
    budget_flops: float,
    tokens_per_step: int,
    seq_len: int,
) -> int:
    """The most steps a run can take within `budget_flops` (a bisection: cost grows with steps)."""
    cost = _cost_fn(config, schedule, seq_len)

    def run(n: int) -> float:
        return tokens_per_step * schedule.run_expectation(cost, n)

    if budget_flops < run(1):
        raise UserError(
            f"budget {budget_flops:.3g} FLOPs is below one step ({run(1):.3g} FLOPs with "
            f"{tokens_per_step} tokens/step); raise the budget or shrink the batch"
        )
    too_long = int(budget_flops // (tokens_per_step * cost(1))) + 1  # even at depth 1
    return bisect.bisect_right(range(1, too_long), budget_flops, key=run)


# -- throughput ----------------------------------------------------------------------------------
def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilization: modeled FLOP/s as a fraction of the device peak (PaLM App. B)."""
    if peak_flops <= 0:
        raise ValueError(f"peak_flops={peak_flops} must be > 0")
    return tokens_per_s * flops_per_token / peak_flops


# -- parameters and tokens -----------------------------------------------------------------------
def count_params(config: LoopedConfig) -> tuple[int, int]:
    """(all, non-embedding) parameters, counted on the meta device: no memory, no init time."""
    with torch.device("meta"):
        model = LoopedTransformer(config)
    return model.num_params(), model.num_params(non_embedding=True)


def tokens_per_step(cfg: TrainConfig, world_size: int = 1) -> int:
    """Tokens per optimizer step: global_batch x seq_len, else per-process batch x world."""
    if cfg.global_batch > 0:
        return cfg.global_batch * cfg.seq_len
    return cfg.batch_size * cfg.grad_accum * cfg.seq_len * world_size
