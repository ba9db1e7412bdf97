"""Device facts: device names resolve as the trainer and `looped eval` expect, a model reports
where it lives (peak FLOP/s: test_flops)."""

from __future__ import annotations

import pytest
import torch

from looped.errors import UserError
from looped.runtime.device import model_device, pick_device
from looped.studies.timing import cpu_name


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


def test_auto_dtype_is_bf16_only_where_the_hardware_has_it():
    import torch

    from looped.runtime import device
    from looped.runtime.device import bf16_is_fast, resolve_dtype

    cpu = torch.device("cpu")
    assert resolve_dtype("fp32", cpu) == "fp32" and resolve_dtype("bf16", cpu) == "bf16"
    assert isinstance(bf16_is_fast(cpu), bool)
    assert not bf16_is_fast(torch.device("meta"))  # neither CUDA nor a CPU: no fast path
    for fast, want in ((True, "bf16"), (False, "fp32")):
        original = device.bf16_is_fast
        device.bf16_is_fast = lambda _d, fast=fast: fast
        try:
            assert resolve_dtype("auto", cpu) == want
        finally:
            device.bf16_is_fast = original


def test_trainer_records_the_resolved_dtype(tmp_path):
    import torch

    from looped.config import load_config
    from looped.runtime.device import resolve_dtype
    from looped.training.trainer import train

    small = ["model.d_model=32", "model.n_head=2", "data.persons=8", "batch_size=2", "seq_len=64",
             "model.seq_len=64", "eval_depths=1-2", "eval_batches=1", "threads=1"]  # fmt: skip
    cfg = load_config("tiny", small + ["max_steps=2", "eval_interval=0", "dtype=auto"])
    train(cfg, tmp_path / "r", quiet=True)
    written = load_config(str(tmp_path / "r" / "config.yaml"))
    assert written.dtype == resolve_dtype("auto", torch.device("cpu")) != "auto"


def test_one_thread_times_on_one_core_and_gives_the_cores_back_even_on_an_error():
    from looped.studies.timing import one_thread

    before = max(2, torch.get_num_threads())
    torch.set_num_threads(before)
    try:
        with pytest.raises(RuntimeError, match="boom"), one_thread():
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
        assert torch.get_num_threads() == before
    finally:
        torch.set_num_threads(before)
