"""How every figure looks: the theme, each schedule's colour and marker, seed bands, keys for
marks without a legend entry, and `save` / `show` (the figure finished, then written or shown).
Our figures' readability is checked by the tests (`tests/figcheck.py`), not at draw time.

    plotting.use_theme()
    fig, ax = plt.subplots()
    plotting.band(ax, depths, per_seed_nll, "uniform 1..16", plotting.color("uniform 1..16"))
    plotting.show(fig)            # a notebook; plotting.save(fig, path) writes a PNG
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib import ticker
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from looped import paper

SAVED_DPI = 130  # pixels per inch of a saved PNG


def files_only() -> None:
    """Draw into files, never a window (a notebook importing the package keeps its backend)."""
    matplotlib.use("Agg")


def trailing_mean(y: np.ndarray, window: int, keep_length: bool = True) -> np.ndarray:
    """The mean of each point and the `window - 1` before it, so a spike shows after its step."""
    if keep_length and len(y) < window:
        return y
    kernel = np.ones(window) / window
    padded = np.pad(y, (window - 1, 0), mode="edge") if keep_length else y
    return np.convolve(padded, kernel, mode="valid")


def use_theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)


def color(label: str, i: int = 0) -> Any:
    """A schedule's colour (by label or spec) in `paper.SHOWN`, else seaborn's i-th."""
    return paper.color_of(label) or sns.color_palette("deep")[i % 10]


def marker(label: str, i: int = 0) -> str:
    """The marker of a schedule, given its spec or its label; others take one in turn."""
    return paper.marker_of(label) or ("D", "v", "P", "X")[i % 4]


def dashes(label: str) -> dict[str, Any]:
    """Fixed-first dashed and on top: until its switch its curve is fixed K=4's, seen in the gaps."""
    return {"ls": "--", "zorder": 2.5} if label.startswith("fixed-first") else {"ls": "-"}


SEED_RANGE = "the seeds' range (min to max)"


def key(ax: Any, mark: str, meaning: str) -> None:
    """Say what a mark without a legend entry of its own means (a seed band, a bar over the
    seeds): `finish` writes it as the title of that panel's legend (else the figure's first), so
    a reader finds the key beside the mark it explains."""
    ax.looped_keys = {**getattr(ax, "looped_keys", {}), mark: meaning}


def band(ax: Any, x: Iterable, ys: list[list[float]], label: str, color: Any, **kw: Any) -> None:
    """Seed mean as a line, min-max across seeds as a band; fixed-first dashed (`dashes`)."""
    arr, x = np.asarray(ys, dtype=float), list(x)
    name = f"{label} (n={len(arr)})" if len(arr) > 1 else label
    ax.plot(x, arr.mean(0), label=name, color=color, **{**dashes(label), **kw})
    if len(arr) > 1:
        ax.fill_between(x, arr.min(0), arr.max(0), color=color, alpha=0.2, lw=0)
        key(ax, "shading", SEED_RANGE)


def with_knobs(draw: Any, knobs: dict[str, Any]) -> None:
    """A notebook's figure with knobs: `draw(**values)` returns (figure, text), shown as plain
    outputs (readable without a kernel); moving a knob redraws both in place."""
    from IPython.display import Pretty, display  # only notebooks call this; IPython is heavy

    fig, text = draw(**{name: w.value for name, w in knobs.items()})
    shown = display(_finished(fig), display_id=True), display(Pretty(text), display_id=True)
    plt.close(fig)

    def redraw(_change: object = None) -> None:
        fig, text = draw(**{name: w.value for name, w in knobs.items()})
        shown[0].update(_finished(fig))
        shown[1].update(Pretty(text))
        plt.close(fig)

    for knob in knobs.values():
        knob.observe(redraw, names="value")
    from ipywidgets import HBox  # ipywidgets loads a comm layer; only notebooks need it

    bundle = HBox(list(knobs.values()))._repr_mimebundle_()
    bundle["text/plain"] = "(the knobs move with a running kernel)"
    display(bundle, raw=True)


DEPTH_TICKS = [1, 2, 4, 6, 8, 10, 12, 14, 16]


