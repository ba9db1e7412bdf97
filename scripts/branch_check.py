"""Does a run branched off a longer trunk equal the same run trained from scratch, at full size?

The text study (each map block) trains a shorter run as a longer run's constant-LR prefix plus its
own decay (`training.lineage.branch_point`); tests/test_map.py checks this bitwise at toy size.
This script checks one real cell of the text study on this machine: the trunk up to the
branch point, the branch, and the from-scratch twin (about 3 x the short run's steps).

    python scripts/branch_check.py                      # uniform seed 0, 480 of 1,920 steps
    python scripts/branch_check.py --schedule fixed-first:k=2,frac=0.67,then=uniform:1-16
    python scripts/branch_check.py --quick --steps 8 --trunk 16   # toy size (tests: --corpus F)
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

from looped import paper
from looped.errors import UserError
from looped.runtime.checkpoint import checkpoint_dir, list_checkpoints
from looped.studies import textstudy
from looped.studies.textsetup import ensure_corpus, run_config
from looped.training.lineage import branch_point
from looped.training.trainer import train


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedule", default=paper.UNIFORM)
    p.add_argument("--steps", type=int, default=480, help="the branch's length")
    p.add_argument("--trunk", type=int, default=1920, help="the trunk's length")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--out", default=None, help="working directory (default: a temporary one)")
    p.add_argument("--quick", action="store_true", help="the text study's toy model (seconds)")
    p.add_argument(
        "--corpus",
        default=None,
        help="what --corpus takes in `looped map` (default here: the stdlib)",
    )
    a = p.parse_args()
    torch.set_num_threads(1)  # as the study's workers
    out = Path(a.out or tempfile.mkdtemp(prefix="branch-check-"))
    setup = (textstudy.QUICK if a.quick else textstudy.BlockSettings()).setup
    corpus = ensure_corpus(setup, out, a.corpus, quiet=False)

    def cfg(n: int):
        return run_config(setup, corpus, schedule=a.schedule, lr=a.lr, seed=a.seed, steps=n)

    at = branch_point(cfg(a.steps), a.steps, cfg(a.trunk), a.trunk)
    print(f"{a.schedule}, seed {a.seed}: {a.steps} steps branched at {at} off {a.trunk}")
    print(f"the trunk stops one step past {at}, where a stop is agreed (it says so)")

    def stop_at_branch(done: int, total: int, loss: float, depth: int) -> None:
        if done == at:  # the trunk's prefix is all the branch needs: stop as Ctrl-C would
            os.kill(os.getpid(), signal.SIGINT)

    train(cfg(a.trunk), out / "trunk", quiet=True, save_steps=(at,), on_step=stop_at_branch)
    train(
        cfg(a.steps), out / "branch", quiet=True, branch_from=str(checkpoint_dir(out / "trunk", at))
    )
    train(cfg(a.steps), out / "scratch", quiet=True)
    weights = [
        load_file(list_checkpoints(out / r)[-1][1] / "model.safetensors")
        for r in ("branch", "scratch")
    ]
    diff = max((weights[0][k] - weights[1][k]).abs().max().item() for k in weights[0])
    print("bitwise equal" if diff == 0 else f"differ: largest weight difference {diff:.3g}")
    return 0 if diff == 0 else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except UserError as err:  # one line, as the CLI gives it
        raise SystemExit(f"branch_check: {err}") from None
