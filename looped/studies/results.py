"""What finished runs wrote, read the one way every study reads it.

A branched run is read as if it had trained from scratch (`from_scratch`): its parent's records
up to the branch step come first, its training time adds the parent's share.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from looped.errors import UserError, first_line
from looped.runtime.atomic import write_text_atomic
from looped.runtime.device import cpu_kernels
from looped.runtime.metrics import read_metrics
from looped.studies.timing import cpu_name


def own_wall(train: list[dict]) -> float:
    """The seconds a run itself spent training, from its train records (0 before the first;
    evaluations and checkpoints excluded where the log has it)."""
    return train[-1].get("train_wall", train[-1]["wall"]) if train else 0.0


def from_scratch(
    runs_dir: Path, name: str, parent: str | None, branch_step: int
) -> tuple[list[dict], list[dict], float]:
    """A run read as if it had trained from scratch: its train records (its parent's up to the
    branch step first), its evaluations (the parent's at the branch step first) and its training
    seconds (its own plus its parent's, the parent's last record scaled to the branch step)."""
    own = read_metrics(runs_dir / name)
    inherited = read_metrics(runs_dir / parent) if parent else []
    inherited = [m for m in inherited if m["step"] <= branch_step]
    train = [m for m in own if m["kind"] == "train"]
    before = [m for m in inherited if m["kind"] == "train"]
    evals = [m for m in inherited if m["kind"] == "eval" and m["step"] == branch_step]
    wall = own_wall(train)
    if before:
        wall += own_wall(before) * branch_step / before[-1]["step"]
    return before + train, evals + [m for m in own if m["kind"] == "eval"], wall


def diverged(run_dir: Path) -> bool:
    """Whether a (sweep) run ended with a non-finite loss."""
    path = run_dir / "summary.json"
    return path.is_file() and "diverged" in json.loads(path.read_text())


def read_results_file(path: str | Path, flag: str, expect: str = "a results/*.json") -> dict:
    """The results object in the file a flag names, or a UserError in one line that names the
    flag, the file and what to give instead (`expect`): a missing file, a file that is not JSON,
    and JSON that is not an object (a list, a number) are all refused before anything trains."""
    where = f"{flag} {path}"
    if not Path(path).is_file():
        raise UserError(f"{where}: no such file; give {expect}")
    try:
        result = json.loads(Path(path).read_text())
    except ValueError as err:  # a JSONDecodeError or a UnicodeDecodeError
        raise UserError(f"{where} is not valid JSON ({first_line(err)}); give {expect}") from None
    if not isinstance(result, dict):
        kind = type(result).__name__.replace("NoneType", "null")
        raise UserError(f"{where} holds a JSON {kind}, not a results object; give {expect}")
    return result


def keep_earlier_times(meta: dict, results: Path, keys: tuple[str, ...], trained: int = 0) -> None:
    """When nothing was trained (neither `meta`'s runs_trained nor `trained` more), keep the
    timing fields of the results file being replaced: a rerun reusing every run took no time."""
    if meta["runs_trained"] + trained == 0 and results.is_file():
        before = json.loads(results.read_text())["meta"]
        meta.update({k: before[k] for k in keys if before.get(k) is not None})


def write_result(path: Path, result: dict, say: bool = True) -> Path:
    """A study's results file, written atomically in the one format of every results file;
    with `say`, a line says where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    if say:
        print(f"wrote {path}")
    return path


def machine_name() -> str:
    """CPU model, core count and the kernels torch dispatches to (`cpu_kernels`), for the record."""
    return f"{cpu_name()} ({os.cpu_count()} cores, {cpu_kernels()} kernels)"
