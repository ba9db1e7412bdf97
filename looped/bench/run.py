"""Speed benchmark: the looped model against a stacked-layer peer, the matmul ceiling, and the
paper's modeled savings against measured time, all side by side in one process.

    looped bench                        # default sizes: about 7 minutes on 2 idle CPU cores
    looped bench --widths 0             # skip the width scan (half the time)
    looped bench --quick                # toy sizes, seconds (what the tests run)
    looped bench --json                 # print the JSON record instead of the markdown tables
    looped bench --no-peer              # skip the Hugging Face peer (no `transformers` needed)
    looped bench --compile              # compile the repeated layer, of both models
    looped bench --threads 1 --clock process   # on a shared machine: CPU time, one thread
    looped bench --out results          # where bench.json and bench.md go (the default)

Why each measurement, and what it is compared with:

1. Train step (forward, backward, AdamW) of ``LoopedTransformer`` at depth K against
   ``transformers.LlamaForCausalLM`` with K layers of the same width, heads, MLP width,
   vocabulary, sequence length and batch, in the same precision (fp32, bf16 autocast), with the
   same loss and the same optimizer (``looped.training.trainer.make_optimizer``). The peer gets its best
   settings: SDPA attention, no KV cache. Ratio peer/looped; target >= 1.10. Next to it, the
   kernel floor: the looped step's matmuls and attention kernel timed alone. In fp32 the peer
   runs the very same kernels, so peer / floor is the most any implementation on them could
   gain; in bf16 the peer's attention runs in bf16, slower on CPU (see ``looped.model``).
2. Achieved FLOP/s (modeled FLOPs from ``looped.flops`` over the step time) against the matmul
   ceiling of the same precision (best square GEMM rate), timed in turn with the steps of each
   row so that load changes cancel out. Target: >= 85% at width >= 256.
3. Cost linear in K: step time at the largest K over the smallest against the modeled FLOP
   ratio; target within 10%.
4. Time saved by fixed-first over uniform-depth training for the same number of steps, against
   the modeled saving (``looped.flops.saving``); target ratio >= 0.95. The step time at every K
   in 1..16 is measured and weighted by the schedules' exact ``step_counts``; a short real run
   that follows both schedules step by step checks that the weighting holds.
5. Serving sweep: ``forward_depths`` over K=1..16 against one depth-16 forward; target <= 1.10.
   Every depth needs its own head and loss, so the modeled floor is (16 L + 16 E) / (16 L + E);
   the table prints it next to the measurement.

Measurements 2 and 5 are repeated over a width scan (256, 512, 1024 by default; head dim 64),
looped model only: both ratios depend on how much of the work is in the block's matmuls, which
grows with width, so the scan shows where on this machine each target is and is not met.

Every time is the minimum over ``reps`` steps after ``warmup`` untimed ones, and the models
compared are timed in turn within each repetition, so background load hits them alike. Other
processes still slow wall-clock down: take numbers on a quiet machine (the record keeps the load
average at the start and the end), or use ``--clock process --threads 1``, the CPU time of this
process, which other processes barely touch. The targets are reported, never asserted.

This module measures and holds the command line; ``looped/bench/tables.py`` judges the record
against the targets and renders ``bench.json`` and ``bench.md``, so a record can be re-rendered
without timing anything again.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

import torch
import torch.nn.functional as F

from looped.bench.tables import markdown, targets, write
from looped.config import OptimConfig
from looped.errors import UserError
from looped.flops import flops_per_token, saving
from looped.model import LoopedConfig, LoopedTransformer, causal_attention
from looped.runtime.device import cpu_name
from looped.schedules import parse_schedule
from looped.training.trainer import make_optimizer

PRECISIONS = ("fp32", "bf16")


@dataclass
class BenchConfig:
    d_model: int = 256  # width of both models
    n_head: int = 4  # attention heads (head dim 64)
    d_ff: int = 0  # SwiGLU hidden width; 0 = the LoopedConfig default (704 at width 256)
    vocab_size: int = 512  # vocabulary of both models
    seq_len: int = 128  # tokens per sequence (the demo's)
    batch_size: int = 16  # sequences per step
    depths: tuple[int, ...] = (1, 4, 8, 16)  # K of the looped model = layers of the peer
    precisions: tuple[str, ...] = PRECISIONS  # fp32 and/or bf16 (autocast)
    warmup: int = 2  # untimed steps before each timing (a fresh model settles after two)
    reps: int = 5  # timed steps per measurement; the minimum is reported
    schedule: str = "fixed-first:k=4,frac=0.8,then=uniform:1-16"  # the paper's schedule
    reference: str = "uniform:1-16"  # what its saving is measured against
    run_steps: int = 1000  # run length whose exact step counts weight the per-K step times
    real_steps: int = 20  # steps of the real run of both schedules (0 = skip)
    serve_depth: int = 16  # serving sweep over K = 1..serve_depth
    ceiling_sizes: tuple[int, ...] = (1024, 2048)  # square GEMMs for the CPU matmul ceiling
    widths: tuple[int, ...] = (256, 512, 1024)  # width scan of measurements 2 and 5 (head dim 64)
    width_depth: int = 4  # K of the width scan's train step
    threads: int = 0  # torch CPU threads; 0 = torch's default
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    compile: bool = False  # compile the repeated layer: compile_block() here, each peer layer
    peer: bool = True  # time the Hugging Face peer (needs `transformers`)
    seed: int = 0  # init and data
    clock: str = "wall"  # wall | process (CPU time of this process: immune to other processes'
    # load, and equal to wall time on an idle machine when threads=1)


QUICK = BenchConfig(
    d_model=32,
    n_head=2,
    vocab_size=64,
    seq_len=16,
    batch_size=2,
    depths=(1, 2, 4),
    reps=1,
    schedule="fixed-first:k=2,frac=0.5,then=uniform:1-4",
    reference="uniform:1-4",
    run_steps=100,
    real_steps=4,
    serve_depth=4,
    ceiling_sizes=(128,),
    widths=(32, 64),
    width_depth=2,
)


# -- timing ----------------------------------------------------------------------------------
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


Key = TypeVar("Key")  # a timed function's name: a label, or a depth K


def time_min(
    fns: dict[Key, Callable[[], object]],
    warmup: int,
    reps: int,
    device: torch.device,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[Key, float]:
    """Minimum wall time (s) of each function; the functions take turns in every repetition,
    so a burst of background load slows all of them rather than one. Each repetition starts one
    function further along, so no function always runs right after the same other one (a big
    GEMM leaves the caches cold for whatever follows it)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    best = dict.fromkeys(fns, math.inf)
    names = list(fns)
    for rep in range(max(1, reps)):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            _sync(device)
            t0 = clock()
            fn()
            _sync(device)
            best[name] = min(best[name], clock() - t0)
    return best


