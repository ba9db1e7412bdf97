"""What serving depth buys, shown: the same prompts continued at depths 1, 2, 4 and 16.

A map block's seed-0 models at its longest length and shared LR (fixed-first K=2 (67%),
uniform 1..16) and a fixed K=4 twin trained here on the same data, steps and LR, so the three
differ only in their depth schedule, each continue a few prompts greedily at each depth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from looped import paper
from looped.data.text import load_tokenizer
from looped.errors import UserError
from looped.eval.evaluate import load_model
from looped.model import LoopedTransformer
from looped.runtime.checkpoint import list_checkpoints
from looped.studies.engine import name_of
from looped.studies.heldout import heldout_nll
from looped.studies.runner import Planned, execute
from looped.studies.textsetup import heldout_windows, run_config
from looped.studies.textstudy import BlockSettings

PROMPTS = (
    "def __init__(self, ",
    "    for i in range(",
    "import os\nimport sys\n\n\ndef ",
    '"""Return the ',
)
DEPTHS = (1, 2, 4, 16)
TOKENS = 24  # tokens generated per continuation


@torch.no_grad()
def continue_greedy(model: LoopedTransformer, tok: Any, prompt: str, depth: int, n: int) -> str:
    """`prompt` continued by `n` greedy tokens at serving depth `depth` (stops at end of text)."""
    x = torch.tensor([tok.encode(prompt)])
    start = x.shape[1]
    for _ in range(n):
        logits, _ = model(x[:, -model.config.seq_len :], depth=depth)
        nxt = int(logits[0, -1].argmax())
        if nxt == tok.eos_id:
            break
        x = torch.cat([x, torch.tensor([[nxt]])], dim=1)
    return tok.decode(x[0, start:].tolist())


def models(block: dict, out: Path, settings: BlockSettings, corpus: dict) -> dict[str, tuple]:
    """label -> (run directory, config) of the three models, training the fixed-K twin if it is
    missing (one run, a few minutes on a CPU)."""
    steps = max(settings.lengths)
    lr = block["shared_lr"][str(steps)]  # every schedule trains at the shared LR
    picked = {}
    for schedule in (paper.RECIPE_200M, paper.UNIFORM, paper.FIXED):
        cfg = run_config(settings.setup, corpus, schedule=schedule, lr=lr, seed=0, steps=steps)
        picked[paper.label(schedule)] = (out / "runs" / name_of(schedule, lr, 0, steps), cfg)
    run_dir, cfg = picked[paper.label(paper.FIXED)]  # the fixed-K twin, trained here
    execute([Planned(run_dir.name, cfg, paper.FIXED, steps)], out / "runs", 1, False, False)
    return picked


def sample_all(block: dict, out: Path, settings: BlockSettings, corpus: dict) -> dict:
    """Every model's continuations of every prompt at every depth, and its test NLL there: the
    map block `block` (its map.json entry, trained with `settings`) whose runs are in OUT/runs."""
    tok = load_tokenizer(corpus["path"])
    windows = heldout_windows(settings.setup, corpus)
    result: dict[str, Any] = {"prompts": list(PROMPTS), "depths": list(DEPTHS), "tokens": TOKENS}
    result["models"] = {}
    for label, (run_dir, cfg) in models(block, out, settings, corpus).items():
        if not (checkpoints := list_checkpoints(run_dir)):
            raise UserError(f"{run_dir} has no checkpoint; train the block with `looped map` first")
        model = load_model(checkpoints[-1][1])[0]
        nll = heldout_nll(run_dir, cfg, windows)["token_nll"]
        result["models"][label] = {
            "run": run_dir.name,
            "test_nll": {str(k): nll[k - 1] for k in DEPTHS},
            "samples": {
                str(k): [continue_greedy(model, tok, p, k, TOKENS) for p in PROMPTS] for k in DEPTHS
            },
        }
    return result
