"""`looped downstream`: zero-shot HellaSwag / PIQA / ARC-Easy accuracy of a run at each depth.

looped downstream --run runs/1b-fixed-first --tasks hellaswag,piqa,arc_easy --depths 1-16
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from looped.commands.common import described, device_flag
from looped.eval.downstream import evaluate_tasks, load_run
from looped.schedule_spec import parse_depths


def parser() -> argparse.ArgumentParser:
    p = described("looped downstream", __doc__)
    p.add_argument("--run", required=True, help="run directory (checkpoint + config)")
    p.add_argument("--tasks", default="hellaswag,piqa,arc_easy", help="comma-separated task names")
    p.add_argument("--depths", default="1-16", help="serving depths, e.g. 1-16 or 1,2,4,8")
    p.add_argument("--limit", type=int, default=None, help="first N items per task")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass")
    p.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda:N")
    p.add_argument("--data", action="append", default=[], metavar="TASK=PATH", help="local data")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    files = dict(kv.split("=", 1) for kv in a.data if "=" in kv)
    device = device_flag(a.device)
    model, tokenizer = load_run(a.run, device)
    depths, tasks = parse_depths(a.depths), a.tasks.split(",")
    res = evaluate_tasks(model, tokenizer, tasks, depths, a.limit, a.batch_size, device, files)
    for task, by_depth in res.items():
        for d, m in by_depth.items():
            print(f"{task:<10} K={d:<3} acc={m['acc']:.4f} acc_norm={m['acc_norm']:.4f} n={m['n']}")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0