def ceiling_fns(precision: str, device: torch.device, sizes: tuple[int, ...]) -> dict[str, Any]:
    """Square matmuls in this precision, one per size, to time alongside the model steps."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    fns = {}
    for n in sizes:
        a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
        fns[f"ceiling {n}"] = lambda a=a, b=b: a @ b
    return fns


def ceiling_rate(times: dict[str, float]) -> float:
    """The best FLOP/s among the timed ``ceiling_fns`` (the attainable matmul peak)."""
    return max(2 * int(k.split()[1]) ** 3 / t for k, t in times.items() if k.startswith("ceiling"))


def _ceiling_sizes(cfg: BenchConfig, device: torch.device) -> tuple[int, ...]:
    return cfg.ceiling_sizes if device.type == "cpu" else (4096, 8192)  # a GPU needs bigger


def kernel_floor_fns(cfg: BenchConfig, precision: str, device: torch.device) -> dict[str, Any]:
    """A train step's matmuls and attention kernel, one function per piece, to time alone.

    Each linear layer costs three matmuls per step (forward, input gradient, weight gradient);
    attention is ``causal_attention`` forward and backward, by the path the looped model takes.
    The sum is what any implementation built on these kernels pays, so peer / floor bounds the
    speed-up left to win by removing everything else (in fp32, where the peer's kernels are
    the same).
    """
    mc = looped_config(cfg)
    d, f, V, T, B = cfg.d_model, mc.ff_dim, cfg.vocab_size, cfg.seq_len, cfg.batch_size
    M, dtype = B * T, torch.bfloat16 if precision == "bf16" else torch.float32

    def linear(n_in: int, n_out: int) -> Callable[[], object]:
        x, w = (
            torch.randn(M, n_in, device=device, dtype=dtype),
            torch.randn(n_out, n_in, device=device, dtype=dtype),
        )
        g = torch.randn(M, n_out, device=device, dtype=dtype)
        return lambda: (x @ w.t(), g @ w, g.t() @ x)

    # q, k and v arrive in the layer's dtype (looped.kernels.rope_qkv), as in the model
    qkv = [
        torch.randn(B, cfg.n_head, T, mc.head_dim, device=device, dtype=dtype, requires_grad=True)
        for _ in range(3)
    ]

    def attention() -> None:
        with _autocast(precision, device):
            y = causal_attention(*qkv)
        y.backward(torch.ones_like(y))

    return {
        "floor qkv": linear(d, 3 * d),
        "floor proj": linear(d, d),
        "floor up": linear(d, 2 * f),
        "floor down": linear(f, d),
        "floor attention": attention,
        "floor-head": linear(d, V),
    }


def floor_seconds(times: dict[str, float], depth: int) -> float:
    """The kernel floor of a depth-K step from timed ``kernel_floor_fns``: K layers, one head."""
    return depth * sum(t for k, t in times.items() if k.startswith("floor ")) + times["floor-head"]


def _autocast(precision: str, device: torch.device) -> AbstractContextManager:
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return nullcontext()


# -- the two models --------------------------------------------------------------------------
def looped_config(cfg: BenchConfig) -> LoopedConfig:
    top = max(*cfg.depths, cfg.serve_depth, cfg.width_depth)
    top = max(top, _max_depth(cfg.schedule), _max_depth(cfg.reference))
    return LoopedConfig(
        vocab_size=cfg.vocab_size,
        seq_len=cfg.seq_len,
        d_model=cfg.d_model,
        n_head=cfg.n_head,
        d_ff=cfg.d_ff,
        max_depth=top,
    )


def _max_depth(spec: str) -> int:
    return parse_schedule(spec).max_depth()


def make_peer(cfg: BenchConfig, layers: int) -> torch.nn.Module:
    """``LlamaForCausalLM`` with `layers` layers shaped like the looped block (tied embeddings,
    no biases, RoPE base 10000, SDPA attention, no KV cache)."""
    try:  # transformers is an optional extra (bench), needed only for the peer
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise UserError(
            "the peer needs transformers; pip install 'looped[bench]' or pass --no-peer"
        ) from None
    mc = looped_config(cfg)
    hf = LlamaConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=mc.ff_dim,
        num_hidden_layers=layers,
        num_attention_heads=cfg.n_head,
        num_key_value_heads=cfg.n_head,
        max_position_embeddings=cfg.seq_len,
        rms_norm_eps=mc.norm_eps,
        initializer_range=mc.init_std,
        tie_word_embeddings=True,
        attention_bias=False,
        mlp_bias=False,
        use_cache=False,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(hf)


def _looped_step(model, opt, x, y, depth, autocast) -> Callable[[], None]:
    def step() -> None:
        with autocast:
            _, loss = model(x, depth=depth, targets=y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _peer_step(peer, opt, x, y, autocast) -> Callable[[], None]:
    def step() -> None:
        with autocast:  # the looped model's loss, computed the same way
            logits = peer(input_ids=x).logits
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# -- the benchmark ---------------------------------------------------------------------------
def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run every measurement; return the JSON-ready record (config, machine, rows, targets)."""
    _check(cfg)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = _device(cfg.device)
    if cfg.clock == "process" and device.type != "cpu":
        raise UserError("--clock process measures CPU time only; use --clock wall on a GPU")
    mc = looped_config(cfg)
    T = cfg.seq_len
    gen = torch.Generator().manual_seed(cfg.seed)
    x = torch.randint(0, cfg.vocab_size, (cfg.batch_size, T), generator=gen).to(device)
    y = torch.randint(0, cfg.vocab_size, (cfg.batch_size, T), generator=gen).to(device)
    record: dict[str, Any] = {"config": asdict(cfg), "machine": machine_info(device)}
    load_start, t_start = _load(), time.perf_counter()

    train_rows, serve_rows, schedule_rows, width_rows = [], [], [], []
    per_k: dict[int, float] = {}
    for precision in cfg.precisions:
        autocast = _autocast(precision, device)
        torch.manual_seed(cfg.seed)
        model = LoopedTransformer(mc).to(device)
        if cfg.compile:
            model.compile_block()
        opt = make_optimizer(model, OptimConfig())
        train_rows += _train_rows(cfg, mc, precision, model, opt, x, y, device)
        serve_rows.append(_serve_row(cfg, mc, precision, model, x, y, device))
        width_rows += _width_rows(cfg, precision, x, y, device)
        if precision == cfg.precisions[0]:  # the per-K sweep is the longest part: one precision
            schedule_rows, per_k = _schedules(cfg, mc, model, opt, x, y, autocast, device)
            for row in schedule_rows:
                row["precision"] = precision

    record.update(
        train=train_rows,
        serve=serve_rows,
        schedule=schedule_rows,
        widths=width_rows,
        step_ms_by_depth={str(k): 1e3 * v for k, v in per_k.items()},
    )
    record["targets"] = targets(cfg, mc, train_rows, serve_rows, schedule_rows)
    record["machine"]["load_avg"] = [load_start, _load()]
    record["machine"]["elapsed_s"] = time.perf_counter() - t_start
    return record


