"""Reporting for ``looped bench``: the targets, the record and its markdown tables.

The targets each measurement is judged against, and the record rendered as ``bench.json`` and the markdown tables of ``bench.md`` (which docs/USAGE.md
quotes between its ``bench`` markers).

Kept apart from the measuring in ``looped/bench/run.py`` so that a record can be re-read and
re-rendered without timing anything, e.g. after changing a table's wording::

    python -c "import json; from looped.bench.tables import markdown; \\
        print(markdown(json.load(open('results/bench.json'))), end='')" > results/bench.md
    looped report                       # then copy bench.md into docs/USAGE.md

Rendering is a pure function of the record: the same bench.json always gives the same bench.md
(a test re-renders the committed results/bench.json and compares it with results/bench.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from looped.flops import flops_per_token
from looped.model import LoopedConfig

TARGETS = {
    "peer_ratio": 1.10,  # peer step time / looped step time, at least
    "of_ceiling": 0.85,  # achieved FLOP/s / matmul ceiling, at least (width >= 256)
    "linear_in_k": 0.10,  # |measured K-ratio / modeled K-ratio - 1|, at most
    "saving_ratio": 0.95,  # measured wall-clock saving / modeled saving, at least
    "sweep_ratio": 1.10,  # forward_depths(1..16) / forward(16), at most
}


# -- targets ---------------------------------------------------------------------------------
def targets(cfg: Any, mc: LoopedConfig, train_rows, serve_rows, schedule_rows) -> list[dict]:
    """One record per (target, precision): the measured value, the bound, met or not.

    `cfg` is the ``looped.bench.run.BenchConfig`` the rows were measured with, `mc` its model."""
    out = []
    for precision in cfg.precisions:
        rows = [r for r in train_rows if r["precision"] == precision]
        out += _train_targets(cfg, mc, precision, rows)
        for r in serve_rows:
            if r["precision"] == precision:
                out.append(
                    _target(
                        f"forward_depths(1..{r['depth']}) / forward({r['depth']})",
                        precision,
                        r["sweep_over_forward"],
                        "<=",
                        TARGETS["sweep_ratio"],
                        f"modeled floor {r['modeled_ratio']:.3f}",
                    )
                )
    for r in schedule_rows:
        if r["ratio"] is not None:
            out.append(
                _target(
                    f"measured / modeled saving ({r['kind']})",
                    r["precision"],
                    r["ratio"],
                    ">=",
                    TARGETS["saving_ratio"],
                    f"{r['measured_saving']:.1%} measured vs {r['modeled_saving']:.1%} modeled",
                )
            )
    return out


def _train_targets(cfg: Any, mc: LoopedConfig, precision: str, rows: list[dict]) -> list[dict]:
    """The train-step targets of one precision: against the peer, the matmul ceiling, and
    step time linear in K."""
    out = []
    lo, hi = min(cfg.depths), max(cfg.depths)
    if cfg.peer:
        worst = min(rows, key=lambda r: r["peer_over_looped"])
        out.append(
            _target(
                "train step: peer / looped (worst K)",
                precision,
                worst["peer_over_looped"],
                ">=",
                TARGETS["peer_ratio"],
                f"K={worst['depth']}",
            )
        )
    deepest = max(rows, key=lambda r: r["depth"])
    applies = cfg.d_model >= 256
    out.append(
        _target(
            "FLOP/s / matmul ceiling (largest K)",
            precision,
            deepest["of_ceiling"],
            ">=",
            TARGETS["of_ceiling"],
            f"K={hi}" + ("" if applies else "; target is for width >= 256"),
            applies=applies,
        )
    )
    if hi > lo:
        t = {r["depth"]: r["looped_ms"] for r in rows}
        modeled = flops_per_token(mc, hi, cfg.seq_len) / flops_per_token(mc, lo, cfg.seq_len)
        measured = t[hi] / t[lo]
        out.append(
            _target(
                f"step time K={hi} / K={lo} over modeled FLOP ratio - 1",
                precision,
                measured / modeled - 1,
                "within ±",
                TARGETS["linear_in_k"],
                f"measured {measured:.2f}, modeled {modeled:.2f}",
            )
        )
    return out


def _target(name, precision, value, op, bound, note, applies=True) -> dict:
    met = {">=": value >= bound, "<=": value <= bound, "within ±": abs(value) <= bound}[op]
    return {
        "target": name,
        "precision": precision,
        "value": value,
        "op": op,
        "bound": bound,
        "met": met if applies else None,
        "note": note,
    }


# -- markdown --------------------------------------------------------------------------------
def markdown(record: dict[str, Any]) -> str:
    """The tables docs/USAGE.md quotes, with the machine they were measured on: one paragraph per
    setting, then train step, schedule saving, serving sweep, width scan and targets."""
    lines = _preamble(record)
    lines += _train_table(record["train"])
    lines += _schedule_table(record["schedule"], record["config"])
    lines += _serve_table(record["serve"])
    if record.get("widths"):
        lines += _width_table(record["widths"], record["config"])
    lines += _target_table(record["targets"])
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


def _train_table(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "| precision | K | looped ms | peer ms | peer / looped | kernel floor ms | "
        "looped GFLOP/s | matmul ceiling GFLOP/s | of ceiling |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        peer = "-" if r["peer_ms"] is None else f"{r['peer_ms']:.1f}"
        ratio = "-" if r["peer_over_looped"] is None else f"{r['peer_over_looped']:.3f}"
        lines.append(
            f"| {r['precision']} | {r['depth']} | {r['looped_ms']:.1f} | {peer} | {ratio} | "
            f"{r['floor_ms']:.1f} | {r['looped_flops_per_s'] / 1e9:.1f} | "
            f"{r['ceiling_flops_per_s'] / 1e9:.1f} | {r['of_ceiling']:.1%} |"
        )
    return lines


def _schedule_table(rows: list[dict], cfg: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "| schedule saving | precision | steps | modeled | measured | measured / modeled |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(
            f"| {r['kind']} | {r['precision']} | {r['steps']} | {r['modeled_saving']:.1%} | "
            f"{r['measured_saving']:.1%} | {ratio} |"
        )
    return lines + ["", f"Schedule: `{cfg['schedule']}` against `{cfg['reference']}`."]


def _serve_table(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "| serving sweep | precision | forward ms | forward_depths ms | ratio | modeled FLOP ratio |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| K=1..{r['depth']} vs K={r['depth']} | {r['precision']} | {r['forward_ms']:.1f} | "
            f"{r['sweep_ms']:.1f} | {r['sweep_over_forward']:.3f} | {r['modeled_ratio']:.3f} |"
        )
    return lines


def _width_table(rows: list[dict], cfg: dict[str, Any]) -> list[str]:
    """Measurements 2 and 5 at each width, each against its target."""
    of, sweep = TARGETS["of_ceiling"], TARGETS["sweep_ratio"]
    lines = [
        "",
        f"Width scan (heads = width / 64, looped model only): train step at K={rows[0]['depth']}, "
        f"serving sweep K=1..{cfg['serve_depth']}; the targets of measurements 2 and 5 at each "
        "width.",
        "",
        f"| precision | width | heads | step ms | of ceiling | >= {of:.0%} | "
        f"sweep / forward | modeled floor | <= {sweep} |",
        "|---|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['precision']} | {r['d_model']} | {r['n_head']} | {r['looped_ms']:.1f} | "
            f"{r['of_ceiling']:.1%} | {_yes(r['of_ceiling'] >= of)} | "
            f"{r['sweep_over_forward']:.3f} | {r['sweep_modeled_ratio']:.3f} | "
            f"{_yes(r['sweep_over_forward'] <= sweep)} |"
        )
    return lines


def _target_table(rows: list[dict]) -> list[str]:
    lines = [
        "",
        "| target | precision | measured | bound | met | note |",
        "|---|---|---:|---|---|---|",
    ]
    for t in rows:
        met = {True: "yes", False: "**no**", None: "n/a"}[t["met"]]
        lines.append(
            f"| {t['target']} | {t['precision']} | {t['value']:.3f} | {t['op']} {t['bound']} | "
            f"{met} | {t['note']} |"
        )
    return lines


def _yes(met: bool) -> str:
    return "yes" if met else "**no**"


# -- files -----------------------------------------------------------------------------------
def write(record: dict[str, Any], out_dir: str | Path) -> tuple[Path, Path]:
    """Write bench.json and bench.md into `out_dir`; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "bench.json", out / "bench.md"
    js.write_text(json.dumps(record, indent=2) + "\n")
    md.write_text(markdown(record))
    return js, md
