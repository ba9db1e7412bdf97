"""`looped train`: train one looped transformer (see `looped.training.trainer`)."""

from __future__ import annotations

import argparse
import os

from looped.commands.common import Parser
from looped.config import load_config, to_yaml
from looped.errors import UserError
from looped.training.trainer import train


def _parser() -> Parser:
    parser = Parser(
        overrides="config overrides",
        prog="looped train",
        description="Train a looped transformer. Overrides are key=value pairs on the config "
        "fields of looped/config.py, e.g. schedule=fixed:2 model.d_model=128 optim.lr=1e-3.",
        epilog="examples (flags and overrides in any order):\n"
        "  looped train --config tiny --out runs/tiny\n"
        "  looped train --config tiny --out runs/k2 --budget-frac 0.45 schedule=fixed:2\n"
        "  looped train --config tiny --out runs/a --print-config model.d_model=128",
    )
    add = parser.add_argument
    add("--config", default="tiny", help="preset name or YAML path (default: tiny)")
    add("--out", required=True, help="run directory (checkpoints, metrics.jsonl)")
    add("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    add("--init-from", help="start a new run from this run's/checkpoint's weights")
    branch = "continue another run's checkpoint (weights, optimizer, step) under this config"
    add("--branch-from", help=branch)
    add("--budget-flops", type=float, help="stop at this many modeled training FLOPs")
    add("--budget-frac", type=float, help="budget as a fraction of the preset's full budget")
    add("--quiet", action="store_true", help="no progress bar")
    return parser


def _overrides(args: argparse.Namespace) -> list[str]:
    """The overrides; a budget flag sets the length (max_steps=0) unless one is given."""
    if args.budget_frac is not None and not 0 < args.budget_frac:
        raise UserError(f"--budget-frac={args.budget_frac} must be > 0")
    budgets = {"budget_flops": args.budget_flops, "budget_frac": args.budget_frac}
    given = [f"{key}={value}" for key, value in budgets.items() if value is not None]
    if given and not any(o.startswith("max_steps=") for o in args.overrides):
        given.insert(0, "max_steps=0")
    return [*args.overrides, *given]


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    cfg = load_config(args.config, _overrides(args))
    if args.print_config:
        print(to_yaml(cfg), end="")
        return 0
    # the flags are the RunOptions fields of the same name
    options = {key: getattr(args, key) for key in ("resume", "init_from", "branch_from", "quiet")}
    summary = train(cfg, args.out, **options)
    if "stopped" in summary:
        return 130
    if int(os.environ.get("RANK", 0)) == 0:
        nll = (summary.get("eval") or {}).get("token_nll", {})
        shown = ", ".join(f"K={k}: {v:.3f}" for k, v in list(nll.items())[:8])
        print(
            f"done: {summary['steps']} steps, {summary['flops']:.3g} modeled FLOPs, "
            f"{summary['wall']:.0f}s; eval NLL {shown}"
        )
    return 0
