"""The FLOP model against PyTorch's own counter, its exact algebra, and the paper's numbers.

    .venv/bin/pytest tests/test_flops.py
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from looped import cli
from looped.config import load_config
from looped.errors import UserError
from looped.flops import (
    fixed_and_loop_cost,
    flops_per_token,
    mfu,
    peak_flops,
    saving,
    schedule_flops,
    steps_for_budget,
)
from looped.model import LoopedConfig, LoopedTransformer
from looped.schedules import parse_schedule

T = 32  # sequence length of the counter checks
SMALL = dict(vocab_size=96, seq_len=T, d_model=64, n_head=4)
CONFIGS = {
    "plain": LoopedConfig(**SMALL),
    "prelude-coda-concat-untied": LoopedConfig(
        **SMALL, n_prelude=1, n_block=2, n_coda=1, injection="concat", tie_embeddings=False
    ),
    "prelude-none": LoopedConfig(**SMALL, n_prelude=2, n_block=1, injection="none", d_ff=96),
}


def counted_flops_per_token(cfg: LoopedConfig, depth: int, bptt: int = 0) -> float:
    """FlopCounterMode's count for forward + backward of the loss, per token.

    SDPA runs through the math backend: on CPU the fused flash kernel has no formula in the
    counter (it would count 0 for attention), while the math path's bmm calls are counted.
    """
    torch.manual_seed(0)
    model = LoopedTransformer(LoopedConfig(**{**cfg.__dict__, "bptt": bptt}))
    idx = torch.randint(0, cfg.vocab_size, (2, T))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, depth=depth, targets=idx)
        loss.backward()
    return counter.get_total_flops() / idx.numel()


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("depth", [1, 3, 8])
def test_flops_per_token_matches_flop_counter(name: str, depth: int) -> None:
    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    assert flops_per_token(cfg, depth, T) == pytest.approx(counted_flops_per_token(cfg, depth), rel=0.05)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("depth", "bptt"), [(5, 2), (3, 1), (2, 4)])
def test_truncated_backprop_matches_flop_counter(name: str, depth: int, bptt: int) -> None:
    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    modeled = flops_per_token(cfg, depth, T, bptt=bptt)
    assert modeled == pytest.approx(counted_flops_per_token(cfg, depth, bptt), rel=0.05)
