"""`scripts/bench.py`: speed benchmark: the looped model against a stacked-layer peer, the matmul ceiling, and the
paper's modeled savings against measured time, all in one process; writes results/bench.json and
bench.md (which `looped report` quotes). A script, not a `looped` command: nothing in the package
imports it, and a learner never needs it.

    python scripts/bench.py                        # default sizes: about 7 minutes on 2 idle CPU cores
    python scripts/bench.py --widths 0             # skip the width scan (half the time)
    python scripts/bench.py --quick --no-peer      # toy sizes in seconds, no `transformers` needed
    python scripts/bench.py --threads 1 --clock process   # on a shared machine: CPU time, one thread

1. Train step at depth K against a K-layer ``LlamaForCausalLM`` of the same shapes, beside the
   kernel floor (the step's matmuls and attention timed alone).
2. Achieved FLOP/s (``looped.flops`` over step time) against the best square-GEMM rate.
3. Step time linear in K: the largest K over the smallest against the modeled ratio.
4. Time fixed-first saves over uniform, measured against ``flops.saving``.
5. Serving sweep: ``forward_depths`` over K=1..16 against one depth-16 forward.

Every time is the minimum over ``reps`` interleaved steps; targets are reported, never asserted.
The record is judged against its targets and rendered by pure functions of the record, so a
record re-renders without timing anything again (a test compares results/bench.json with
bench.md).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from looped.commands.common import described, device_flag
from looped.config import OptimConfig
from looped.errors import UserError
from looped.flops import flops_per_token, saving
from looped.kernels import causal_attention
from looped.model import LoopedConfig, LoopedTransformer
from looped.runtime.device import autocast, pick_device
from looped.schedule_spec import parse_schedule
from looped.studies.commands.common import number_list
from looped.studies.report.tables import md_table
from looped.studies.timing import cpu_name, fixed_step, time_min, time_once, wall_saving
from looped.training.run import make_optimizer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}  # the precisions it times


@dataclass
class BenchConfig:
    d_model: int = 256  # width of both models
    n_head: int = 4  # attention heads (head dim 64)
    d_ff: int = 0  # SwiGLU hidden width; 0 = the LoopedConfig default (704 at width 256)
    vocab_size: int = 512  # vocabulary of both models
    seq_len: int = 128  # tokens per sequence (the demo's)
    batch_size: int = 16  # sequences per step
    depths: tuple[int, ...] = (1, 4, 8, 16)  # K of the looped model = layers of the peer
    precisions: tuple[str, ...] = tuple(DTYPES)  # fp32 and/or bf16 (autocast)
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
    clock: str = "wall"  # wall | process (this process's CPU time: immune to others' load)


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
CLOCKS = {"wall": time.perf_counter, "process": time.process_time}


def _timed(cfg: BenchConfig, fns: dict, device: torch.device, warmup: int) -> dict:
    return time_min(fns, warmup, cfg.reps, device, CLOCKS[cfg.clock])


def ceiling_fns(cfg: BenchConfig, precision: str, device: torch.device) -> dict[str, Any]:
    """Square matmuls in this precision, one per size, to time alongside the model steps."""
    sizes = cfg.ceiling_sizes if device.type == "cpu" else (4096, 8192)  # a GPU needs bigger
    dtype = DTYPES[precision]
    pairs = {n: [torch.randn(n, n, device=device, dtype=dtype) for _ in range(2)] for n in sizes}
    return {f"ceiling {n}": lambda a=a, b=b: a @ b for n, (a, b) in pairs.items()}


def ceiling_rate(times: dict[str, float]) -> float:
    """The best FLOP/s among the timed ``ceiling_fns`` (the attainable matmul peak)."""
    return max(2 * int(k.split()[1]) ** 3 / t for k, t in times.items() if k.startswith("ceiling"))


def kernel_floor_fns(cfg: BenchConfig, precision: str, device: torch.device) -> dict[str, Any]:
    """A train step's matmuls (forward, input and weight gradients of each linear layer) and
    attention (forward and backward), one function each: what any implementation pays."""
    mc = looped_config(cfg)
    d, f, V, T, B = cfg.d_model, mc.ff_dim, cfg.vocab_size, cfg.seq_len, cfg.batch_size
    M, dtype = B * T, DTYPES[precision]

    def linear(n_in: int, n_out: int) -> Callable[[], object]:
        shapes = ((M, n_in), (n_out, n_in), (M, n_out))
        x, w, g = (torch.randn(*s, device=device, dtype=dtype) for s in shapes)
        return lambda: (x @ w.t(), g @ w, g.t() @ x)

    # q, k and v arrive in the layer's dtype (looped.kernels.rope_qkv), as in the model
    shape = (B, cfg.n_head, T, mc.head_dim)
    qkv = [torch.randn(*shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3)]

    def attention() -> None:
        with autocast(device, precision):
            y = causal_attention(*qkv)
        y.backward(torch.ones_like(y))

    shapes = {"qkv": (d, 3 * d), "proj": (d, d), "up": (d, 2 * f), "down": (f, d)}
    fns = {f"floor {name}": linear(*shape) for name, shape in shapes.items()}
    return fns | {"floor attention": attention, "floor-head": linear(d, V)}


# -- the two models --------------------------------------------------------------------------
def looped_config(cfg: BenchConfig) -> LoopedConfig:
    schedules = (parse_schedule(s).max_depth() for s in (cfg.schedule, cfg.reference))
    top = max(*cfg.depths, cfg.serve_depth, cfg.width_depth, *schedules)
    shape = {k: getattr(cfg, k) for k in ("vocab_size", "seq_len", "d_model", "n_head", "d_ff")}
    return LoopedConfig(**shape, max_depth=top)


def _width(cfg: BenchConfig, d: int) -> BenchConfig:
    """The width scan's config at width `d`: heads of dim 64, the default MLP width."""
    return replace(cfg, d_model=d, n_head=max(1, d // 64), d_ff=0)


def make_peer(cfg: BenchConfig, layers: int) -> torch.nn.Module:
    """``LlamaForCausalLM`` with `layers` layers shaped like the looped block (tied embeddings,
    no biases, RoPE base 10000, SDPA attention, no KV cache)."""
    try:  # transformers is an optional extra (bench), needed only for the peer
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        msg = "the peer needs transformers; pip install 'looped[bench]' or pass --no-peer"
        raise UserError(msg) from None
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


def _looped_step(model, opt, x, y, depth, precision) -> Callable[[], None]:
    return fixed_step(lambda: model(x, depth=depth, targets=y)[1], opt, x.device, precision)


def _peer_step(peer, opt, x, y, precision) -> Callable[[], None]:
    def loss() -> torch.Tensor:  # the looped model's loss, computed the same way
        return F.cross_entropy(peer(input_ids=x).logits.float().flatten(0, 1), y.flatten())

    return fixed_step(loss, opt, x.device, precision)


def _model(cfg: BenchConfig, mc: LoopedConfig, device: torch.device) -> tuple[Any, Any]:
    """A fresh looped model (seeded, compiled if asked) and its AdamW."""
    torch.manual_seed(cfg.seed)
    model = LoopedTransformer(mc).to(device)
    if cfg.compile:
        model.compile_block()
    return model, make_optimizer(model, OptimConfig())


def _warmup(cfg: BenchConfig) -> int:
    return max(cfg.warmup, 2) if cfg.compile else cfg.warmup  # compiling is not timed


# -- the benchmark ---------------------------------------------------------------------------
def run(cfg: BenchConfig) -> dict[str, Any]:
    """Run every measurement; return the JSON-ready record (config, machine, rows, targets)."""
    _check(cfg)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    device = pick_device(cfg.device)
    if cfg.clock == "process" and device.type != "cpu":
        raise UserError("--clock process measures CPU time only; use --clock wall on a GPU")
    mc = looped_config(cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    shape = (cfg.batch_size, cfg.seq_len)
    x, y = (torch.randint(0, cfg.vocab_size, shape, generator=gen).to(device) for _ in range(2))
    record: dict[str, Any] = {"config": asdict(cfg), "machine": machine_info(device)}
    load_start, t_start = _load(), time.perf_counter()

    train_rows, serve_rows, schedule_rows, width_rows = [], [], [], []
    per_k: dict[int, float] = {}
    for precision in cfg.precisions:
        model, opt = _model(cfg, mc, device)
        train_rows += _train_rows(cfg, mc, precision, model, opt, x, y, device)
        serve_rows.append(_serve_row(cfg, mc, precision, model, x, y, device))
        width_rows += _width_rows(cfg, precision, x, y, device)
        if precision == cfg.precisions[0]:  # the per-K sweep is the longest part: one precision
            schedule_rows, per_k = _schedules(cfg, mc, precision, model, opt, x, y, device)

    record.update(train=train_rows, serve=serve_rows, schedule=schedule_rows, widths=width_rows)
    record["step_ms_by_depth"] = {str(k): 1e3 * v for k, v in per_k.items()}
    record["targets"] = targets(cfg, mc, train_rows, serve_rows, schedule_rows)
    record["machine"]["load_avg"] = [load_start, _load()]
    record["machine"]["elapsed_s"] = time.perf_counter() - t_start
    return record


def _train_rows(cfg, mc, precision, model, opt, x, y, device) -> list[dict]:
    """Measurements 1-3: train step at each K against the peer, the floor and the ceiling."""
    fixed = ceiling_fns(cfg, precision, device) | kernel_floor_fns(cfg, precision, device)
    rows = []
    # one step at the deepest K first: on a CPU, a shallow step timed before any deep one ran
    # slower (measured: K=1 took 1.6x longer before a K=16 step than after, at a 4,096-token
    # head; likely page faults on buffers the allocator keeps later), and training that mixes
    # depths runs in the later state
    _looped_step(model, opt, x, y, max(cfg.depths), precision)()
    for k in cfg.depths:
        fns = {"looped": _looped_step(model, opt, x, y, k, precision)}
        if cfg.peer:
            torch.manual_seed(cfg.seed)
            peer = make_peer(cfg, k).to(device)
            if cfg.compile:  # the same trick as compile_block: compile the repeated layer
                for layer in peer.model.layers:
                    layer.compile()
            fns["peer"] = _peer_step(peer, make_optimizer(peer, OptimConfig()), x, y, precision)
        # the ceiling and the floor are timed in turn with the steps: load changes hit all alike
        t = _timed(cfg, fns | fixed, device, _warmup(cfg))
        row = {"precision": precision, "depth": k, "looped_ms": 1e3 * t["looped"]}
        row["peer_ms"] = 1e3 * t["peer"] if cfg.peer else None
        row["peer_over_looped"] = t["peer"] / t["looped"] if cfg.peer else None
        layer = sum(s for name, s in t.items() if name.startswith("floor "))
        row["floor_ms"] = 1e3 * (k * layer + t["floor-head"])  # K layers, one head
        rows.append(row | _rates(cfg, mc, k, t["looped"], ceiling_rate(t)))
    return rows


def _rates(cfg: BenchConfig, mc: LoopedConfig, k: int, seconds: float, ceiling: float) -> dict:
    """A depth-K step's achieved FLOP/s (modeled FLOPs over its time) against the ceiling."""
    rate = flops_per_token(mc, k, cfg.seq_len) * cfg.batch_size * cfg.seq_len / seconds
    return dict(looped_flops_per_s=rate, ceiling_flops_per_s=ceiling, of_ceiling=rate / ceiling)


def _serve_row(cfg, mc, precision, model, x, y, device) -> dict:
    """Measurement 5: every serving depth 1..N from one pass against one depth-N forward."""
    cast, top = autocast(device, precision), cfg.serve_depth

    def forward() -> None:
        with cast:
            model(x, depth=top, targets=y)

    def sweep() -> None:
        with cast:
            model.forward_depths(x, range(1, top + 1), y, return_logits=False)

    model.eval()
    with torch.no_grad():
        t = _timed(cfg, {"forward": forward, "sweep": sweep}, device, cfg.warmup)
    model.train()
    forward_flops = flops_per_token(mc, top, cfg.seq_len, backward=False)
    head = 2 * cfg.d_model * cfg.vocab_size  # the LM head per token (no prelude/coda here)
    row = {"precision": precision, "depth": top, "forward_ms": 1e3 * t["forward"]}
    row |= {"sweep_ms": 1e3 * t["sweep"], "sweep_over_forward": t["sweep"] / t["forward"]}
    return row | {"modeled_ratio": (forward_flops + (top - 1) * head) / forward_flops}


def _width_rows(cfg, precision, x, y, device) -> list[dict]:
    """Measurements 2 and 5 at growing width, where the matmuls' share of the work grows."""
    rows, k = [], cfg.width_depth
    for d in cfg.widths:
        wcfg = _width(cfg, d)
        mc = looped_config(wcfg)
        model, opt = _model(wcfg, mc, device)
        step = {"step": _looped_step(model, opt, x, y, k, precision)}
        t = _timed(cfg, step | ceiling_fns(cfg, precision, device), device, _warmup(cfg))
        serve = _serve_row(wcfg, mc, precision, model, x, y, device)
        row = {"precision": precision, "d_model": d, "n_head": mc.n_head, "depth": k}
        row |= {"looped_ms": 1e3 * t["step"]} | _rates(cfg, mc, k, t["step"], ceiling_rate(t))
        sweep = {"sweep_over_forward": serve["sweep_over_forward"]}
        rows.append(row | sweep | {"sweep_modeled_ratio": serve["modeled_ratio"]})
    return rows


def _schedules(cfg, mc, precision, model, opt, x, y, device) -> tuple[list, dict[int, float]]:
    """The schedule's saving over the reference: per-K step times weighted by the exact step
    counts of a `run_steps` run, and a short real run of both."""
    ours, ref = parse_schedule(cfg.schedule, cfg.seed), parse_schedule(cfg.reference, cfg.seed)
    top = max(ours.max_depth(), ref.max_depth())
    steps = {k: _looped_step(model, opt, x, y, k, precision) for k in range(1, top + 1)}
    per_k = _timed(cfg, steps, device, 0)  # the model is warm from the train rows
    n = cfg.run_steps
    modeled, measured = saving(mc, ours, ref, n, cfg.seq_len), wall_saving(per_k, [ours], [ref], n)
    rows = [_saving_row("per-K times x exact step counts", n, modeled, measured)]
    if cfg.real_steps:
        rows.append(_real_run(cfg, mc, (ours, ref), steps, per_k, device))
    return [row | {"precision": precision} for row in rows], per_k


def _real_run(cfg, mc, schedules, steps, per_k, device) -> dict:
    """Both schedules for `real_steps` steps, step i of each back to back: the measured saving
    against the modeled one and the one the per-K table predicts."""
    m, clock = cfg.real_steps, CLOCKS[cfg.clock]
    seqs = [[s.depth(i, m) for i in range(m)] for s in schedules]
    wall = [0.0, 0.0]
    for i in range(m):
        for j, seq in enumerate(seqs):
            wall[j] += time_once(steps[seq[i]], device, clock)
    cost = [sum(flops_per_token(mc, k, cfg.seq_len) for k in seq) for seq in seqs]
    table = [sum(per_k[k] for k in seq) for seq in seqs]
    modeled, measured = 1 - cost[0] / cost[1], 1 - wall[0] / wall[1]
    row = _saving_row("real run of both schedules", m, modeled, measured)
    row |= {"predicted_saving": 1 - table[0] / table[1], "wall_s": wall}
    return row | {"depths": {str(schedules[0]): seqs[0], str(schedules[1]): seqs[1]}}


def _saving_row(kind: str, steps: int, modeled: float, measured: float) -> dict:
    """A schedule-saving row: the modeled and measured savings and their ratio (None at 0)."""
    ratio = measured / modeled if modeled else None
    keys = ("kind", "steps", "modeled_saving", "measured_saving", "ratio")
    return dict(zip(keys, (kind, steps, modeled, measured, ratio)))


# -- machine and checks ----------------------------------------------------------------------
def machine_info(device: torch.device) -> dict[str, Any]:
    """What the numbers depend on: processor, cores, threads, library versions, time."""
    info = {"cpu": cpu_name(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    info |= {"torch": torch.__version__, "python": platform.python_version()}
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info |= {"device": str(device), "when": when}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    try:  # the optional bench extra: its version when installed
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:
        info["transformers"] = None
    return info


def _load() -> float | None:
    """The 1-minute load average, None where the platform has none."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _check(cfg: BenchConfig) -> None:
    if not cfg.precisions or set(cfg.precisions) - set(DTYPES):
        raise UserError(f"precisions {','.join(cfg.precisions)!r}: use fp32 and/or bf16")
    if not cfg.depths or min(cfg.depths) < 1:
        raise UserError(f"depths {cfg.depths} must be integers >= 1, e.g. --depths 1,4,8,16")
    if min(cfg.reps, cfg.run_steps, cfg.serve_depth, cfg.width_depth) < 1:
        raise UserError("reps, run-steps, serve-depth and width-depth must be >= 1")
    if cfg.warmup < 0 or cfg.real_steps < 0 or any(d < 2 for d in cfg.widths):
        raise UserError("warmup and real-steps must be >= 0, widths >= 2 (e.g. 256,512,1024)")
    if cfg.clock not in CLOCKS:
        raise UserError(f"clock {cfg.clock!r} unknown; use wall or process")
    try:
        for shape in (cfg, *(_width(cfg, d) for d in cfg.widths)):
            looped_config(shape)
    except ValueError as err:
        raise UserError(f"bad model shape: {err}") from None


# -- targets and tables ----------------------------------------------------------------------
TARGETS = {
    "peer_ratio": 1.10,  # peer step time / looped step time, at least
    "of_ceiling": 0.85,  # achieved FLOP/s / matmul ceiling, at least (width >= 256)
    "linear_in_k": 0.10,  # |measured K-ratio / modeled K-ratio - 1|, at most
    "saving_ratio": 0.95,  # measured wall-clock saving / modeled saving, at least
    "sweep_ratio": 1.10,  # forward_depths(1..16) / forward(16), at most
}


# -- targets ---------------------------------------------------------------------------------
def targets(cfg: Any, mc: LoopedConfig, train_rows, serve_rows, schedule_rows) -> list[dict]:
    """One record per (target, precision): the measured value, the bound, met or not. `cfg` is
    the ``BenchConfig`` the rows were measured with, `mc` its model."""
    out = []
    for precision in cfg.precisions:
        rows = [r for r in train_rows if r["precision"] == precision]
        out += _train_targets(cfg, mc, precision, rows)
        for r in (r for r in serve_rows if r["precision"] == precision):
            name = f"forward_depths(1..{r['depth']}) / forward({r['depth']})"
            note = f"modeled floor {r['modeled_ratio']:.3f}"
            out.append(_target(name, precision, r["sweep_over_forward"], "<=", "sweep_ratio", note))
    for r in (r for r in schedule_rows if r["ratio"] is not None):
        name = f"measured / modeled saving ({r['kind']})"
        note = f"{r['measured_saving']:.1%} measured vs {r['modeled_saving']:.1%} modeled"
        out.append(_target(name, r["precision"], r["ratio"], ">=", "saving_ratio", note))
    return out


def _train_targets(cfg: Any, mc: LoopedConfig, precision: str, rows: list[dict]) -> list[dict]:
    """Against the peer, the matmul ceiling, and step time linear in K."""
    out = []
    lo, hi = min(cfg.depths), max(cfg.depths)
    if cfg.peer:
        worst = min(rows, key=lambda r: r["peer_over_looped"])
        name, value = "train step: peer / looped (worst K)", worst["peer_over_looped"]
        out.append(_target(name, precision, value, ">=", "peer_ratio", f"K={worst['depth']}"))
    deepest = max(rows, key=lambda r: r["depth"])
    applies = cfg.d_model >= 256
    note = f"K={hi}" + ("" if applies else "; target is for width >= 256")
    name = "FLOP/s / matmul ceiling (largest K)"
    out.append(_target(name, precision, deepest["of_ceiling"], ">=", "of_ceiling", note, applies))
    if hi > lo:
        t = {r["depth"]: r["looped_ms"] for r in rows}
        modeled = flops_per_token(mc, hi, cfg.seq_len) / flops_per_token(mc, lo, cfg.seq_len)
        measured = t[hi] / t[lo]
        name = f"step time K={hi} / K={lo} over modeled FLOP ratio - 1"
        note = f"measured {measured:.2f}, modeled {modeled:.2f}"
        ratio = measured / modeled - 1
        out.append(_target(name, precision, ratio, "within ±", "linear_in_k", note))
    return out


def _target(name, precision, value, op, key, note, applies=True) -> dict:
    bound = TARGETS[key]
    met = {">=": value >= bound, "<=": value <= bound, "within ±": abs(value) <= bound}[op]
    met = met if applies else None
    keys = ("target", "precision", "value", "op", "bound", "met", "note")
    return dict(zip(keys, (name, precision, value, op, bound, met, note)))


# -- markdown --------------------------------------------------------------------------------
def markdown(record: dict[str, Any]) -> str:
    """The tables docs/USAGE.md quotes, with the machine they were measured on: one paragraph per
    setting, then train step, schedule saving, serving sweep, width scan and targets."""
    cfg, widths = record["config"], record.get("widths")
    lines = _preamble(record) + _table(TRAIN, record["train"])
    lines += _table(SCHEDULE, record["schedule"])
    lines += ["", f"Schedule: `{cfg['schedule']}` against `{cfg['reference']}`."]
    lines += _table(SERVE, record["serve"])
    if widths:  # measurements 2 and 5 at each width, each against its target
        scan = f"train step at K={widths[0]['depth']}, serving sweep K=1..{cfg['serve_depth']}"
        head = f"Width scan (heads = width / 64, looped model only): {scan}; the targets of "
        lines += ["", head + "measurements 2 and 5 at each width.", *_table(WIDTH, widths)]
    lines += _table(TARGET, record["targets"])
    return "\n".join(lines) + "\n"


def _preamble(record: dict[str, Any]) -> list[str]:
    """Machine and model: what the numbers depend on, so a reader can compare two records."""
    cfg, m = record["config"], record["machine"]
    load = " -> ".join("?" if v is None else f"{v:.2f}" for v in m.get("load_avg", []))
    ff = LoopedConfig(d_model=cfg["d_model"], n_head=cfg["n_head"], d_ff=cfg["d_ff"]).ff_dim
    return [
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['torch_threads']} torch threads, "
        f"device {m['device']}{', ' + m['gpu'] if m.get('gpu') else ''}; torch {m['torch']}, "
        f"transformers {m['transformers']}; {m['when']}; load average {load}; "
        f"the benchmark took {m.get('elapsed_s', 0):.0f} s.",
        "",
        f"Model: width {cfg['d_model']}, {cfg['n_head']} heads, SwiGLU {ff}, vocabulary "
        f"{cfg['vocab_size']}, sequence {cfg['seq_len']}, batch {cfg['batch_size']}, tied "
        f"embeddings{', compiled layer' if cfg['compile'] else ', eager'}. Times: "
        f"{'wall-clock' if cfg['clock'] == 'wall' else 'CPU time of the process'}, minimum of "
        f"{cfg['reps']} interleaved steps after {cfg['warmup']} warm-up.",
    ]


def _table(columns: tuple, rows: list[dict]) -> list[str]:
    """A markdown table after a blank line: `columns` is (header, alignment, cell of a row)."""
    header, align, cells = zip(*columns, strict=True)
    table = md_table(list(header), [[c(r) for c in cells] for r in rows], list(align))
    return ["", *table.split("\n")]


def _col(header: str, key: str, spec: str = "", scale: float = 1) -> tuple:
    """A right-aligned column of `row[key]` (divided by `scale`) in `spec`, "-" where None."""

    def cell(r: dict) -> str:
        return "-" if r[key] is None else format(r[key] if scale == 1 else r[key] / scale, spec)

    return header, "---:", cell


PRECISION = ("precision", "---", lambda r: r["precision"])
TRAIN = (PRECISION, _col("K", "depth"), _col("looped ms", "looped_ms", ".1f"),
         _col("peer ms", "peer_ms", ".1f"), _col("peer / looped", "peer_over_looped", ".3f"),
         _col("kernel floor ms", "floor_ms", ".1f"),
         _col("looped GFLOP/s", "looped_flops_per_s", ".1f", scale=1e9),
         _col("matmul ceiling GFLOP/s", "ceiling_flops_per_s", ".1f", scale=1e9),
         _col("of ceiling", "of_ceiling", ".1%"))  # fmt: skip
SCHEDULE = (("schedule saving", "---", lambda r: r["kind"]), PRECISION, _col("steps", "steps"),
            _col("modeled", "modeled_saving", ".1%"), _col("measured", "measured_saving", ".1%"),
            _col("measured / modeled", "ratio", ".3f"))  # fmt: skip
SERVE = (("serving sweep", "---", lambda r: f"K=1..{r['depth']} vs K={r['depth']}"), PRECISION,
         _col("forward ms", "forward_ms", ".1f"), _col("forward_depths ms", "sweep_ms", ".1f"),
         _col("ratio", "sweep_over_forward", ".3f"),
         _col("modeled FLOP ratio", "modeled_ratio", ".3f"))  # fmt: skip
TARGET = (("target", "---", lambda t: t["target"]), PRECISION,
          _col("measured", "value", ".3f"), ("bound", "---", lambda t: f"{t['op']} {t['bound']}"),
          ("met", "---", lambda t: _MET[t["met"]]), ("note", "---", lambda t: t["note"]))  # fmt: skip
_MET = {True: "yes", False: "**no**", None: "n/a"}
OF, SWEEP = TARGETS["of_ceiling"], TARGETS["sweep_ratio"]
WIDTH = (PRECISION, _col("width", "d_model"), _col("heads", "n_head"),
         _col("step ms", "looped_ms", ".1f"), _col("of ceiling", "of_ceiling", ".1%"),
         (f">= {OF:.0%}", "---", lambda r: _MET[r["of_ceiling"] >= OF]),
         _col("sweep / forward", "sweep_over_forward", ".3f"),
         _col("modeled floor", "sweep_modeled_ratio", ".3f"),
         (f"<= {SWEEP}", "---", lambda r: _MET[r["sweep_over_forward"] <= SWEEP]))  # fmt: skip


# -- files -----------------------------------------------------------------------------------
def write(record: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write bench.json and bench.md into `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "bench.json", out / "bench.md"
    js.write_text(json.dumps(record, indent=2) + "\n")
    md.write_text(markdown(record))
    return js, md


# -- the command line ------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = described("scripts/bench.py", __doc__.split("\n1. ")[0])
    p.add_argument("--quick", action="store_true", help="toy sizes (seconds)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.add_argument("--out", default="results", help="directory for bench.json and bench.md")
    p.add_argument("--no-peer", action="store_true", help="skip the Hugging Face peer")
    p.add_argument("--compile", action="store_true", help="compile the repeated layer")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--clock", choices=tuple(CLOCKS), help="wall (default) or process CPU time")
    p.add_argument("--precisions", help="comma list of fp32, bf16")
    p.add_argument("--depths", help="K to compare, e.g. 1,4,8,16")
    p.add_argument("--d-model", type=int, help="width")
    p.add_argument("--n-head", type=int, help="attention heads")
    p.add_argument("--seq-len", type=int, help="sequence length")
    p.add_argument("--batch-size", type=int, help="sequences per step")
    p.add_argument("--vocab-size", type=int, help="vocabulary")
    p.add_argument("--reps", type=int, help="timed steps per measurement")
    p.add_argument("--real-steps", type=int, help="steps of the real schedule run (0 = skip)")
    p.add_argument("--widths", help="width scan, e.g. 256,512 (0 = skip it)")
    args = p.parse_args(argv)
    known = {f.name for f in fields(BenchConfig)}  # a flag given overrides its field
    overrides = {k: v for k, v in vars(args).items() if k in known and v is not None}
    if args.device:
        device_flag(args.device)  # a missing GPU refused naming the flag, before any timing
    for flag, example in (("depths", "1,4,8,16"), ("widths", "256,512")):  # comma lists
        if flag in overrides:
            overrides[flag] = number_list(f"--{flag}", overrides[flag], int, example)
    if overrides.get("widths") == (0,):
        overrides["widths"] = ()
    if args.precisions:
        overrides["precisions"] = tuple(p.strip() for p in args.precisions.split(","))
    base = QUICK if args.quick else BenchConfig()
    record = run(replace(base, peer=not args.no_peer, **overrides))
    js, md = write(record, args.out)
    print(json.dumps(record, indent=2) if args.json else markdown(record))
    if not args.json:
        print(f"wrote {js} and {md}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as err:  # one line, no traceback, as the `looped` commands do
        sys.exit(f"scripts/bench.py: error: {err}")
