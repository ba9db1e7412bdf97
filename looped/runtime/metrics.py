"""A run directory's `metrics.jsonl`: one JSON record per line (`kind`, `step`, ...), appended by
the trainer and read back by the studies; and the same records as TensorBoard scalars.

Readers take no lock: a last line cut short (a live or killed run) is not a record yet.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from looped.errors import UserError
from looped.runtime import faults


def read_metrics(run_dir: Path) -> list[dict]:
    """Every complete record of RUN_DIR/metrics.jsonl, in order (none before the run starts)."""
    path = Path(run_dir) / "metrics.jsonl"
    records = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # cut short by a live (or crashed) run
    return records


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """Append one record to RUN_DIR/metrics.jsonl (failpoint `metrics.mid_line`)."""
    line = json.dumps(record) + "\n"
    with writing(run_dir), open(run_dir / "metrics.jsonl", "a") as f:
        if faults.armed("metrics.mid_line", record["step"]):
            f.write(line[: len(line) // 2])
            f.flush()
            faults.kill()
        f.write(line)


@contextmanager
def writing(run_dir: Path) -> Iterator[None]:
    """Turn a failed write in the run directory into one line naming the file and why."""
    try:
        yield
    except OSError as err:  # name the file, not the hidden temporary it was written through
        name = re.sub(r"/\.tmp-(.*)-[0-9a-f]{8}$", r"/\1", str(err.filename or run_dir))
        raise UserError(
            f"cannot write {name}: {err.strerror or err}; free space in {run_dir} (or make it "
            "writable) and continue with --resume"
        ) from None


class Board:
    """TensorBoard scalars of every record, in RUN/tb (tensorboard is an optional extra)."""

    def __init__(self, run_dir: Path) -> None:
        try:  # an optional extra, imported only when a run asks for it
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError(
                "tensorboard=true needs the tensorboard package: pip install -e '.[tensorboard]'"
            ) from None
        self.writer = SummaryWriter(str(run_dir / "tb"))

    def write(self, record: dict[str, Any]) -> None:
        for key, value in _scalars(record):
            self.writer.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def close(self) -> None:
        self.writer.close()


def _scalars(record: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Flatten a record into (name, number) pairs, e.g. nll/4 or recall/4/bits_per_person."""
    for key, value in record.items():
        if key in ("kind", "step"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _scalars(value, name + "/")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            yield name, value