def _train_rows(cfg, mc, precision, model, opt, x, y, device) -> list[dict]:
    """Measurements 1-3: train step at each K against the K-layer peer, against the kernel
    floor, and as FLOP/s against the matmul ceiling."""
    autocast = _autocast(precision, device)
    ceiling_mm = ceiling_fns(precision, device, _ceiling_sizes(cfg, device))
    floor_fns = kernel_floor_fns(cfg, precision, device)
    warmup = max(cfg.warmup, 2) if cfg.compile else cfg.warmup  # compiling is not timed
    tokens = cfg.batch_size * cfg.seq_len
    rows = []
    for k in cfg.depths:
        fns = {"looped": _looped_step(model, opt, x, y, k, autocast)}
        if cfg.peer:
            torch.manual_seed(cfg.seed)
            peer = make_peer(cfg, k).to(device)
            if cfg.compile:  # the same trick as compile_block: compile the repeated layer
                for layer in peer.model.layers:
                    layer.compile()
            fns["peer"] = _peer_step(peer, make_optimizer(peer, OptimConfig()), x, y, autocast)
        # the ceiling and the floor are timed in turn with the steps: load changes hit all alike
        t = time_min(fns | ceiling_mm | floor_fns, warmup, cfg.reps, device, CLOCKS[cfg.clock])
        achieved = flops_per_token(mc, k, cfg.seq_len) * tokens / t["looped"]
        ceiling = ceiling_rate(t)
        rows.append(
            {
                "precision": precision,
                "depth": k,
                "looped_ms": 1e3 * t["looped"],
                "peer_ms": 1e3 * t["peer"] if cfg.peer else None,
                "peer_over_looped": t["peer"] / t["looped"] if cfg.peer else None,
                "floor_ms": 1e3 * floor_seconds(t, k),
                "looped_flops_per_s": achieved,
                "ceiling_flops_per_s": ceiling,
                "of_ceiling": achieved / ceiling,
            }
        )
    return rows


