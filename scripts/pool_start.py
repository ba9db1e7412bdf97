"""How long until a study's worker pool can train: spawned workers against fork-server ones.

    .venv/bin/python scripts/pool_start.py              # 2 workers, 3 pools of each kind
    .venv/bin/python scripts/pool_start.py --workers 1 --reps 1

A study makes a pool per phase and per round of seeds (`studies.runner.execute`), and each
worker must import torch, the trainer and torch._dynamo (the first optimizer loads it) before
its first step. A spawned worker imports them itself, in every pool; the runner's workers fork
from a server that imported them once. This times, in one run, pools of each kind from their
creation until one task per worker has run those imports and the workers have exited (a worker
that got no task has imported the runner but not torch._dynamo, so a spawned pool's time is, if
anything, low), and prints the ratio. Absolute times are for this machine and this load.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time

from looped.studies import runner

READY = "import looped.training.trainer, torch._dynamo"  # what a worker has before its first run


def pool_seconds(workers: int) -> float:
    """Seconds from creating a pool to its shutdown after one import task per worker."""
    started = time.perf_counter()
    pool, _ = runner.worker_pool(workers)
    with pool:
        for future in [pool.submit(exec, READY) for _ in range(workers)]:
            future.result()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="workers per pool (the studies': 2)")
    p.add_argument("--reps", type=int, default=3, help="pools of each kind")
    args = p.parse_args(argv)
    first = pool_seconds(args.workers)  # starts the fork server
    served = [pool_seconds(args.workers) for _ in range(args.reps)]
    runner._pool_context = lambda: mp.get_context("spawn")  # this process only
    spawned = [pool_seconds(args.workers) for _ in range(args.reps)]
    print(f"{args.workers} workers; median of {args.reps} pools of each kind")
    print(f"spawned pool:                    {statistics.median(spawned):6.2f} s")
    print(f"fork-server pool, the first:     {first:6.2f} s (starts the server)")
    print(f"fork-server pool, every later:   {statistics.median(served):6.2f} s")
    print(
        f"spawned / later fork-server:     {statistics.median(spawned) / statistics.median(served):6.1f}x"
    )


if __name__ == "__main__":
    main()
