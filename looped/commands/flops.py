"""`looped flops`: modeled training compute per preset and schedule (`looped.flops`), as
plain-text tables or JSON."""

from __future__ import annotations

import json

from looped.commands.common import described
from looped.config import preset_names
from looped.errors import UserError
from looped.flops import REFERENCE, preset_rows


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
