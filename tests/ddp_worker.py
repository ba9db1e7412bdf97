"""Run by test_train under torchrun: train a tiny model on 2 gloo ranks and dump, per rank, the
depths it ran and its final full weights (DDP replicas, or FSDP2 shards gathered).
Modes: ddp, fsdp, bptt (DDP with truncated backprop, injection none and a prelude)."""

import os
import sys
from pathlib import Path

import torch

import looped.training.trainer as train_mod
from looped.config import load_config
from looped.model import LoopedTransformer

out, mode = Path(sys.argv[1]), sys.argv[2]
torch.set_num_threads(1)
seen = {"depths": [], "weights": None}
forward = LoopedTransformer.forward


def recording_forward(self, idx, depth, *args, **kwargs):
    seen["depths"].append(depth)
    return forward(self, idx, depth, *args, **kwargs)


full = train_mod.full_state


def recording_full(*args, **kwargs):
    weights, opt_state = full(*args, **kwargs)
    seen["weights"] = weights
    return weights, opt_state


LoopedTransformer.forward = recording_forward
train_mod.full_state = recording_full
cfg = load_config(
    "tiny",
    [
        "model.d_model=32", "model.n_head=2", "model.seq_len=64", "seq_len=64", "data.persons=8",
        "batch_size=2", "grad_accum=2", "max_steps=6", "eval_interval=0", "eval_depths=1-2",
        "schedule=uniform:1-4", f"fsdp={mode == 'fsdp'}", "device=cpu",
        # bptt: truncated backprop with injection none leaves the prelude without a gradient
        # at depths 2..4 (only the first loop sees it, under no_grad); DDP must be told
        *(["model.n_prelude=1", "model.injection=none", "model.bptt=1"] if mode == "bptt" else []),
    ],
)  # fmt: skip
rank = int(os.environ["RANK"])
train_mod.train(cfg, out / "run", quiet=True)
out.mkdir(parents=True, exist_ok=True)
torch.save({"depths": seen["depths"], "weights": seen["weights"]}, out / f"rank{rank}.pt")
