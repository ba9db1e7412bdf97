"""Run a `looped` command that dies with SIGKILL at a named point, as a power cut would: the
crash-recovery tests' failpoints, patched in here so the package carries none.

    python tests/crash_at.py ckpt.after_weights:10 train --config tiny --out runs/r ...

Points (`:STEP` picks the checkpoint or metrics record of that step):
- ckpt.after_weights    a checkpoint's model.safetensors is written, state.pt is not
- ckpt.before_rename    every file of the checkpoint is written, the rename has not happened
- ckpt.after_save       a checkpoint is complete and older ones pruned
- atomic.between_renames  a re-saved directory is moved aside, the new one not yet in place
- metrics.mid_line      half of a metrics.jsonl line is on disk
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

from looped.cli import main
from looped.runtime import atomic, checkpoint, metrics


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, step: int | None) -> None:
    """Patch the library so that the process dies at `point` (and `step`)."""
    at = (lambda s: True) if step is None else (lambda s: int(s) == step)
    if point == "ckpt.after_weights":
        real_save = checkpoint.save_file

        def save_file(tensors, path, metadata):
            real_save(tensors, path, metadata=metadata)
            if at(metadata["step"]):
                kill()

        checkpoint.save_file = save_file
    elif point == "ckpt.before_rename":
        real_path = checkpoint.atomic_path

        @contextlib.contextmanager
        def atomic_path(final):
            with real_path(final) as tmp:
                yield tmp
                if at(Path(final).name.split("_")[-1]):
                    kill()

        checkpoint.atomic_path = atomic_path
    elif point == "ckpt.after_save":
        real_ckpt = checkpoint.save_checkpoint

        def save_checkpoint(run_dir, step, *args, **kwargs):
            out = real_ckpt(run_dir, step, *args, **kwargs)
            if at(step):
                kill()
            return out

        checkpoint.save_checkpoint = save_checkpoint
    elif point == "atomic.between_renames":
        real_rename = Path.rename

        def rename(self, target):
            out = real_rename(self, target)
            if Path(target).name.startswith(".old-"):
                kill()
            return out

        atomic.Path.rename = rename
    elif point == "metrics.mid_line":
        real_append = metrics.RunLog.append

        def append(self, record):
            if self.main and at(record["step"]):
                line = metrics.json.dumps(record) + "\n"
                with open(self.run_dir / "metrics.jsonl", "a") as f:
                    f.write(line[: len(line) // 2])
                kill()
            real_append(self, record)

        metrics.RunLog.append = append
    else:
        raise SystemExit(f"unknown point {point!r}; see this file's docstring")


if __name__ == "__main__":
    name, _, step = sys.argv[1].partition(":")
    arm(name, int(step) if step else None)
    raise SystemExit(main(sys.argv[2:]))
