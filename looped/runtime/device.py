"""Facts about the machine a run is on: which device, a GPU's peak FLOP/s, the CPU kernels' path
and the dtype's autocast (timing a step is the studies' business: `looped.studies.timing`)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from looped.errors import UserError

# Dense (no sparsity) peak FLOP/s per device from vendor data sheets, by dtype. bf16/fp16 are
# tensor-core peaks; fp32 is the plain (non-TF32) peak, which PyTorch uses for fp32 matmuls by
# default. Keys match `torch.cuda.get_device_name()` case-insensitively, longest key first.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "A100": {"bf16": 312e12, "fp16": 312e12, "fp32": 19.5e12},
    "H100 PCIe": {"bf16": 756e12, "fp16": 756e12, "fp32": 51.2e12},
    "H100": {"bf16": 989e12, "fp16": 989e12, "fp32": 66.9e12},  # SXM
    "H200": {"bf16": 989e12, "fp16": 989e12, "fp32": 66.9e12},
    "B200": {"bf16": 2250e12, "fp16": 2250e12, "fp32": 75e12},
    "L4": {"bf16": 121e12, "fp16": 121e12, "fp32": 30.3e12},
    "L40S": {"bf16": 362e12, "fp16": 362e12, "fp32": 91.6e12},
    "V100": {"fp16": 125e12, "fp32": 15.7e12},  # no bf16 tensor cores
    "MI300X": {"bf16": 1307e12, "fp16": 1307e12, "fp32": 163.4e12},
}


def bf16_is_fast(device: torch.device) -> bool:
    """Whether bf16 matmuls have a hardware path on `device` (emulated: ~20x slower than fp32)."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
        except (AttributeError, RuntimeError):  # a build without oneDNN
            return False
    return False


def resolve_dtype(name: str, device: torch.device) -> str:
    """`auto` -> bf16 where the hardware runs it fast, else fp32; `fp32`/`bf16` as given."""
    if name != "auto":
        return name
    return "bf16" if bf16_is_fast(device) else "fp32"


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """`auto` | `cpu` | `cuda` | `cuda:N` -> a device; under torchrun `cuda` means this rank's GPU."""
    if name == "auto":
        return torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device={name} but no CUDA GPU is visible; use device=cpu")
    return torch.device(f"cuda:{local_rank}" if name == "cuda" else name)


def autocast(device: torch.device, dtype: str) -> AbstractContextManager:
    """Where a step runs in `dtype`: bf16 autocast on `device`, or (fp32) a context doing nothing."""
    if dtype == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


def model_device(model: Any) -> torch.device:
    """Where a model's parameters live (CPU for a model without parameters)."""
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration):
        return torch.device("cpu")


def device_name(device: torch.device) -> str:
    """The GPU's marketing name (the key into PEAK_FLOPS), or "cpu"."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def cpu_kernels() -> str:
    """The instruction set torch's CPU kernels dispatch to on this machine ("AVX2", "AVX512",
    ...). Two paths sum in different orders, so one run on two CPU generations parts in the last
    bits within tens of steps and more near a loss plateau: "bitwise" holds per path."""
    return torch.backends.cpu.get_cpu_capability()


def peak_flops(device_name: str, dtype: str = "bf16") -> float | None:
    """Dense peak FLOP/s of a device for a dtype (fp32 | bf16 | fp16), or None if unknown."""
    name = device_name.lower()
    for key in sorted(PEAK_FLOPS, key=len, reverse=True):
        if key.lower() in name:
            return PEAK_FLOPS[key].get(dtype)
    return None
