"""`looped eval`: token NLL (and recalled bits on bios) of a run at each serving depth.

looped eval --run runs/tiny --depths 1-16            # a table
looped eval --run runs/tiny --depths 1,4,16 --json   # one JSON object
looped eval --run runs/tiny/checkpoints/step_0000060  # a named checkpoint
"""

from __future__ import annotations

import argparse
import json

from looped.commands.common import described, device_flag
from looped.eval.evaluate import evaluate_run
from looped.schedule_spec import parse_depths


def parser() -> argparse.ArgumentParser:
    p = described("looped eval", __doc__)
    p.add_argument("--run", required=True, help="run directory (latest checkpoint) or checkpoint")
    p.add_argument("--depths", default="1-16", help="serving depths, e.g. 1-16 or 1,2,4,8")
    p.add_argument("--batches", type=int, default=0, help="NLL batches (default: the run's)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    depths = parse_depths(args.depths)
    result = evaluate_run(args.run, depths, args.batches, device_flag(args.device))
    if args.json:
        print(json.dumps({"run": args.run, "depths": depths, **result}, indent=2))
        return 0
    recall = result.get("recall", {})
    print(f"{'K':>3} {'token NLL':>10}" + (f" {'bits/person':>12}" if recall else ""))
    for k in depths:
        bits = f" {recall[k]['bits_per_person']:>12.2f}" if recall else ""
        print(f"{k:>3} {result['token_nll'][k]:>10.4f}" + bits)
    return 0
