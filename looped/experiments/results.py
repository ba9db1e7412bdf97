"""What finished runs wrote, read the one way every study reads it.

A study reads each run's `metrics.jsonl` (`runtime.metrics.read_metrics`), and a run that
branched off another run's checkpoint is read as if it had trained from scratch: its parent's
records up to the branch step come first (`before_branch`), and its training time adds the
parent's share (`branched_wall`). The readers take no lock: a live run may be appending as they read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import cpu_name
from looped.runtime.metrics import read_metrics


def before_branch(runs_dir: Path, parent: str | None, branch_step: int) -> list[dict]:
    """The parent's records up to the step a branch continues from (none for a root run): what
    the branch inherits when it is read as if it had trained from scratch."""
    if not parent:
        return []
    return [m for m in read_metrics(runs_dir / parent) if m["step"] <= branch_step]


def train_wall(record: dict) -> float:
    """Seconds spent training (evaluations and checkpoints excluded where the log has it)."""
    return record.get("train_wall", record["wall"])


def own_wall(train: list[dict]) -> float:
    """The seconds a run itself spent training, from its train records (0 before the first)."""
    return train_wall(train[-1]) if train else 0.0


def branched_wall(train: list[dict], parent: list[dict], branch_step: int) -> float:
    """A run's training seconds as if it had trained from scratch: its own, plus (for a branch)
    its parent's up to the branch step. `parent` holds the parent's train records up to there;
    the last one is scaled to the branch step, which leaves it as it is when a record was logged
    at the branch step itself."""
    wall = own_wall(train)
    if parent:
        wall += train_wall(parent[-1]) * branch_step / parent[-1]["step"]
    return wall


def diverged(run_dir: Path) -> bool:
    """Whether a (sweep) run ended with a non-finite loss."""
    path = run_dir / "summary.json"
    return path.is_file() and "diverged" in json.loads(path.read_text())


def keep_earlier_times(meta: dict, results: Path, keys: tuple[str, ...]) -> None:
    """When nothing was trained, `meta` takes these timing fields from the results file it
    replaces: the times are those of the invocation that trained the runs, not of a re-read."""
    if results.is_file():
        before = json.loads(results.read_text())["meta"]
        meta.update({k: before[k] for k in keys if before.get(k) is not None})


def write_result(path: Path, result: dict, say: bool = True) -> Path:
    """A study's results file, written whole or not at all, in the one format every results
    file has (JSON, one space of indent, non-ASCII text as itself, a final newline); with `say`,
    a line says where (studies that name their figures too say it themselves)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if say:
        print(f"wrote {path}")
    return path


def machine_name() -> str:
    """CPU model and core count, for the record."""
    return f"{cpu_name()} ({os.cpu_count()} cores)"