def _serve_row(cfg, mc, precision, model, x, y, device) -> dict:
    """Measurement 5: every serving depth 1..N from one pass against one depth-N forward."""
    autocast, top = _autocast(precision, device), cfg.serve_depth

    def forward() -> None:
        with autocast:
            model(x, depth=top, targets=y)

    def sweep() -> None:
        with autocast:
            model.forward_depths(x, range(1, top + 1), y, return_logits=False)

    model.eval()
    with torch.no_grad():
        t = time_min(
            {"forward": forward, "sweep": sweep}, cfg.warmup, cfg.reps, device, CLOCKS[cfg.clock]
        )
    model.train()
    forward_flops = flops_per_token(mc, top, cfg.seq_len, backward=False)
    head = 2 * cfg.d_model * cfg.vocab_size  # the LM head per token (no prelude/coda here)
    return {
        "precision": precision,
        "depth": top,
        "forward_ms": 1e3 * t["forward"],
        "sweep_ms": 1e3 * t["sweep"],
        "sweep_over_forward": t["sweep"] / t["forward"],
        "modeled_ratio": (forward_flops + (top - 1) * head) / forward_flops,
    }


def _width_rows(cfg, precision, x, y, device) -> list[dict]:
    """Measurements 2 and 5 at growing width (head dim 64, K=width_depth): the matmuls' share of
    the work grows with width (d^2 against the d of attention and elementwise passes), and the
    block's against the head's, so both ratios say how close to the machine's limit the code runs
    at the sizes the paper trains."""
    autocast, rows = _autocast(precision, device), []
    k, tokens = cfg.width_depth, cfg.batch_size * cfg.seq_len
    for d in cfg.widths:
        wcfg = replace(cfg, d_model=d, n_head=max(1, d // 64), d_ff=0)
        mc = looped_config(wcfg)
        torch.manual_seed(cfg.seed)
        model = LoopedTransformer(mc).to(device)
        if cfg.compile:
            model.compile_block()
        opt = make_optimizer(model, OptimConfig())
        step = _looped_step(model, opt, x, y, k, autocast)
        warmup = max(cfg.warmup, 2) if cfg.compile else cfg.warmup
        ceiling_mm = ceiling_fns(precision, device, _ceiling_sizes(cfg, device))
        times = time_min({"step": step} | ceiling_mm, warmup, cfg.reps, device, CLOCKS[cfg.clock])
        t, ceiling = times["step"], ceiling_rate(times)
        achieved = flops_per_token(mc, k, cfg.seq_len) * tokens / t
        serve = _serve_row(wcfg, mc, precision, model, x, y, device)
        rows.append(
            {
                "precision": precision,
                "d_model": d,
                "n_head": mc.n_head,
                "depth": k,
                "looped_ms": 1e3 * t,
                "looped_flops_per_s": achieved,
                "ceiling_flops_per_s": ceiling,
                "of_ceiling": achieved / ceiling,
                "sweep_over_forward": serve["sweep_over_forward"],
                "sweep_modeled_ratio": serve["modeled_ratio"],
            }
        )
    return rows


def _schedules(cfg, mc, model, opt, x, y, autocast, device) -> tuple[list[dict], dict[int, float]]:
    """Wall-clock saving of the schedule over the reference, from per-K step times weighted by
    the exact step counts of a `run_steps` run, and from a short real run of both."""
    ours, ref = parse_schedule(cfg.schedule, cfg.seed), parse_schedule(cfg.reference, cfg.seed)
    top = max(ours.max_depth(), ref.max_depth())
    steps = {k: _looped_step(model, opt, x, y, k, autocast) for k in range(1, top + 1)}
    clock = CLOCKS[cfg.clock]
    per_k = time_min(steps, 0, cfg.reps, device, clock)  # the model is warm from the train rows
    n, T = cfg.run_steps, cfg.seq_len

    def weighted(schedule) -> float:
        return sum(c * per_k[k] for k, c in schedule.step_counts(n).items())

    modeled = saving(mc, ours, ref, n, T)
    measured = 1 - weighted(ours) / weighted(ref)
    rows = [
        {
            "kind": "per-K times x exact step counts",
            "steps": n,
            "modeled_saving": modeled,
            "measured_saving": measured,
            "ratio": measured / modeled if modeled else None,
        }
    ]
    if cfg.real_steps:
        m = cfg.real_steps
        seqs = [[s.depth(i, m) for i in range(m)] for s in (ours, ref)]
        wall = [0.0, 0.0]
        for i in range(m):  # step i of both runs back to back, so load hits both alike
            for j, seq in enumerate(seqs):
                _sync(device)
                t0 = clock()
                steps[seq[i]]()
                _sync(device)
                wall[j] += clock() - t0
        cost = [sum(flops_per_token(mc, k, T) for k in seq) for seq in seqs]
        table = [sum(per_k[k] for k in seq) for seq in seqs]
        modeled_real = 1 - cost[0] / cost[1]
        rows.append(
            {
                "kind": "real run of both schedules",
                "steps": m,
                "modeled_saving": modeled_real,
                "measured_saving": 1 - wall[0] / wall[1],
                "ratio": (1 - wall[0] / wall[1]) / modeled_real if modeled_real else None,
                "predicted_saving": 1 - table[0] / table[1],
                "wall_s": wall,
                "depths": {str(ours): seqs[0], str(ref): seqs[1]},
            }
        )
    return rows, per_k


# -- machine and checks ----------------------------------------------------------------------
def machine_info(device: torch.device) -> dict[str, Any]:
    """What the numbers depend on: processor, cores, threads, library versions, time."""
    info: dict[str, Any] = {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    try:  # the optional bench extra: its version when installed
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = None
    return info


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UserError(f"device {name} asked for but CUDA is not available; use --device cpu")
    return device


def _check(cfg: BenchConfig) -> None:
    bad = [p for p in cfg.precisions if p not in PRECISIONS]
    if bad or not cfg.precisions:
        raise UserError(f"precision {bad[0] if bad else ''!r} unknown; use fp32 and/or bf16")
    if not cfg.depths or min(cfg.depths) < 1:
        raise UserError(f"depths {cfg.depths} must be integers >= 1, e.g. --depths 1,4,8,16")
    if cfg.reps < 1 or cfg.warmup < 0 or cfg.run_steps < 1 or cfg.real_steps < 0:
        raise UserError("reps and run-steps must be >= 1, warmup and real-steps >= 0")
    if cfg.clock not in CLOCKS:
        raise UserError(f"clock {cfg.clock!r} unknown; use wall or process")
    if cfg.serve_depth < 1:
        raise UserError(f"serve depth {cfg.serve_depth} must be >= 1")
    if cfg.width_depth < 1 or any(d < 2 for d in cfg.widths):
        raise UserError("width-depth must be >= 1 and widths >= 2, e.g. --widths 256,512,1024")
    try:
        looped_config(cfg)
        for d in cfg.widths:
            looped_config(replace(cfg, d_model=d, n_head=max(1, d // 64), d_ff=0))
    except ValueError as err:
        raise UserError(f"bad model shape: {err}") from None


# -- command line ----------------------------------------------------------------------------
def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of integers") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="looped bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes (seconds)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    parser.add_argument("--out", default="results", help="directory for bench.json and bench.md")
    parser.add_argument("--no-peer", action="store_true", help="skip the Hugging Face peer")
    parser.add_argument("--compile", action="store_true", help="compile the repeated layer")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", help="auto | cpu | cuda | cuda:N")
    parser.add_argument(
        "--clock", choices=tuple(CLOCKS), help="wall (default) or process CPU time (busy machines)"
    )
    parser.add_argument("--precisions", help="comma list of fp32, bf16")
    parser.add_argument("--depths", type=_int_list, help="K to compare, e.g. 1,4,8,16")
    parser.add_argument("--d-model", type=int, help="width")
    parser.add_argument("--n-head", type=int, help="attention heads")
    parser.add_argument("--seq-len", type=int, help="sequence length")
    parser.add_argument("--batch-size", type=int, help="sequences per step")
    parser.add_argument("--vocab-size", type=int, help="vocabulary")
    parser.add_argument("--reps", type=int, help="timed steps per measurement")
    parser.add_argument("--real-steps", type=int, help="steps of the real schedule run (0 = skip)")
    parser.add_argument(
        "--widths", type=_int_list, help="width scan, e.g. 256,512,1024 (0 = skip the scan)"
    )
    args = parser.parse_args(argv)

    cfg = QUICK if args.quick else BenchConfig()
    fields = ["threads", "device", "clock", "depths", "d_model", "n_head", "seq_len", "batch_size"]
    fields += ["vocab_size", "reps", "real_steps", "widths"]
    overrides = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    if overrides.get("widths") == (0,):
        overrides["widths"] = ()
    if args.precisions:
        overrides["precisions"] = tuple(p.strip() for p in args.precisions.split(","))
    cfg = replace(cfg, peer=not args.no_peer, compile=args.compile, **overrides)

    record = run(cfg)
    js, md = write(record, args.out)
    print(json.dumps(record, indent=2) if args.json else markdown(record))
    if not args.json:
        print(f"wrote {js} and {md}")
    return 0
