"""Failpoints: kill this process with SIGKILL at a named point, to test crash recovery.

    LOOPED_FAULT=ckpt.after_weights:30 looped train ...    # dies inside the save of step 30

Read once, at import (unset, a point costs a lookup). SIGKILL runs nothing after it, like a
power cut:

- ``ckpt.after_weights``   a checkpoint's model.safetensors is written, state.pt is not
- ``ckpt.before_rename``   every file of the checkpoint is written, the rename has not happened
- ``atomic.between_renames``  a re-saved directory is moved aside, the new one not yet in place
- ``metrics.mid_line``     half of a metrics.jsonl line is on disk
- ``ckpt.after_save``      a checkpoint is complete and older ones pruned (at the last step: the
  final evaluation and summary are not written)
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "ckpt.after_weights", "ckpt.before_rename", "atomic.between_renames", "metrics.mid_line",
    "ckpt.after_save",
)  # fmt: skip


def _parse(spec: str) -> tuple[str, int | None] | None:
    if not spec:
        return None
    name, _, step = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"LOOPED_FAULT={spec!r}: unknown point; choose one of {', '.join(POINTS)}")
    return name, int(step) if step else None


_ARMED = _parse(os.environ.get("LOOPED_FAULT", ""))


def armed(name: str, step: int | None = None) -> bool:
    """Whether the failpoint `name` fires here (at `step`, when the spec names one)."""
    if _ARMED is None or _ARMED[0] != name:
        return False
    return _ARMED[1] is None or _ARMED[1] == step


def failpoint(name: str, step: int | None = None) -> None:
    """SIGKILL this process if LOOPED_FAULT names this point (and step)."""
    if armed(name, step):
        kill()


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
