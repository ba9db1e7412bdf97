"""Facts about the machine a run is on: which device, the CPU's name, a GPU's peak FLOP/s, the
dtype's autocast, and how long a function takes there."""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar

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


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


@contextmanager
def one_thread() -> Iterator[None]:
    """Time a step as a study's worker trains it: on one thread (`runner` gives each worker one
    core; torch's default is every core, which would time a step no worker takes)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


Key = TypeVar("Key")  # a timed function's name: a label, or a depth K


def fixed_step(
    loss: Callable[[], torch.Tensor], optimizer: Any, device: torch.device, dtype: str
) -> Callable[[], None]:
    """One optimizer step on a fixed batch, to time: `loss()` under the dtype's autocast, its
    backward pass, the optimizer's step."""

    def step() -> None:
        with autocast(device, dtype):
            value = loss()
        value.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def time_min(
    fns: dict[Key, Callable[[], object]],
    warmup: int,
    reps: int,
    device: torch.device,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[Key, float]:
    """Minimum time (s) of each function, after `warmup` untimed calls. They take turns in every
    repetition (background load hits all alike), each repetition starting one further along (a
    big GEMM leaves the caches cold for whatever follows it)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    best = dict.fromkeys(fns, math.inf)
    names = list(fns)
    for rep in range(max(1, reps)):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            best[name] = min(best[name], time_once(fns[name], device, clock))
    return best


def time_once(
    fn: Callable[[], object], device: torch.device, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Seconds of one call, the device synchronized before and after."""
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda device: None
    sync(device)
    t0 = clock()
    fn()
    sync(device)
    return clock() - t0
