"""Modeled training compute of a looped transformer: FLOPs per token, per schedule, per budget.

FLOPs per token at depth K, a schedule's total, its saving against uniform-depth training, the steps a FLOP budget buys, and MFU.

    looped flops                     # table per preset and paper schedule
    looped flops --json              # the same as a JSON list of objects
    looped flops --preset 1b         # one preset (repeat --preset for more)

The paper's savings are *modeled* compute, so this module is the reference for every budget in
the package: the trainer stops on it, matched-budget runs are sized by it, MFU divides by it.

The formula (per token, d = d_model, f = SwiGLU hidden width, V = vocabulary, T = seq_len)
----------------------------------------------------------------------------------------------
A matmul of an (n x a) activation by an (a x b) weight costs 2*n*a*b FLOPs (one multiply, one
add), so a linear layer costs 2 * (its weights) per token. Forward, per token:

    layer   L = 2 * (3d*d + d*d + d*2f + f*d)      qkv, out-proj, SwiGLU gate+up, down
              + 2*T*d + 2*T*d                       scores Q K^T, then weights @ V
    inject  I = 2 * (2d * d)  for injection="concat" (the map W [h; e]); 0 for add / none
    head    E = 2 * d * V                           LM head (tied or not: same matmul)

    forward(K) = (n_prelude + n_coda) * L  +  K * n_block * L  +  (K - 1) * I  +  E

Training costs forward + backward = 3 * forward: the backward pass does two matmuls of the same
size per forward matmul, one for the input gradient and one for the weight gradient (Kaplan et
al. 2020, Sec. 2.1: C = 6N per token; Hoffmann et al. 2022 (Chinchilla), App. F: backward =
2 x forward; Chowdhery et al. 2022 (PaLM), App. B: 6N + 12*L*H*Q*T, whose attention term is our
3 * 4*T*d per layer). Hence the affine form the paper's savings rest on:

    C(K) = F + K * R,   R = 3 * (n_block * L + I),   F = 3 * ((n_prelude + n_coda) * L + E - I)

Truncated backprop (``bptt`` = n > 0): the first K - n loops run under no_grad, so they (and
their injections) cost forward only, 1x instead of 3x. With injection="none" the prelude then
gets no gradient either (its output only feeds the frozen first loop), so it costs 1x too.

Choices, and what ``torch.utils.flop_counter.FlopCounterMode`` counts
-------------------------------------------------------------------
- Attention counts the full T x T score and value matmuls, not the causal half. That is what
  the math kernel computes (it masks after the matmul), what FlopCounterMode's formulas for the
  fused SDPA kernels assume (they ignore ``is_causal``), and what Chinchilla and PaLM count.
  Flash kernels skip fully masked blocks and do about half, so hardware does a little less
  work than modeled. Kaplan et al. count 2*n_ctx*d_attn per layer, half of ours.
- Not counted, here and by the counter: the embedding lookup (a gather), RMSNorm, RoPE,
  softmax, SiLU and the gating product, residual adds, the "add" injection, cross-entropy, the
  optimizer. These are elementwise, O(d) per token against O(d^2) for the matmuls.
- The counter counts matmuls (mm, addmm, bmm, ...) and the CUDA SDPA kernels; on CPU the fused
  ``_scaled_dot_product_flash_attention_for_cpu`` has no formula and counts 0, so the tests run
  SDPA through the math backend, whose bmm calls it does count. The tests compare this formula
  with the counter on the real model (forward + backward of the loss, several shapes, depths and
  truncations): the issue asks for 5%, they agree exactly, and the tests hold them to that.

The presets: F/R near 1.2, and the paper's three savings
-------------------------------------------------------
Against uniform K in 1..16 (mean 8.5) at the same number of steps, fixed K0 for a fraction p
of the run saves p * (8.5 - K0) / (F/R + 8.5). The abstract's 45% (K0=2, p=0.67) and 31-37%
(K0=4, p=0.67 and 0.8) all fit F/R = 1.2 (44.9%, 31.1%, 37.1%); F = 0 would give 51/36/42%.
The paper gives no architecture, so the presets are plausible shapes of the stated sizes
(GPT-2 vocabulary 50304, Llama-style layers, one loop block between a few unshared layers)
whose modeled F/R lands there. F/R = ((n_prelude + n_coda) + E/L) / n_block: the head is worth
E/L layers, so wide models (E/L small) need more unshared layers per block layer. L and E are
forward FLOPs per token:

    preset  d     heads  d_ff  P+A+H  T     params  L       E       E/L   F/R   saving
    200m    1024  16     4096  1+4+1  1024  204M    37.7M   103M    2.73  1.18  K=2 67%: 45.0%
    1b      2048  16     8192  3+6+3  2048  1.01B   151M    206M    1.36  1.23  K=4 67%: 31.0%
                                                                                K=4 80%: 37.0%

200m: L = 2(4*1024^2 + 3*1024*4096) + 4*1024*1024 = 37.7M, E = 2*1024*50304 = 103M, so
F/R = (1 + 1 + 2.73) / 4 = 1.18 and 0.67 * 6.5 / (1.18 + 8.5) = 45.0%. 1b: at twice the width
the head is worth only 1.36 layers, so it takes 3 + 3 unshared layers around a 6-layer block:
F/R = (6 + 1.36) / 6 = 1.23, giving 0.67 * 4.5 / 9.73 = 31.0% and 0.8 * 4.5 / 9.73 = 37.0%.
Both use untied heads and a 4d SwiGLU width; ``looped flops`` prints the exact values, which
include the rounding of the switch step. ``looped flops`` lists every preset, ``tiny`` too
(F/R = 0.47, so 48% / 33% / 40%): small models' savings are not the paper's, and seeing them
side by side shows how the savings move with F/R.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

import torch

from looped.config import TrainConfig, load_config, preset_names
from looped.errors import UserError
from looped.model import LoopedConfig, LoopedTransformer
from looped.schedules import Schedule, parse_schedule

REFERENCE = "uniform:1-16"  # the adaptive-from-the-start baseline every saving is measured against


# -- per-token model ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Parts:
    """Forward matmul FLOPs per token of each piece (see the module docstring)."""

    layer: float  # L: one transformer layer, attention with sequence length included
    inject: float  # I: the concat injection map (0 for add / none)
    head: float  # E: the LM head


def _parts(config: LoopedConfig, seq_len: int) -> _Parts:
    d, f = config.d_model, config.ff_dim
    layer = 2 * (3 * d * d + d * d + d * 2 * f + f * d) + 2 * (2 * seq_len * d)
    inject = 2 * (2 * d * d) if config.injection == "concat" else 0
    return _Parts(float(layer), float(inject), float(2 * d * config.vocab_size))


def flops_per_token(
    config: LoopedConfig,
    depth: int,
    seq_len: int,
    bptt: int | None = None,
    backward: bool = True,
) -> float:
    """Modeled training FLOPs per token at loop count `depth` (forward 1x + backward 2x).

    `bptt` defaults to the config's (0 = full backprop); `backward=False` gives inference cost.
    """
    if depth < 1:
        raise ValueError(f"depth={depth} must be >= 1")
    p = _parts(config, seq_len)
    bptt = config.bptt if bptt is None else bptt
    frozen = max(0, depth - bptt) if backward and bptt > 0 else 0  # loops under no_grad
    frozen_inject = max(0, frozen - 1)  # loop k (0-based) injects for k >= 1, frozen if k < frozen
    train = 3.0 if backward else 1.0
    ends = config.n_prelude * p.layer * (1.0 if frozen and config.injection == "none" else train)
    ends += config.n_coda * p.layer * train + p.head * train
    loops = config.n_block * p.layer * ((depth - frozen) * train + frozen)
    inject = p.inject * ((depth - 1 - frozen_inject) * train + frozen_inject)
    return ends + loops + inject


def fixed_and_loop_cost(config: LoopedConfig, seq_len: int) -> tuple[float, float]:
    """(F, R) with training cost C(K) = F + K * R per token, full backprop.

    F is the depth-independent part (prelude, coda, head, minus one injection since K loops
    inject K - 1 times); R is one more loop. Truncated backprop is not affine in K: use
    `flops_per_token` with `bptt` for it.
    """
    p = _parts(config, seq_len)
    loop = 3 * (config.n_block * p.layer + p.inject)
    fixed = 3 * ((config.n_prelude + config.n_coda) * p.layer + p.head - p.inject)
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


def _check_steps(total_steps: int) -> None:
    if total_steps < 1:
        raise UserError(f"total_steps={total_steps} must be >= 1")


def schedule_flops(
    config: LoopedConfig,
    schedule: Schedule,
    total_steps: int,
    tokens_per_step: int,
    seq_len: int,
) -> float:
    """Total modeled training FLOPs of a run of `total_steps` steps (exact expectation over K)."""
    _check_steps(total_steps)
    cost = _cost_fn(config, schedule, seq_len)
    return tokens_per_step * schedule.run_expectation(cost, total_steps)


def saving(
    config: LoopedConfig,
    schedule: Schedule,
    reference: Schedule,
    total_steps: int,
    seq_len: int,
) -> float:
    """Fraction of the reference's compute that `schedule` saves at the same number of steps
    (0.45 = 45% less; negative when it costs more)."""
    ours = schedule_flops(config, schedule, total_steps, 1, seq_len)
    return 1.0 - ours / schedule_flops(config, reference, total_steps, 1, seq_len)


def saving_at_ratio(
    fixed_over_loop: float, schedule: Schedule, reference: Schedule, total_steps: int
) -> float:
    """`saving` for any model whose fixed cost is `fixed_over_loop` loop passes (F/R, full
    backprop). With C(K) = F + K R a run costs F + E[K] R per token, so the saving depends only
    on F/R and the two schedules' exact mean depths: what a schedule would save at another
    architecture's F/R, without building one (notebook 04 turns it into a knob)."""
    _check_steps(total_steps)
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
    """The largest number of steps whose run costs at most `budget_flops`.

    A fixed-first run's switch step moves with its length, so the cost is not steps times a
    constant: search. Every step costs between C(1) and C(max) per token, which brackets the
    answer; the cost grows with the number of steps, so bisect in the bracket.
    """
    cost = _cost_fn(config, schedule, seq_len)

    def run(n: int) -> float:
        return tokens_per_step * schedule.run_expectation(cost, n)

    if budget_flops < run(1):
        raise UserError(
            f"budget {budget_flops:.3g} FLOPs is below one step ({run(1):.3g} FLOPs with "
            f"{tokens_per_step} tokens/step); raise the budget or shrink the batch"
        )
    cheapest, dearest = cost(1), cost(schedule.max_depth())
    lo = max(1, int(budget_flops // (tokens_per_step * dearest)))  # fits at any depth
    hi = int(budget_flops // (tokens_per_step * cheapest)) + 1  # too long even at depth 1
    while run(lo) > budget_flops:  # guards float rounding at the bracket's edge
        lo -= 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if run(mid) <= budget_flops else (lo, mid)
    return lo


# -- throughput ----------------------------------------------------------------------------------
def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilization: modeled FLOP/s achieved as a fraction of the device peak.

    `flops_per_token` is this module's count, attention included (PaLM's definition, App. B),
    at the depth actually run; recomputation or padding does not raise it.
    """
    if peak_flops <= 0:
        raise ValueError(f"peak_flops={peak_flops} must be > 0")
    return tokens_per_s * flops_per_token / peak_flops


# -- presets and the `looped flops` command ------------------------------------------------------
def count_params(config: LoopedConfig) -> tuple[int, int]:
    """(all, non-embedding) parameters, counted on the meta device: no memory, no init time."""
    with torch.device("meta"):
        model = LoopedTransformer(config)
    return model.num_params(), model.num_params(non_embedding=True)


def tokens_per_step(cfg: TrainConfig, world_size: int = 1) -> int:
    """Tokens per optimizer step: global_batch x sequence length when the config sets it (the
    200m and 1b presets do, so the answer is the same on any number of GPUs), else micro-batch x
    accumulation x sequence length x processes."""
    if cfg.global_batch > 0:
        return cfg.global_batch * cfg.seq_len
    return cfg.batch_size * cfg.grad_accum * cfg.seq_len * world_size


def preset_steps(cfg: TrainConfig) -> int | None:
    """The run length a preset states (max_steps, else max_tokens), or None if budget-driven."""
    if cfg.max_steps:
        return cfg.max_steps
    if cfg.max_tokens:
        return max(1, cfg.max_tokens // tokens_per_step(cfg))
    return None


def preset_rows(name: str) -> list[dict]:
    """One record per schedule of a preset (its paper schedules, its default, the reference)."""
    cfg = load_config(name)
    m, seq_len, tps = cfg.model, cfg.seq_len, tokens_per_step(cfg)
    reference = parse_schedule(REFERENCE if m.max_depth >= 16 else f"uniform:1-{m.max_depth}")
    specs = list(dict.fromkeys([*cfg.paper_schedules, cfg.schedule, str(reference)]))
    steps = preset_steps(cfg)
    if steps is None:  # budget-driven preset: compare at the reference's length for the budget
        if not cfg.full_budget_flops:
            raise UserError(f"preset {name} sets none of max_steps, max_tokens, full_budget_flops")
        steps = steps_for_budget(m, reference, cfg.full_budget_flops, tps, seq_len)
    n_params, n_non_embed = count_params(m)
    fixed, loop = fixed_and_loop_cost(m, seq_len)
    by_depth = [flops_per_token(m, k, seq_len) for k in range(1, m.max_depth + 1)]
    rows = []
    for spec in specs:
        sched = parse_schedule(spec, seed=cfg.seed)
        row = {
            "preset": name,
            "schedule": str(sched),
            "reference": str(reference),
            "params": n_params,
            "non_embedding_params": n_non_embed,
            "seq_len": seq_len,
            "tokens_per_step": tps,
            "fixed_cost": fixed,
            "loop_cost": loop,
            "fixed_over_loop": fixed / loop,
            "flops_per_token_by_depth": by_depth,
            "steps": steps,
            "full_budget_flops": cfg.full_budget_flops or None,
        }
        total = schedule_flops(m, sched, steps, tps, seq_len)
        row |= {
            "mean_depth": sched.mean_depth(steps),
            "switch_step": sched.switch_step(steps),
            "total_flops": total,
            "flops_per_token": total / (steps * tps),
            "saving_vs_uniform": saving(m, sched, reference, steps, seq_len),
        }
        if cfg.full_budget_flops:
            row["steps_for_full_budget"] = steps_for_budget(
                m, sched, cfg.full_budget_flops, tps, seq_len
            )
        rows.append(row)
    return rows


def _count(n: float) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n:.0f}"


def format_table(rows: list[dict]) -> str:
    """Plain-text tables, one per preset, from `preset_rows` records."""
    out: list[str] = []
    for name in dict.fromkeys(r["preset"] for r in rows):
        group = [r for r in rows if r["preset"] == name]
        r0 = group[0]
        out.append(
            f"{name}: {_count(r0['params'])} params ({_count(r0['non_embedding_params'])} "
            f"non-embedding), seq_len {r0['seq_len']}, {r0['tokens_per_step']:,} tokens/step, "
            f"{r0['steps']:,} steps"
        )
        by_depth = r0["flops_per_token_by_depth"]
        unit, scale = ("GFLOP", 1e9) if by_depth[-1] >= 1e9 else ("MFLOP", 1e6)
        out.append(
            f"  C(K) = F + K*R: F = {r0['fixed_cost'] / scale:.3g}, "
            f"R = {r0['loop_cost'] / scale:.3g} {unit}/token, F/R = {r0['fixed_over_loop']:.2f}"
        )
        cols = " ".join(f"{c / scale:.3g}" for c in by_depth)
        out.append(f"  {unit}/token at K=1..{len(by_depth)}: {cols}")
        budget = bool(r0["full_budget_flops"])
        header = f"  {'schedule':<44} {'mean K':>6} {'total FLOPs':>11} {'saving':>7}"
        header += f" {'steps @100% budget':>18}" if budget else ""
        out += [header, "  " + "-" * (len(header) - 2)]
        for r in group:
            line = (
                f"  {r['schedule']:<44} {r['mean_depth']:>6.2f} {r['total_flops']:>11.3g}"
                f" {r['saving_vs_uniform']:>7.1%}"
            )
            out.append(line + (f" {r['steps_for_full_budget']:>18,}" if budget else ""))
        out.append("")
    out.append(f"saving: modeled training compute saved against {REFERENCE} at the same steps.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="looped flops", description="Modeled training compute per preset and schedule."
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of records")
    parser.add_argument(
        "--preset",
        action="append",
        metavar="NAME",
        help=f"preset name or YAML path (repeatable; default: all of {', '.join(preset_names())})",
    )
    parser.add_argument(
        "--tflops",
        type=float,
        help="sustained modeled TFLOP/s of your cluster (e.g. tokens/s x FLOPs/token from "
        "scripts/gpu_smoke.sh, times the GPU count): adds the expected wall time of each run",
    )
    args = parser.parse_args(argv)
    if args.tflops is not None and args.tflops <= 0:
        raise UserError(f"--tflops {args.tflops} must be > 0")
    if args.preset:
        groups = [preset_rows(name) for name in args.preset]
    else:  # every preset, smallest first
        groups = sorted((preset_rows(n) for n in preset_names()), key=lambda g: g[0]["params"])
    rows = [row for group in groups for row in group]
    if args.tflops:
        for row in rows:
            row["hours_at_tflops"] = row["total_flops"] / (args.tflops * 1e12) / 3600
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(format_table(rows))
    if args.tflops:
        print(f"\nexpected wall time at a sustained {args.tflops:g} modeled TFLOP/s:")
        for row in rows:
            print(f"  {row['preset']:<6} {row['schedule']:<44} {row['hours_at_tflops']:>9.1f} h")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
