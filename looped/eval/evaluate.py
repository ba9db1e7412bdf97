"""Serving-depth evaluation: token NLL (and recalled bits on bios) at each depth K. Every depth
comes from one pass of max(depths) loops (``LoopedTransformer.forward_depths``), so a 1..16 sweep
costs one depth-16 forward plus 16 heads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from looped.config import TrainConfig, load_config
from looped.data.batching import build_source
from looped.eval.recall import recall_by_depth
from looped.model import LoopedTransformer
from looped.runtime.checkpoint import load_weights, resolve_checkpoint


def load_model(path: str | Path, device: str = "cpu") -> tuple[LoopedTransformer, TrainConfig]:
    """(LoopedTransformer in eval mode, TrainConfig) from a run or checkpoint directory: the
    config as trained, the weights of its newest intact checkpoint (or of the one named)."""
    ckpt = resolve_checkpoint(path)
    cfg = load_config(str(ckpt / "config.yaml"), check=False)  # as trained, to evaluate it
    model = LoopedTransformer(cfg.model)
    load_weights(ckpt, model)
    return model.to(device).eval(), cfg


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
        for k in depths:
            totals[k] += float(out[k][1].float().sum())
        count += int((y != -100).sum())
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
    """{'token_nll': {K: nats per token}, 'recall': {...}} for a DataSource (recall on bios)."""
    was_training = model.training
    model.eval()
    batches = source.eval.iter_eval_batches(batch_size, seq_len, n_batches)
    result: dict[str, Any] = {"token_nll": token_nll_by_depth(model, batches, depths, device)}
    if source.bios is not None:
        result["recall"] = recall_by_depth(
            model, source.bios, depths, batch_size=max(batch_size, 64), device=str(device)
        )
    model.train(was_training)
    return result


def token_nll_of(record: dict) -> dict:
    """The per-depth token NLL of an evaluation record (older runs stored it as `nll`)."""
    return record["token_nll"] if "token_nll" in record else record["nll"]


def evaluate_run(run: str, depths: list[int], n_batches: int = 0, device: str = "cpu") -> dict:
    """`evaluate` on a run's latest checkpoint (or a checkpoint), on its own eval data."""
    model, cfg = load_model(run, device)
    if max(depths) > cfg.model.max_depth:
        raise ValueError(f"depths {depths} go above this model's max_depth={cfg.model.max_depth}")
    source = build_source(cfg.data)
    n = n_batches or cfg.eval_batches
    return evaluate(model, source, depths, cfg.batch_size, cfg.seq_len, n, device)
