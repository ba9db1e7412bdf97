"""Timing a training step, and the wall-clock saving those times buy: what the map's `--time`,
the demo's calibration, `scripts/bench.py` and `scripts/step_speed.py` measure with. A study's
business, not the library's: a learner trains and counts modeled FLOPs; the studies time.

Every timer takes the same step (`fixed_step`: forward under the dtype's autocast, backward,
the optimizer) and keeps the fastest of interleaved repetitions (`time_min`); a saving weights
per-depth step times by each seed's exact draws (`wall_saving`), not their expectation.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import torch

from looped.runtime.device import autocast
from looped.schedules import Schedule


def cpu_name() -> str:
    """The processor's model name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def drawn_seconds(step_seconds: Mapping[int, float], schedule: Schedule, total_steps: int) -> float:
    """A whole run's time at measured per-depth step times, over its seed's actual draws (not
    their expectation: a short run's draws can average K=10 where 8.5 is expected)."""
    return sum(step_seconds[schedule.depth(s, total_steps)] for s in range(total_steps))


def wall_saving(
    step_seconds: Mapping[int, float],
    ours: Iterable[Schedule],
    refs: Iterable[Schedule],
    total_steps: int,
) -> float:
    """The wall-clock saving of runs of `ours` against runs of `refs` (one schedule per seed):
    1 - their summed `drawn_seconds`. The one wall-clock saving of the package
    (`scripts/bench.py`, `looped map --time`)."""
    mine = sum(drawn_seconds(step_seconds, s, total_steps) for s in ours)
    return 1.0 - mine / sum(drawn_seconds(step_seconds, s, total_steps) for s in refs)
