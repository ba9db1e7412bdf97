"""A run directory's `metrics.jsonl`: one JSON record per line, appended by the trainer as it goes
(`kind` "train" or "eval", and the `step`), read back by the studies and by `looped plot`.

Readers take no lock: a run may be appending while they read, and a run killed mid-write leaves
its last line cut short. Either way that line is not a record yet, and is left out.
"""

from __future__ import annotations

import json
from pathlib import Path


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
