"""Which settings make the text study's d=64 training step fastest on this machine?

    .venv/bin/python scripts/step_speed.py            # about two minutes on 2 cores
    .venv/bin/python scripts/step_speed.py --steps 40 --depth 8 --out runs/step_speed.json

Times the same optimizer step (the text study's d=64 model: d=64, one looped layer, BPE-512 vocab,
batch 32x128, at depth 8, about uniform 1..16's mean) under each candidate setting, one at a
time, in one run, each in a fresh process so that no setting inherits another's threads or
compiled graphs (each its fastest step, by `studies.timing.time_min`, the timer of `scripts/bench.py`
and of the demo's calibration), and prints the ratio of each to the study's current setting (eager fp32, one
thread per worker). Absolute times are for this machine and this load only; the ratios are the
finding. The last row runs two single-threaded processes at once, as the study's two workers
do, and reports their combined throughput against one two-threaded process.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

VARIANTS = {  # name -> (compile, dtype, threads)
    "eager fp32, 1 thread (the study's worker)": (False, "fp32", 1),
    "compiled block fp32, 1 thread": (True, "fp32", 1),
    "eager bf16 autocast, 1 thread": (False, "bf16", 1),
    "eager fp32, 2 threads": (False, "fp32", 2),
}


def one(compile_: bool, dtype: str, threads: int, steps: int, depth: int) -> float:
    """Seconds of the fastest of `steps` optimizer steps after warm-up, in this process."""
    import torch

    from looped.config import load_config
    from looped.model import LoopedTransformer
    from looped.studies.timing import fixed_step, time_min

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = load_config("demo", ["model.d_model=64", "model.n_head=4", "model.vocab_size=512"])
    model = LoopedTransformer(cfg.model)
    if compile_:
        model.compile_block()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    x, cpu = torch.randint(0, 512, (32, 128)), torch.device("cpu")
    step = fixed_step(lambda: model(x[:, :-1], depth=depth, targets=x[:, 1:])[1], opt, cpu, dtype)
    return time_min({"step": step}, 3, steps, cpu)["step"]  # 3 warm-up steps (and compilation)


def in_child(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, __file__, "--child", *args], stdout=subprocess.PIPE, text=True
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--steps", type=int, default=30, help="timed steps per setting (its fastest counts)"
    )
    p.add_argument("--depth", type=int, default=8, help="loop count of every timed step")
    p.add_argument("--out", default="runs/step_speed.json", help="where the record goes")
    p.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        c, dtype, threads = a.child
        print(one(c == "1", dtype, int(threads), a.steps, a.depth))
        return 0
    common = ["--steps", str(a.steps), "--depth", str(a.depth)]
    rows = {}
    for name, (c, dtype, threads) in VARIANTS.items():
        proc = in_child([str(int(c)), dtype, str(threads), *common])
        rows[name] = float(proc.communicate()[0].split()[-1])
        print(f"{name:45s} {rows[name] * 1000:8.1f} ms/step", flush=True)
    pair = [in_child(["0", "fp32", "1", *common]) for _ in range(2)]
    each = [float(q.communicate()[0].split()[-1]) for q in pair]
    rows["two 1-thread processes at once (per step, each)"] = sum(each) / 2
    base = rows[next(iter(VARIANTS))]
    print(f"{'two 1-thread processes at once, each':45s} {sum(each) / 2 * 1000:8.1f} ms/step")
    ratios = {k: base / v for k, v in rows.items()}
    throughput = 2 / (sum(each) / 2) / (1 / rows["eager fp32, 2 threads"])
    print("\nspeed vs the study's worker (>1: faster):")
    for k, r in ratios.items():
        print(f"  {r:5.2f}x  {k}")
    print(f"  {throughput:5.2f}x  two 1-thread workers' steps/s vs one 2-thread process")
    import platform

    import torch

    from looped.studies.timing import cpu_name

    record = {
        "ms_per_step": {k: v * 1000 for k, v in rows.items()},
        "speed_vs_worker": ratios,
        "two_workers_vs_two_threads": throughput,
        "steps": a.steps,
        "statistic": f"fastest of {a.steps} steps",  # what ms_per_step is
        "depth": a.depth,
        "machine": cpu_name(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
