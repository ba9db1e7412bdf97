"""Does one run repeat bitwise on two CPUs? torch dispatches its CPU kernels by instruction set
(AVX2 on one machine, AVX-512 on the next; `cpu_kernels()` says which), and the two sum in
different orders. This trains one config under two dispatch levels on this machine, the way two
CPU generations would run it, and prints the first logged step where the training loss parts.

    python scripts/kernel_paths.py                        # tiny preset, 60 steps: default vs avx2
    python scripts/kernel_paths.py --steps 100 > results/kernel_paths.txt   # the committed one

A run that parts here parts between two machines whose `summary.json` `cpu_kernels` differ:
"bitwise" (resume, branch, same_runs.py) holds per kernel path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def train_losses(metrics: Path) -> dict[int, float]:
    """Each logged step's training loss, from a run's metrics.jsonl."""
    rows = (json.loads(line) for line in metrics.read_text().splitlines() if line.strip())
    return {r["step"]: r["loss"] for r in rows if r.get("kind") == "train"}


def first_difference(a: dict[int, float], b: dict[int, float]) -> int | None:
    """The first step both logged whose losses are not bitwise equal; None if none."""
    return next((s for s in sorted(a.keys() & b.keys()) if a[s] != b[s]), None)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default="tiny", help="preset or YAML (tiny)")
    p.add_argument("--steps", type=int, default=60, help="steps per run (60)")
    p.add_argument("--levels", default="default,avx2", help="two ATEN_CPU_CAPABILITY values")
    a = p.parse_args(argv)
    levels = [v.strip() for v in a.levels.split(",")]
    if len(levels) != 2:
        print(f"--levels {a.levels}: give two levels, e.g. --levels default,avx2", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        losses = []
        for level in levels:
            env = os.environ | {"ATEN_CPU_CAPABILITY": level, "OMP_NUM_THREADS": "1"}
            cmd = [sys.executable, "-m", "looped", "train", "--config", a.config, "--quiet"]
            cmd += ["--out", f"{tmp}/{level}", f"max_steps={a.steps}", "threads=1", "device=cpu"]
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            losses.append(train_losses(Path(tmp, level, "metrics.jsonl")))
    step = first_difference(*losses)
    print(
        f"{a.config}, {a.steps} steps, one thread; ATEN_CPU_CAPABILITY {levels[0]} against {levels[1]}"
    )
    print("first logged step whose training loss differs:", "none" if step is None else step)
    for s in sorted(losses[0].keys() & losses[1].keys()):
        print(f"step {s:5d}  {losses[0][s]!r:>20}  {losses[1][s]!r:>20}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
