"""The recipe probe (`looped map --probe`) as one table and one figure, pure functions of
recipe.json's dict: per cell and recipe, uniform's escape step (the first logged step whose
training loss is below the bigram table) and validation NLL at each LR, seed by seed."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from looped import plotting
from looped.studies.report.tables import md_table


def probe_rows(result: dict) -> list[tuple[str, str, dict]]:
    """(cell, recipe, block) for every probe block that has finished runs, in the probe's order."""
    out = []
    for name, block in result["blocks"].items():
        if block.get("sweep"):
            cell, recipe = name.removeprefix("probe-").rsplit("-w", 1)
            out.append((cell, "w" + recipe, block))
    return out


def _escapes(rows: list[dict]) -> str:
    """ "240, never": each seed's escape step, in seed order."""
    steps = [r["escape_step"] for r in sorted(rows, key=lambda r: r["seed"])]
    return ", ".join("never" if s is None else str(s) for s in steps)


def recipe_section(result: dict) -> str:
    """Each cell x recipe x LR: the escape steps and mean validation NLL over the LR seeds, then
    the recipe the probe chose and each recipe's excess over the best at the complete cells."""
    head = ["cell", "recipe", "steps", "LR", "escape step (each seed)", "val NLL (seed mean)"]
    rows = []
    for cell, recipe, block in probe_rows(result):
        for lr in sorted({r["lr"] for r in block["sweep"]}):
            mine = [r for r in block["sweep"] if r["lr"] == lr]
            val = f"{np.mean([r['val_nll'] for r in mine]):.3f}"
            rows.append([cell, recipe, mine[0]["steps"], f"{lr:g}", _escapes(mine), val])
    chosen = result.get("chosen_recipe")
    if not chosen:
        return md_table(head, rows) + "\n\nNo cell has every recipe finished: nothing chosen yet."
    ranked = sorted(chosen["excess"].items(), key=lambda x: x[1])
    excess = [[r, f"{100 * v:+.2f}%"] for r, v in ranked]
    # a recipe the larger cells left out: its excess where it ran, against the same best
    excess += [
        [f"{r} (first cell only)", f"{100 * v:+.2f}%"] for r, v in chosen.get("dropped", {}).items()
    ]
    cells = ", ".join(chosen["cells"])
    best = md_table([f"recipe (best LR, cells {cells})", "val NLL over the best"], excess)
    return md_table(head, rows) + "\n\n" + best


def fig_escape(result: dict, path: Path) -> Path:
    """One panel per cell: each recipe's escape steps (a dot per seed and LR, the LR by colour);
    a run that never escaped sits on the dashed line at its last step."""
    plotting.use_theme()
    found = probe_rows(result)
    cells = list(dict.fromkeys(c for c, _, _ in found))
    lrs = sorted({r["lr"] for _, _, b in found for r in b["sweep"]})
    fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.6), squeeze=False)
    for ax, cell in zip(axes[0], cells):
        mine = [(recipe, b) for c, recipe, b in found if c == cell]
        steps = mine[0][1]["sweep"][0]["steps"]
        for j, lr in enumerate(lrs):
            for x, (_, b) in enumerate(mine):
                runs = [r for r in b["sweep"] if r["lr"] == lr]
                ys = [steps if r["escape_step"] is None else r["escape_step"] for r in runs]
                xs = x + 0.15 * (j - (len(lrs) - 1) / 2) + np.linspace(-0.04, 0.04, len(ys))
                label = f"LR {lr:g}" if x == 0 else None
                ax.scatter(xs, ys, s=18, color=plotting.color("", j), label=label, zorder=3)
        ax.axhline(steps, color="0.3", ls="--", lw=0.8, label="never escaped (the run's end)")
        ax.set_xticks(range(len(mine)), [r for r, _ in mine], rotation=30, fontsize=8)
        ax.set(title=cell, ylabel="escape step", ylim=(0, steps * 1.08))
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, ncol=len(labels))
    return plotting.save(fig, path)
