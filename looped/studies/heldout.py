"""A finished run scored on fixed held-out windows: NLL per serving depth and its standard error.

    scores = heldout_nll(Path("runs/r"), cfg, windows)   # {"token_nll": [16], "mean_nll", "se"}

The standard error is across windows: how much the number would move on another draw of
held-out text of the same size (across seeds is the paired interval's job). The studies'
scoring, not the library's: a learner evaluates with `looped.eval.evaluate`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from looped.config import TrainConfig
from looped.model import LoopedTransformer
from looped.runtime.checkpoint import list_checkpoints, load_weights


def heldout_nll(run_dir: Path, cfg: TrainConfig, batches: list) -> dict[str, Any]:
    """A run's last checkpoint on `batches`: NLL per depth, their mean and its standard error."""
    model = LoopedTransformer(cfg.model)
    load_weights(list_checkpoints(run_dir)[-1][1], model)
    model.eval()
    depths = list(range(1, 17))
    per_window = []
    with torch.no_grad():
        for x, y in batches:
            out = model.forward_depths(x, depths, y, reduction="none", return_logits=False)
            losses = torch.stack([out[k][1].float().reshape(x.shape) for k in depths])  # (16, B, T)
            per_window.append(losses.mean(dim=2))  # (16, B)
    w = torch.cat(per_window, dim=1)  # (16, windows)
    mean_w = w.mean(dim=0)
    return {
        "token_nll": [float(v) for v in w.mean(dim=1)],
        "mean_nll": float(mean_w.mean()),
        "se": float(mean_w.std() / math.sqrt(len(mean_w))),
    }
