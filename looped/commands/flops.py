"""`looped flops`: modeled training compute per preset and schedule (`looped.flops`), as
plain-text tables or JSON; `preset_rows` loads a preset and hands its model's shape to the FLOP
model, which never reads a run config itself."""

from __future__ import annotations

import json

from looped.commands.common import described
from looped.config import TrainConfig, load_config, preset_names
from looped.errors import UserError
from looped.flops import (
    REFERENCE,
    count_params,
    fixed_and_loop_cost,
    flops_per_token,
    saving,
    schedule_flops,
    steps_for_budget,
    tokens_per_step,
)
from looped.schedule_spec import parse_schedule
from looped.schedules import Schedule


def preset_rows(name: str) -> list[dict]:
    """One record per schedule of a preset (its paper schedules, its default, the reference)."""
    cfg = load_config(name)
    m, seq_len, tps = cfg.model, cfg.seq_len, tokens_per_step(cfg)
    reference = parse_schedule(REFERENCE if m.max_depth >= 16 else f"uniform:1-{m.max_depth}")
    specs = list(dict.fromkeys([*cfg.paper_schedules, cfg.schedule, str(reference)]))
    # the run length a preset states (max_steps, else max_tokens), or 0 if budget-driven
    steps = cfg.max_steps or (max(1, cfg.max_tokens // tps) if cfg.max_tokens else 0)
    if not steps:  # budget-driven preset: compare at the reference's length for the budget
        if not cfg.full_budget_flops:
            raise UserError(f"preset {name} sets none of max_steps, max_tokens, full_budget_flops")
        steps = steps_for_budget(m, reference, cfg.full_budget_flops, tps, seq_len)
    shape = _shape(cfg, steps)
    rows = []
    for spec in specs:
        sched = parse_schedule(spec, seed=cfg.seed)
        row = {"preset": name, "schedule": str(sched), "reference": str(reference)}
        rows.append(row | shape | _schedule_row(cfg, sched, reference, steps))
    return rows


def _shape(cfg: TrainConfig, steps: int) -> dict:
    """What a preset's rows share: its model's size and cost per token at each depth."""
    n_params, n_non_embed = count_params(cfg.model)
    fixed, loop = fixed_and_loop_cost(cfg.model, cfg.seq_len)
    depths = range(1, cfg.model.max_depth + 1)
    return {
        "params": n_params,
        "non_embedding_params": n_non_embed,
        "seq_len": cfg.seq_len,
        "tokens_per_step": tokens_per_step(cfg),
        "fixed_cost": fixed,
        "loop_cost": loop,
        "fixed_over_loop": fixed / loop,
        "flops_per_token_by_depth": [flops_per_token(cfg.model, k, cfg.seq_len) for k in depths],
        "steps": steps,
        "full_budget_flops": cfg.full_budget_flops or None,
    }


def _schedule_row(cfg: TrainConfig, sched: Schedule, reference: Schedule, steps: int) -> dict:
    """One schedule's cost and saving over a preset's run."""
    m, seq_len, tps = cfg.model, cfg.seq_len, tokens_per_step(cfg)
    total = schedule_flops(m, sched, steps, tps, seq_len)
    row = {
        "mean_depth": sched.mean_depth(steps),
        "switch_step": sched.switch_step(steps),
        "total_flops": total,
        "flops_per_token": total / (steps * tps),
        "saving_vs_uniform": saving(m, sched, reference, steps, seq_len),
    }
    if cfg.full_budget_flops:
        budget = cfg.full_budget_flops
        row["steps_for_full_budget"] = steps_for_budget(m, sched, budget, tps, seq_len)
    return row


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
    parser = described("looped flops", __doc__)
    parser.add_argument("--json", action="store_true", help="print a JSON list of records")
    presets = f"preset name or YAML path (repeatable; default: all of {', '.join(preset_names())})"
    parser.add_argument("--preset", action="append", metavar="NAME", help=presets)
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
