"""`looped probe`: the update-benefit probe (paper Fig. 4): one K=4 against one K=16 update.

looped probe --run runs/ff --batches 4                  # latest checkpoint
looped probe --run runs/ff/checkpoints/step_0000480 --json
looped probe --run runs/ff runs/u --plot benefit.png    # one line per run
looped probe --run runs/ff --grad-cosine 1,4,8,16       # gradient cosine between depths
"""

from __future__ import annotations

import json

from looped import plotting
from looped.commands.common import described
from looped.errors import UserError
from looped.schedule_spec import parse_depths
from looped.studies.probes import agreement_at, update_benefit
from looped.studies.report.probe import plot_benefit


def main(argv: list[str]) -> int:
    p = described("looped probe", __doc__)
    p.add_argument("--run", nargs="+", required=True, help="run or checkpoint directories")
    p.add_argument("--depths", default="1-16", help="serving depths (default 1-16)")
    p.add_argument("--batches", type=int, default=4, help="training batches to average over")
    p.add_argument("--shallow", type=int, default=4, help="the shallow update depth (default 4)")
    p.add_argument("--deep", type=int, default=16, help="the deep update depth (default 16)")
    cosine = "instead: cosine between the training gradients at these depths on the same batch"
    p.add_argument("--grad-cosine", metavar="DEPTHS", help=cosine)
    p.add_argument("--plot", help="write the figure here (PNG)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    if args.batches < 1:
        raise UserError(f"--batches {args.batches} must be >= 1")
    depths = parse_depths(args.grad_cosine or args.depths)
    if args.grad_cosine:
        results = [agreement_at(r, depths, args.batches) for r in args.run]
    else:
        results = [
            update_benefit(r, depths, args.batches, args.shallow, args.deep) for r in args.run
        ]
    if args.plot and not args.grad_cosine:
        plotting.files_only()
        plot_benefit(results, args.plot)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    show = _print_agreement if args.grad_cosine else _print_benefit
    for r in results:
        show(r)
    return 0


def _print_benefit(r: dict) -> None:
    """One checkpoint's mean benefit of the deep update, then its benefit at each depth."""
    lr, mean = f"lr {r['lr']:.2e}", f"mean benefit {r['mean_benefit']:+.4f} nats"
    print(f"{r['checkpoint']} (step {r['step']}, {lr}): {mean}")
    print("  " + "  ".join(f"k={d}: {r['benefit'][d]:+.4f}" for d in r["depths"]))


def _print_agreement(r: dict) -> None:
    """One checkpoint's cosine matrix between depths and how much of the gradient survives
    their averaging (what uniform training steps along)."""
    print(f"{r['checkpoint']} (step {r['step']}): gradient cosine between depths")
    print("      " + "".join(f"K={k:<6}" for k in r["depths"]))
    for k, row in zip(r["depths"], r["cosine"]):
        print(f"K={k:<4}" + "".join(f"{c:<8.3f}" for c in row))
    print(f"  |mean of the gradients| / mean |gradient| = {r['mean_survives']:.3f}")
