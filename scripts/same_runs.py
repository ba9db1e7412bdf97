"""Are two study output directories the same runs? The check a refactor of the training or study
code must pass: the same weights, optimizer and RNG state, metrics, configs and results, with
only what measures the machine or names the directory left out.

    git worktree add /tmp/before <commit>                  # the code before the change
    PYTHONPATH=/tmp/before python -m looped demo --quick --out /tmp/a/demo --quiet
    python -m looped demo --quick --out /tmp/b/demo --quiet    # the code after it
    python scripts/same_runs.py /tmp/a /tmp/b              # exit 0: the same; 1: what differs

Left out of the comparison: timing fields (wall, seconds, tokens/s, memory, the machine's name),
a checkpoint's random run id, the lineage's parent path, and config_sha256, which hashes the
config with its data path. Paths are compared with each side's own root replaced by ROOT.
Weights (`*.safetensors`) and state (`state.pt`, loaded weights-only) are compared tensor by
tensor, bitwise; PNG figures and every other file byte for byte.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

# keys that measure the machine or the invocation, not the run: these, and any key that names a
# wall time or seconds (wall, train_wall, wall_seconds, phase_seconds, train_seconds, ...)
TIMING = {"tokens_per_s", "mem_gb", "mfu", "eta", "machine", "runs_trained", "worker_s"}
UNIQUE = {"run_id", "lineage", "config_sha256"}  # a new uuid per run; a path; a hash of a path
SKIPPED = {".lock"}


def timing(key: str) -> bool:
    return key in TIMING or "wall" in key or "second" in key


def strip(x: Any) -> Any:
    """A JSON value without the keys that measure time or the machine."""
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not timing(str(k))}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x


def tensors(x: Any) -> list[torch.Tensor]:
    """Every tensor of a nested state, in a fixed order."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for k in sorted(x, key=str) for t in tensors(x[k])]
    if isinstance(x, list | tuple):
        return [t for v in x for t in tensors(v)]
    return []


def plain(x: Any) -> Any:
    """A nested state with its tensors blanked and the per-run keys left out."""
    if isinstance(x, torch.Tensor):
        return "tensor"
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items() if k not in UNIQUE and not timing(str(k))}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x


def same_state(a: Path, b: Path) -> bool:
    sa, sb = torch.load(a, weights_only=True), torch.load(b, weights_only=True)
    ta, tb = tensors(sa), tensors(sb)
    equal = len(ta) == len(tb) and all(torch.equal(x, y) for x, y in zip(ta, tb))
    return equal and plain(sa) == plain(sb)


def same_weights(a: Path, b: Path) -> bool:
    with safe_open(a, "pt") as x, safe_open(b, "pt") as y:
        if sorted(x.keys()) != sorted(y.keys()):
            return False
        if not all(torch.equal(x.get_tensor(k), y.get_tensor(k)) for k in x.keys()):
            return False
        ma, mb = x.metadata() or {}, y.metadata() or {}
    return {k: v for k, v in ma.items() if k not in UNIQUE} == {
        k: v for k, v in mb.items() if k not in UNIQUE
    }


def same_file(a: Path, b: Path, root_a: Path, root_b: Path) -> bool:
    """Whether two files of the two sides say the same, by what kind of file they are."""
    if a.name == "state.pt":
        return same_state(a, b)
    if a.suffix == ".safetensors":
        return same_weights(a, b)
    if a.suffix not in (".json", ".jsonl", ".yaml"):
        return a.read_bytes() == b.read_bytes()
    ta = a.read_text().replace(str(root_a), "ROOT")
    tb = b.read_text().replace(str(root_b), "ROOT")
    if a.suffix == ".json":
        return strip(json.loads(ta)) == strip(json.loads(tb))
    if a.suffix == ".jsonl":
        return [strip(json.loads(line)) for line in ta.splitlines()] == [
            strip(json.loads(line)) for line in tb.splitlines()
        ]
    return ta == tb


def compare(a: Path, b: Path) -> tuple[int, list[str]]:
    """(files compared, a line per difference) between the trees under a and b."""
    files = {
        p.relative_to(root)
        for root in (a, b)
        for p in root.rglob("*")
        if p.is_file() and p.name not in SKIPPED and p.suffix != ".log"
    }
    problems = []
    for rel in sorted(files):
        if not (a / rel).is_file() or not (b / rel).is_file():
            problems.append(f"only in {a if (a / rel).is_file() else b}: {rel}")
        elif not same_file(a / rel, b / rel, a, b):
            problems.append(f"differs: {rel}")
    return len(files), problems


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(Path(p).is_dir() for p in argv):
        print("usage: python scripts/same_runs.py DIR_A DIR_B (two study output directories)")
        return 2
    n, problems = compare(Path(argv[0]).resolve(), Path(argv[1]).resolve())
    print("\n".join(problems))
    print(f"{n} files compared, {len(problems)} differ")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
