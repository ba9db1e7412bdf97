"""The update-benefit probe (paper Fig. 4) as a figure."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from looped import plotting


def plot_benefit(results: list[dict], path: str | Path) -> Path:
    """Benefit across serving depths, one line per checkpoint (paper Fig. 4, left)."""
    plotting.use_theme()
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for r in results:
        benefit = [r["benefit"][d] for d in r["depths"]]
        ax.plot(r["depths"], benefit, marker="o", ms=3, label=f"step {r['step']}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("serving depth K")
    plotting.chosen_ticks(ax.xaxis, plotting.DEPTH_TICKS)
    first = results[0]
    ax.set_ylabel(f"NLL after a K={first['shallow']} update\nminus after K={first['deep']}")
    ax.set_title("Update benefit (above 0: the deep update helps more)")
    ax.legend(fontsize=8, loc="upper left")  # the benefit grows with K: the top left is clear
    return plotting.save(fig, Path(path))
