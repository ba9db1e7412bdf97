"""What a run tells the person watching it: a progress bar, and the wall time still to go."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


def bar(total: int, initial: int, desc: str, disable: bool) -> tqdm:
    return tqdm(total=total, initial=initial, desc=desc, disable=disable, dynamic_ncols=True)


def say(msg: str) -> None:
    """A line on stderr that does not break the progress bar."""
    tqdm.write(msg, file=sys.stderr)


def eta_line(name: str, flops_per_s: float, flops_left: float) -> str:
    """The modeled throughput so far and the wall time the remaining FLOPs need at that rate."""
    return (
        f"{name}: {flops_per_s / 1e12:.3g} modeled TFLOP/s so far; the remaining "
        f"{flops_left:.3g} FLOPs need about {duration(flops_left / flops_per_s)}"
    )


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
