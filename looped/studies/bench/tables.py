"""The record of ``looped bench`` judged against its targets and rendered as ``bench.json`` and
``bench.md`` (quoted in docs/USAGE.md). Rendering is a pure function of the record, so a record
re-renders without timing anything again (a test compares results/bench.json with bench.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from looped.flops import flops_per_token
from looped.model import LoopedConfig
from looped.studies.report.tables import md_table

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
