"""The map (`looped map`) as one figure and tables of numbers, pure functions of map.json's dict:
the gap to uniform against tokens per parameter, one curve per width, for each recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from looped import paper
from looped.eval.stats import Verdict
from looped.paper import label
from looped.report import style
from looped.report.length import gap_cell
from looped.report.tables import md_table

WIDTH_COLOURS = {16: "#bdbdbd", 32: "#9ecae1", 64: "#3182bd", 128: "#08519c", 256: "#54278f"}


def cells(result: dict, vocab: int | None = 512) -> list[dict]:
    """Every judged cell of every block, tagged with its block (`vocab` None: every tokenizer);
    a cell present in several blocks (they share runs) is kept once."""
    seen, out = set(), []
    for name, block in result.get("blocks", {}).items():
        for c in block.get("cells", []):
            key = (c.get("d_model"), c.get("vocab_size"), c["steps"], c["schedule"])
            if "gap" not in c or key in seen or (vocab and c.get("vocab_size") != vocab):
                continue
            seen.add(key)
            out.append(c | {"block": name})
    return out


def reported(cell: dict) -> bool:
    return cell.get("one_pass", True) and cell["verdict"] != Verdict.NOT_INFORMATIVE.value


def fig_map(result: dict, path: Path) -> Path:
    """One panel per recipe: each width's paired gap (seed mean, 95% interval) against training
    tokens per non-embedding parameter; hollow where the models miss the bigram table (no
    verdict), crossed where a cell is past one pass (never reported); the tolerance dashed."""
    style.use_theme()
    arms = [s for s in (paper.RECIPES_1B[1], paper.RECIPE_200M)]
    fig, axes = plt.subplots(1, len(arms), figsize=(9.0, 3.8), sharey=True)
    every = cells(result)
    for ax, s in zip(np.atleast_1d(axes), arms):
        mine = [c for c in every if c["schedule"] == s]
        for d in sorted({c["d_model"] for c in mine}):
            _width_line(ax, sorted((c for c in mine if c["d_model"] == d), key=_tpp), d)
        tol = 100 * (mine[0]["tolerance"] if mine else paper.NLL_GAP[0])
        ax.axhline(tol, color="0.35", ls="--", lw=1)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{label(s)} vs uniform 1..16", fontsize=10)
        ax.set_xlabel("training tokens per non-embedding parameter")
    np.atleast_1d(axes)[0].set_ylabel("NLL gap to uniform, % (+: behind)")
    np.atleast_1d(axes)[-1].legend(handles=_key(every), fontsize=8)
    return style.save(fig, path)


def _tpp(c: dict) -> float:
    return c["tokens_per_non_embedding_param"]


def _width_line(ax: Any, mine: list[dict], d: int) -> None:
    colour = WIDTH_COLOURS.get(d, "#333333")
    x = np.array([_tpp(c) for c in mine])
    mean, lo, hi = (np.array([100 * c["gap"][k] for c in mine]) for k in ("mean", "lo", "hi"))
    ax.errorbar(x, mean, yerr=[mean - lo, hi - mean], color=colour, marker="o", capsize=3)
    quiet = [k for k, c in enumerate(mine) if c["verdict"] == Verdict.NOT_INFORMATIVE.value]
    ax.scatter(x[quiet], mean[quiet], s=50, facecolors="white", edgecolors=colour, zorder=4)
    past = [k for k, c in enumerate(mine) if not c.get("one_pass", True)]
    ax.scatter(x[past], mean[past], s=60, marker="x", color="black", zorder=5)


def _key(every: list[dict]) -> list[Line2D]:
    """The legend: one entry per width, then what a hollow and a crossed point mean."""
    widths = sorted({c["d_model"] for c in every})
    handles = [
        Line2D([], [], color=WIDTH_COLOURS.get(d, "#333333"), marker="o", label=f"d={d}")
        for d in widths
    ]
    handles.append(
        Line2D([], [], ls="", marker="o", mfc="white", mec="0.3", label="misses bigram: no verdict")
    )
    if any(not c.get("one_pass", True) for c in every):
        handles.append(Line2D([], [], ls="", marker="x", color="black", label="past one pass"))
    handles.append(Line2D([], [], color="0.35", ls="--", label="the recipe's tolerance"))
    return handles


def map_rows(result: dict) -> str:
    """One row per (width, vocabulary, length, arm): the cell's size and the paired gap."""
    head = ["d", "vocab", "steps", "tokens/param (non-emb.)", "tokens/param (all)", "epochs"]
    head += [
        "LR",
        "arm",
        "gap to uniform [95% interval], n, verdict",
        "plateau escape (uniform / arm)",
    ]
    rows = []
    every = cells(result, vocab=None)
    uni = {(c["d_model"], c["vocab_size"], c["steps"]): c for c in _uniform_cells(result)}
    for c in sorted(
        every, key=lambda c: (c["d_model"], c["vocab_size"], c["steps"], c["schedule"])
    ):
        u = uni.get((c["d_model"], c["vocab_size"], c["steps"]), {})
        verdict = gap_cell(c) if c.get("one_pass", True) else "past one pass: not reported"
        rows.append(
            [
                c["d_model"],
                c["vocab_size"],
                c["steps"],
                f"{_tpp(c):.0f}",
                f"{c['tokens_per_param']:.0f}",
                f"{c['epochs']:.2f}" if c.get("epochs") is not None else "-",
                f"{c['lr']:g}",
                label(c["schedule"]),
                verdict,
                f"{_steps(u.get('escape_steps'))} / {_steps(c.get('escape_steps'))}",
            ]
        )
    return md_table(head, rows)


def _uniform_cells(result: dict) -> list[dict]:
    return [
        c
        for block in result.get("blocks", {}).values()
        for c in block.get("cells", [])
        if c["schedule"] == paper.UNIFORM
    ]


def _steps(escapes: list | None) -> str:
    """Seeds' escape steps as "median (min-max)"; "never" counts seeds that stayed above."""
    if not escapes:
        return "-"
    hit = [e for e in escapes if e is not None]
    never = len(escapes) - len(hit)
    text = f"{int(np.median(hit))} ({min(hit)}-{max(hit)})" if hit else ""
    return (text + (f", {never} never" if never else "")).strip(", ") or "never"


def fit_cells(result: dict, schedule: str) -> list[dict]:
    """The cells a fit or a headline may use: this recipe's, informative and within one pass."""
    return [c for c in cells(result) if c["schedule"] == schedule and reported(c)]
