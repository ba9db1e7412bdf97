"""The optimizer and its learning-rate schedule: AdamW, and `lr_at`, the LR at each step.

The LR, like the depth and the batch, is a function of the step alone: resumes are bitwise.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from looped.errors import UserError


def make_optimizer(model: torch.nn.Module, optim: Any, fused: bool = False) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only: not on norms, not on the embedding (or tied head)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and "embed" not in name else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": optim.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=optim.lr, betas=tuple(optim.betas), fused=fused or None)


def lr_at(step: int, total_steps: int, optim: Any) -> float:
    """Learning rate at `step`: linear warmup, then cosine to min, or warmup-stable-decay (WSD:
    runs of different length agree on every LR before the decay, so one can branch off another)."""
    peak, floor = optim.lr, optim.lr * optim.min_lr_ratio
    warm = min(optim.warmup_steps, max(total_steps - 1, 0))
    if step < warm:
        return peak * (step + 1) / warm
    if optim.lr_schedule == "cosine":
        progress = (step - warm) / max(1, total_steps - warm - 1)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * min(1.0, progress)))
    if optim.lr_schedule == "wsd":
        decay_start = total_steps - max(1, round(optim.decay_frac * total_steps))
        if step < max(decay_start, warm):
            return peak
        progress = (step - decay_start + 1) / max(1, total_steps - decay_start)
        return peak - (peak - floor) * min(1.0, progress)
    raise UserError(f"optim.lr_schedule={optim.lr_schedule!r}: choose cosine or wsd")
