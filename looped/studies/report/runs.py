"""The paper's figures from run directories (`looped plot`), drawn from metrics.jsonl so that
full-scale runs get the demo's figures without a notebook."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from omegaconf import OmegaConf

from looped import paper, plotting
from looped.errors import UserError
from looped.eval.evaluate import token_nll_of
from looped.runtime.metrics import read_metrics
from looped.studies.report import bios


def load_runs(paths: Iterable[str | Path]) -> list[dict]:
    """Rows like the demo's from run directories (searched recursively for metrics.jsonl)."""
    rows = []
    for root in map(Path, paths):
        here = (root / "metrics.jsonl").is_file()
        found = [root] if here else sorted(p.parent for p in root.rglob("metrics.jsonl"))
        rows += map(_run_row, found)
    if not rows:
        where = ", ".join(map(str, paths))
        raise UserError(
            f"no metrics.jsonl under {where}; pass run directories written by `looped train`"
        )
    return rows


def _run_row(run: Path) -> dict:
    cfg = OmegaConf.load(run / "config.yaml")
    records = read_metrics(run)
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    row: dict[str, Any] = {
        "schedule": str(cfg.schedule),
        "label": paper.label(str(cfg.schedule)),
        "seed": int(cfg.seed),
        "budget": float(cfg.get("budget_frac") or 1.0),
        # matched on a FLOP budget (a fraction of the preset's, or FLOPs outright), else on steps
        "matched_budget": bool(cfg.get("budget_frac") or cfg.get("budget_flops")),
        "group": "main",
        "curve": [[r["step"], r["loss"], r["depth"]] for r in train],
        "flops": train[-1]["flops"] if train else 0.0,
    }
    summary = run / "summary.json"
    if summary.is_file():
        row["switch_step"] = json.loads(summary.read_text()).get("switch_step")
    if evals:
        token_nll = token_nll_of(evals[-1])
        depths = sorted(int(k) for k in token_nll)
        row["depths"], row["token_nll"] = depths, [token_nll[str(k)] for k in depths]
    return row


def figures(run_dirs: Iterable[str | Path], out_dir: str | Path) -> list[Path]:
    """Fig. 2, 3 and 8 analogs from run directories (their last evaluation and training curves)."""
    plotting.use_theme()
    rows = [r for r in load_runs(run_dirs) if "token_nll" in r]
    if not rows:
        raise UserError(
            "the runs have no evaluation records yet; let them reach an eval_interval or finish"
        )
    out, result = Path(out_dir), {"runs": rows}
    return [
        bios.fig8_nll_by_depth(result, out / "fig8_nll_by_depth.png"),
        bios.fig2_nll_vs_flops(result, out / "fig2_nll_vs_flops.png"),
        fig_loss(rows, out / "fig3_loss_trajectory.png"),
    ]


def fig_loss(rows: list[dict], path: Path) -> Path:
    """Each run's smoothed training loss, its switch (if any) as a vertical line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(rows):
        curve = np.asarray(r["curve"], dtype=float)
        color = plotting.color(r["label"], i)
        if len(curve):
            smooth = plotting.trailing_mean(curve[:, 1], bios.SMOOTHING)
            kw = {"label": f"{r['label']} s{r['seed']}", "color": color, "lw": 1}
            ax.plot(curve[:, 0], smooth, **kw, **plotting.dashes(r["label"]))
        if r.get("switch_step"):
            ax.axvline(r["switch_step"], color=color, ls="--", lw=0.8)
    ax.set_yscale("log")
    plotting.plain_ticks(ax.yaxis, subs=(1, 2, 3, 5, 7))
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss (smoothed)")
    ax.set_title("Training NLL; vertical lines mark switches")
    fig.legend(fontsize=8, ncol=3)  # under the panel: one entry per run, however many
    return plotting.save(fig, path)
