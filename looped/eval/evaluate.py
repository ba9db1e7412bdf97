"""Serving-depth evaluation: token NLL (and recalled bits on bios) at each depth K.

    looped eval --run runs/tiny --depths 1-16            # a table
    looped eval --run runs/tiny --depths 1,4,16 --json   # one JSON object
    looped eval --run runs/tiny/checkpoints/step_0000060  # a named checkpoint

Every depth comes from one pass of max(depths) loops (``LoopedTransformer.forward_depths``), so
a 1..16 sweep costs one depth-16 forward plus 16 heads.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from looped.data.batching import build_source
from looped.eval.recall import recall_by_depth
from looped.model import LoopedTransformer
from looped.runtime.checkpoint import load_model
from looped.runtime.device import pick_device
from looped.schedules import parse_depths


@torch.no_grad()
def token_nll_by_depth(
    model: LoopedTransformer, batches: Any, depths: list[int], device: torch.device | str = "cpu"
) -> dict[int, float]:
    """Mean next-token NLL (nats/token) at each depth over the given (x, y) batches."""
    totals = dict.fromkeys(depths, 0.0)
    count = 0
    for x, y in batches:
        x, y = x.to(device), y.to(device)
        out = model.forward_depths(x, depths, y, reduction="none", return_logits=False)
        n = int((y != -100).sum())
        for k in depths:
            totals[k] += float(out[k][1].float().sum())
        count += n
    if count == 0:
        raise ValueError("no evaluation tokens: the eval corpus is shorter than one sequence")
    return {k: totals[k] / count for k in depths}


@torch.no_grad()
def evaluate(
    model: LoopedTransformer,
    source: Any,
    depths: list[int],
    batch_size: int,
    seq_len: int,
    n_batches: int,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """{'token_nll': {K: nats per token}, 'recall': {...}} for a DataSource (recall only on bios
    data, where the fact NLL lives: `recall[K]['attributes'][attr]['nll']`)."""
    was_training = model.training
    model.eval()
    result: dict[str, Any] = {
        "token_nll": token_nll_by_depth(
            model, source.eval.iter_eval_batches(batch_size, seq_len, n_batches), depths, device
        )
    }
    if source.bios is not None:
        result["recall"] = recall_by_depth(
            model, source.bios, depths, batch_size=max(batch_size, 64), device=str(device)
        )
    model.train(was_training)
    return result


def token_nll_of(record: dict) -> dict:
    """The per-depth token NLL of an evaluation record (`evaluate`'s result, a metrics.jsonl
    eval line). Runs written before the rename stored it as `nll`; they still load."""
    return record["token_nll"] if "token_nll" in record else record["nll"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="looped eval", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run", required=True, help="run directory (latest checkpoint) or a checkpoint directory"
    )
    parser.add_argument(
        "--depths", default="1-16", help="serving depths, e.g. 1-16 or 1,2,4,8 (default 1-16)"
    )
    parser.add_argument(
        "--batches", type=int, default=0, help="NLL batches (default: the run's eval_batches)"
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    device = str(pick_device(args.device))
    model, cfg = load_model(args.run, device)
    depths = parse_depths(args.depths)
    if max(depths) > cfg.model.max_depth:
        raise ValueError(
            f"--depths {args.depths} goes above this model's max_depth={cfg.model.max_depth}"
        )
    source = build_source(cfg.data)
    result = evaluate(
        model,
        source,
        depths,
        cfg.batch_size,
        cfg.seq_len,
        args.batches or cfg.eval_batches,
        device,
    )
    if args.json:
        print(json.dumps({"run": args.run, "depths": depths, **result}, indent=2))
        return 0
    recall = result.get("recall", {})
    print(f"{'K':>3} {'token NLL':>10}" + (f" {'bits/person':>12}" if recall else ""))
    for k in depths:
        row = f"{k:>3} {result['token_nll'][k]:>10.4f}"
        if recall:
            row += f" {recall[k]['bits_per_person']:>12.2f}"
        print(row)
    return 0
