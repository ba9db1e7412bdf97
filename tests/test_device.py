"""Device facts: device names resolve as the trainer and `looped eval` expect, a model reports
where it lives (peak FLOP/s: test_flops)."""

from __future__ import annotations

import pytest
import torch

from looped.device import cpu_name, model_device, pick_device
from looped.errors import UserError


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        assert pick_device("cuda", local_rank=0) == torch.device("cuda:0")
    else:
        with pytest.raises(UserError, match="device=cpu"):
            pick_device("cuda")


def test_model_device_and_cpu_name():
    assert model_device(torch.nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(torch.nn.Identity()) == torch.device("cpu")  # no parameters
    assert isinstance(cpu_name(), str) and cpu_name()
