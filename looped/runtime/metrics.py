"""A run directory's `metrics.jsonl`: one JSON record per line (`kind`, `step`, ...), appended by
the trainer (`RunLog`, which mirrors them as TensorBoard scalars when asked and writes the
summary last) and read back by the studies.

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
from looped.runtime.atomic import write_text_atomic


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


class RunLog:
    """What a run writes as it goes: records appended to RUN/metrics.jsonl and, with
    `tensorboard`, the same as TensorBoard scalars in RUN/tb; at the end RUN/summary.json. Only
    the main process writes (`main`); on the others each method does nothing."""

    def __init__(self, run_dir: Path, main: bool, tensorboard: bool) -> None:
        self.run_dir, self.main, self.board = run_dir, main, None
        if tensorboard and main:
            try:  # an optional extra, imported only when a run asks for it
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise UserError(
                    "tensorboard=true needs the tensorboard package: pip install -e '.[tensorboard]'"
                ) from None
            self.board = SummaryWriter(str(run_dir / "tb"))

    def append(self, record: dict[str, Any]) -> None:
        """Append one record to RUN/metrics.jsonl."""
        if not self.main:
            return
        line = json.dumps(record) + "\n"
        with writing(self.run_dir), open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(line)
        for key, value in _scalars(record) if self.board is not None else ():
            self.board.add_scalar(f"{record['kind']}/{key}", value, record["step"])

    def finish(self, summary: dict[str, Any]) -> None:
        """Close TensorBoard and write summary.json: a run directory holding it is finished."""
        if self.board is not None:
            self.board.close()
        if self.main:
            with writing(self.run_dir):
                write_text_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2))


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