def plain(v: float) -> str:
    """0.5, 2, 30 as written; large numbers as 2e12 or 7.5e11 (no '+', no padding zeros)."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def plain_ticks(axis: Any, subs: tuple[float, ...] | None = None) -> None:
    """Tick labels written `plain`ly (7.5e11 at each tick, not an offset; 2, not 10^x): on a log
    axis at `subs` times each power of ten, e.g. (1, 2, 5) so that a short one has a few; on a
    linear axis at most six, so that long labels fit a narrow panel."""
    if subs:
        axis.set_major_locator(ticker.LogLocator(subs=subs))
        axis.set_minor_formatter(ticker.NullFormatter())
    else:
        axis.set_major_locator(ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))


def chosen_ticks(axis: Any, at: Iterable[float]) -> None:
    """Ticks a figure chose itself (the lengths it trained, the depths it serves), plainly
    labelled, with no minor ticks."""
    axis.set_major_locator(ticker.FixedLocator(list(at)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    axis.set_minor_locator(ticker.NullLocator())


def write_keys(fig: Any) -> None:
    """Each panel's keyed marks (`key`) as its legend's title ("shading and bars: ..."), or the
    first figure-wide legend's where the panel has none."""
    for ax in fig.axes:
        keys = getattr(ax, "looped_keys", {})
        legend = ax.get_legend() or (fig.legends[0] if fig.legends else None)
        if not keys or legend is None:
            continue
        marks: dict[str, list[str]] = {}
        for mark, meaning in keys.items():
            marks.setdefault(meaning, []).append(mark)
        note = "; ".join(f"{' and '.join(m)}: {meaning}" for meaning, m in marks.items())
        title = legend.get_title().get_text()
        if note not in title:
            size = legend.get_texts()[0].get_fontsize() if legend.get_texts() else None
            legend.set_title(f"{title}\n{note}" if title else note, prop={"size": size})


def layout(fig: Any) -> None:
    """`tight_layout`, leaving a strip at the bottom for the figure-wide legends: keys under every
    panel, centred, stacked with the first made on top (any `loc` given is replaced).
    tight_layout alone ignores figure legends and would draw the panels over them."""
    fig.tight_layout()
    if not fig.legends:
        return
    fig.canvas.draw()
    renderer, height = fig.canvas.get_renderer(), fig.bbox.height
    y = 0.01 * height  # pixels from the bottom edge
    for legend in reversed(fig.legends):
        legend.set_loc("lower center")
        legend.set_bbox_to_anchor((0.5, y / height), transform=fig.transFigure)
        y += legend.get_window_extent(renderer).height + 4
    fig.tight_layout(rect=(0, y / height + 0.01, 1, 1))


def finish(fig: Any) -> None:
    """The keys written, then the layout."""
    write_keys(fig)
    layout(fig)


def show(fig: Any) -> None:
    """Show a notebook's figure, finished."""
    finish(fig)
    plt.show()


def save(fig: Any, path: Path) -> Path:
    """Write the figure, finished, as a PNG (closed afterwards: a study draws many)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    finish(fig)
    fig.savefig(path, dpi=SAVED_DPI)
    plt.close(fig)
    return path


def fig_architecture(depth: int = 4) -> Any:
    """The paper's Fig. 6 as code draws it: P once, the same block A (the same weights) applied
    `depth` times with the embedding injected from the second loop on, H once."""
    use_theme()
    boxes = ["P"] + ["A"] * depth + ["H"]
    fig, ax = plt.subplots(figsize=(1.25 * len(boxes) + 1.2, 2.4))
    colors = {"P": "#8da0cb", "A": "#66c2a5", "H": "#fc8d62"}
    for i, name in enumerate(boxes):
        style = {"boxstyle": "round,pad=0.02", "fc": colors[name], "ec": "k", "lw": 0.8}
        ax.add_patch(FancyBboxPatch((i + 0.2, 0.15), 0.6, 0.7, **style))
        ax.text(i + 0.5, 0.5, name if name != "A" else f"A\n(k={i})", ha="center", va="center")
        ax.add_patch(_arrow((i - 0.2, 0.5), (i + 0.2, 0.5)))
    for k in range(2, depth + 1):  # input injection: e = P(x) re-enters loops 2..K
        arc = dict(connectionstyle="arc3,rad=-0.25", arrowstyle="-|>", mutation_scale=8, lw=0.6)
        ax.add_patch(FancyArrowPatch((0.5, 0.85), (k + 0.5, 0.85), color="0.4", **arc))
    ax.add_patch(_arrow((len(boxes) - 0.2, 0.5), (len(boxes) + 0.2, 0.5)))
    ax.text(-0.25, 0.5, "tokens", ha="right", va="center")
    ax.text(len(boxes) + 0.25, 0.5, "logits", ha="left", va="center")
    ax.set(xlim=(-1.3, len(boxes) + 0.9), ylim=(-0.1, 1.9))
    ax.axis("off")
    ax.set_title(
        f"$P \\to A^{{{depth}}} \\to H$: one block's weights, applied {depth} times "
        "(grey: the embedding e injected)"
    )
    return fig


def _arrow(start: tuple[float, float], end: tuple[float, float]) -> Any:
    """A straight black arrow of the diagram's main path."""
    return FancyArrowPatch(
        start, end, arrowstyle="-|>", mutation_scale=12, lw=1.2, color="k", shrinkA=0, shrinkB=0
    )


def _finished(fig: Any) -> Any:
    finish(fig)
    return fig
