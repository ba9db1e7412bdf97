"""The update-benefit probe (paper Fig. 4): is one update at K=16 worth more than one at K=4?

From a checkpoint, two copies of the model each take one AdamW step on the same batch at the
checkpoint's learning rate, at K=4 and at K=16; benefit(k) = held-out NLL_k(after K=4) -
NLL_k(after K=16) at every serving depth k, averaged over batches (positive: the deep update
helps). Also here: the cosine between the training gradients at different depths.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch

from looped.config import lr_at
from looped.data.batching import batch_generator, build_source
from looped.eval.evaluate import load_model, token_nll_by_depth
from looped.model import LoopedTransformer
from looped.runtime import checkpoint as ckpt_lib
from looped.training.run import make_optimizer


def one_update(
    model: LoopedTransformer,
    optimizer_state: dict,
    optim_cfg: Any,
    lr: float,
    x: torch.Tensor,
    y: torch.Tensor,
    depth: int,
    micro_batch: int = 0,
) -> LoopedTransformer:
    """A copy of `model` after one AdamW step at `depth` on the optimizer batch (x, y), its
    gradient accumulated `micro_batch` rows at a time as the trainer does (0: all at once)."""
    clone = copy.deepcopy(model).train()
    opt = make_optimizer(clone, optim_cfg)
    opt.load_state_dict(copy.deepcopy(optimizer_state))
    for group in opt.param_groups:
        group["lr"] = lr
    step = micro_batch or len(x)
    for i in range(0, len(x), step):
        _, loss = clone(x[i : i + step], depth, y[i : i + step])
        (loss * len(x[i : i + step]) / len(x)).backward()
    if optim_cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(clone.parameters(), optim_cfg.grad_clip)
    opt.step()
    return clone.eval()


def _load(run: str | Path) -> tuple[Path, Any, dict, LoopedTransformer]:
    """A run's (or checkpoint directory's) checkpoint: its path, config, state and model."""
    ckpt = ckpt_lib.resolve_checkpoint(run)
    model, cfg = load_model(ckpt)
    return ckpt, cfg, ckpt_lib.load_state(ckpt), model


def update_benefit(
    run: str | Path,
    depths: list[int],
    n_batches: int = 4,
    shallow: int = 4,
    deep: int = 16,
    eval_batches: int = 4,
) -> dict[str, Any]:
    """Mean and per-batch benefit(k) = NLL_k(after K=shallow) - NLL_k(after K=deep)."""
    ckpt, cfg, state, model = _load(run)
    source = build_source(cfg.data)
    held_out = list(source.eval.iter_eval_batches(cfg.batch_size, cfg.seq_len, eval_batches))
    step = state["step"]
    lr = lr_at(min(step, state["total_steps"] - 1), state["total_steps"], cfg.optim)
    base = token_nll_by_depth(model.eval(), held_out, depths)
    per_batch = []
    for b in range(n_batches):
        # a full optimizer batch from a stream the run never draws (micro index -1 - b)
        gens = [batch_generator(cfg.seed, step, -1 - b, m) for m in range(cfg.grad_accum)]
        pairs = [source.train.sample_batch(cfg.batch_size, cfg.seq_len, g) for g in gens]
        x, y = torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
        after = {}
        for k in (shallow, deep):
            updated = one_update(model, state["optimizer"], cfg.optim, lr, x, y, k, cfg.batch_size)
            after[k] = token_nll_by_depth(updated, held_out, depths)
        per_batch.append({d: after[shallow][d] - after[deep][d] for d in depths})
    mean = {d: sum(p[d] for p in per_batch) / n_batches for d in depths}
    setup = {"checkpoint": str(ckpt), "step": step, "lr": lr, "shallow": shallow, "deep": deep}
    found = {"depths": depths, "token_nll_before": base, "benefit": mean, "per_batch": per_batch}
    return setup | found | {"mean_benefit": sum(mean.values()) / len(mean)}


def depth_gradients(
    model: LoopedTransformer, x: torch.Tensor, y: torch.Tensor, depths: list[int]
) -> dict[int, torch.Tensor]:
    """The full training gradient (one flat fp32 vector) of the loss at each depth, same batch:
    uniform training averages these, so where they disagree each step teaches every depth less."""
    params = [p for p in model.parameters() if p.requires_grad]
    grads = {}
    for k in depths:
        _, loss = model(x, k, y)
        g = torch.autograd.grad(loss, params, allow_unused=True)
        g = [gi if gi is not None else torch.zeros_like(p) for gi, p in zip(g, params)]
        grads[k] = torch.cat([gi.float().flatten() for gi in g])
    return grads


def gradient_agreement(
    model: LoopedTransformer, x: torch.Tensor, y: torch.Tensor, depths: list[int]
) -> dict[str, Any]:
    """Cosine between the gradients at every pair of depths on one batch, their norms, and the
    norm of their mean over the mean norm (1 when all agree, 1/sqrt(n) when orthogonal)."""
    g = torch.stack(list(depth_gradients(model, x, y, depths).values()))  # in `depths` order
    norms = g.norm(dim=1)
    unit = g / norms.clamp_min(1e-30)[:, None]
    cos, survives = unit @ unit.T, float(g.mean(0).norm() / norms.mean())
    norm = dict(zip(depths, norms.tolist()))
    return {"depths": depths, "cosine": cos.tolist(), "norm": norm, "mean_survives": survives}


def agreement_at(run: str | Path, depths: list[int], n_batches: int = 4) -> dict[str, Any]:
    """`gradient_agreement` at a run's checkpoint, averaged over `n_batches` batches."""
    ckpt, cfg, state, model = _load(run)
    step = state["step"]
    model.train()
    source = build_source(cfg.data)
    per_batch = []
    for b in range(n_batches):
        gen = batch_generator(cfg.seed, step, -1 - b, 0)
        x, y = source.train.sample_batch(cfg.batch_size, cfg.seq_len, gen)
        per_batch.append(gradient_agreement(model, x, y, depths))
    cosine = np.mean([r["cosine"] for r in per_batch], axis=0).tolist()
    norm = {k: float(np.mean([r["norm"][k] for r in per_batch])) for k in depths}
    survives = float(np.mean([r["mean_survives"] for r in per_batch]))
    found = {"checkpoint": str(ckpt), "step": step, "depths": depths, "cosine": cosine}
    return found | {"norm": norm, "mean_survives": survives, "per_batch": per_batch}
