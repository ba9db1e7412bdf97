"""The paper's figures, drawn from files the code wrote (results/demo.json or run directories).

    looped plot --runs runs/           # Fig. 2, 3, 8 analogs from any run directories
    looped plot --runs runs/ --out figures/full

`demo_figures(result, dir)` draws every demo figure from the dict in results/demo.json;
`runs_figures(run_dirs, dir)` draws from metrics.jsonl files, so full-scale runs turn into the
same figures without a notebook. Lines are seed means; bands span the min and max across seeds.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import matplotlib.transforms
import numpy as np
import seaborn as sns
from matplotlib.lines import Line2D

from looped import paper
from looped.errors import UserError
from looped.paper import FIXED_FIRST, LABELS, UNIFORM


def _style() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)


def _color(label: str, i: int = 0) -> Any:
    return paper.color_of(label) or sns.color_palette("deep")[i % 10]


# one marker per schedule, so that two schedules whose curves coincide (fixed-first and fixed
# K=4 share a run until the switch) both stay visible
MARKERS = {paper.FIXED: "s", FIXED_FIRST: "^", UNIFORM: "o"}


def _marker(label: str, i: int = 0) -> str:
    """The marker of a schedule, given its spec or its label; others take one in turn."""
    by_label = {LABELS[s]: m for s, m in MARKERS.items()}
    return MARKERS.get(label) or by_label.get(label) or ("D", "v", "P", "X")[i % 4]


def _dashes(label: str) -> dict[str, Any]:
    """Fixed-first is dashed and drawn on top: until its switch its training curve is fixed
    K=4's, which shows through the gaps."""
    if label.startswith("fixed-first"):
        return {"ls": "--", "zorder": 2.5}
    return {"ls": "-"}


def _band(ax: Any, x: Iterable, ys: list[list[float]], label: str, color: Any, **kw: Any) -> None:
    """Seed mean as a line, min-max across seeds as a band; fixed-first dashed (`_dashes`)."""
    arr = np.asarray(ys, dtype=float)
    x = list(x)
    ax.plot(
        x,
        arr.mean(0),
        label=f"{label} (n={len(arr)})" if len(arr) > 1 else label,
        color=color,
        **{**_dashes(label), **kw},
    )
    if len(arr) > 1:
        ax.fill_between(x, arr.min(0), arr.max(0), color=color, alpha=0.2, lw=0)


def empty_panels(fig: Any) -> list[str]:
    """Titles of the panels that show no data: no line in data coordinates with a finite point
    inside the view, no scatter, band, bar or image. Reference lines (axhline, axvline) do not
    count, so a panel holding only its "K=4" marker is empty."""
    empty = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or getattr(ax, "_colorbar", None) or ax.get_label() == "<colorbar>":
            continue
        x0, x1 = sorted(ax.get_xlim())
        y0, y1 = sorted(ax.get_ylim())
        has = bool(ax.images) or any(
            len(getattr(c, "get_offsets", lambda: [])()) or len(c.get_paths())
            for c in ax.collections
        )
        has |= any(p.get_height() != 0 for p in ax.patches if hasattr(p, "get_height"))
        for line in ax.lines:
            if line.get_transform() != ax.transData:
                continue  # axhline / axvline: a reference, not data
            x, y = (np.asarray(v, dtype=float) for v in line.get_data())
            inside = np.isfinite(x) & np.isfinite(y) & (x >= x0) & (x <= x1) & (y >= y0) & (y <= y1)
            has |= bool(inside.any())
        if not has:
            empty.append(ax.get_title() or f"panel {i + 1}")
    return empty


def _check(fig: Any) -> None:
    empty = empty_panels(fig)
    if empty:
        plt.close(fig)
        raise ValueError(f"figure has panels without data: {', '.join(map(repr, empty))}")


def show(fig: Any) -> None:
    """Show a notebook's figure after checking that every panel holds data and that a reader
    can read it (`readability_problems`): a blank panel or a legend over the data is a bug in
    the figure (notebook 05 once drew one), never something to publish."""
    _finish(fig)
    _check(fig)
    problems = readability_problems(fig)
    if problems:
        plt.close(fig)
        raise ValueError("figure is hard to read: " + "; ".join(problems))
    plt.show()


# -- readability: what a reader must be able to see ------------------------------------------
# a number as a tick label writes it: 0.5, -2, 1e12, 40%, or matplotlib's mathtext 10^{3}
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?%?$")
_MATHTEXT_POWER = re.compile(r"^\$\\mathdefault\{(\d+(\.\d+)?\\times)?\d*\^\{-?\d+\}\}\$$")
# float noise: ten or more decimals holding a run of 0s or 9s before another digit, what binary
# floats print as (0.0012000000000000001, 0.30000000000000004), not a chosen format (1.000000)
FLOAT_NOISE = re.compile(r"\.(?=\d{10})\d*?(0{5,}[1-9]|9{6,})")


def _is_number(text: str) -> bool:
    t = text.strip().replace("\u2212", "-")
    return bool(_NUMBER.match(t) or _MATHTEXT_POWER.match(t))


def _panel(ax: Any, i: int) -> str:
    return repr(ax.get_title() or ax.get_title(loc="left") or f"panel {i + 1}")


def _is_data_line(ax: Any, line: Any) -> bool:
    """A line in data coordinates (not axhline / axvline, not a legend handle)."""
    return line.get_visible() and line.get_transform() == ax.transData


def _has_marker(line: Any) -> bool:
    return line.get_marker() not in ("None", "", " ", None)


def _has_stroke(line: Any) -> bool:
    return line.get_linestyle() not in ("None", "", " ")


def _along(points: np.ndarray, step: float = 2.0) -> np.ndarray:
    """Points every `step` display pixels along a polyline (its vertices included)."""
    out = [points[:1]]
    for a, b in zip(points[:-1], points[1:]):
        n = max(1, int(np.ceil(np.hypot(*(b - a)) / step)))
        out.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(out)


def _inside(ax: Any, px: np.ndarray) -> np.ndarray:
    """The display points that fall inside a panel."""
    box = ax.get_window_extent()
    keep = (px[:, 0] >= box.x0 - 0.5) & (px[:, 0] <= box.x1 + 0.5)
    keep &= (px[:, 1] >= box.y0 - 0.5) & (px[:, 1] <= box.y1 + 0.5)
    return px[keep]


def _line_pixels(ax: Any, line: Any) -> np.ndarray:
    """A data line in display pixels: every vertex, and points along the segments it draws,
    kept where they fall inside the panel."""
    xy = np.asarray(line.get_xydata(), dtype=float)
    xy = xy[np.isfinite(xy).all(axis=1)]
    if not len(xy):
        return np.empty((0, 2))
    px = ax.transData.transform(xy)
    if _has_stroke(line) and len(px) > 1:
        px = _along(px)
    return _inside(ax, px)


def _data_pixels(ax: Any) -> list[tuple[str, np.ndarray]]:
    """(name, display points) of everything a panel plots: lines, markers, scatter points,
    error bars and bars. Bands (fill_between) are shading, not points."""
    from matplotlib.collections import LineCollection, PathCollection

    found = [(ln.get_label(), _line_pixels(ax, ln)) for ln in ax.lines if _is_data_line(ax, ln)]
    for c in ax.collections:
        if not c.get_visible():
            continue
        if isinstance(c, PathCollection) and len(c.get_offsets()):
            px = c.get_offset_transform().transform(np.asarray(c.get_offsets(), dtype=float))
            found.append((c.get_label(), _inside(ax, px)))
        elif isinstance(c, LineCollection) and c.get_transform() == ax.transData:
            segs = [ax.transData.transform(np.asarray(s, dtype=float)) for s in c.get_segments()]
            pts = [_along(s) for s in segs if len(s) > 1 and np.isfinite(s).all()]
            if pts:
                found.append((c.get_label(), _inside(ax, np.concatenate(pts))))
    for p in ax.patches:
        if p.get_visible() and hasattr(p, "get_height") and p.get_data_transform() == ax.transData:
            e = p.get_window_extent()
            edge = np.array([[e.x0, e.y0], [e.x1, e.y0], [e.x1, e.y1], [e.x0, e.y1], [e.x0, e.y0]])
            found.append(("bar", _inside(ax, _along(edge))))
    return found


def _texts(fig: Any) -> list[Any]:
    """Every piece of text a legend must leave readable: tick labels, axis labels, titles."""
    texts = [t for t in fig.texts if t.get_visible() and t.get_text()]
    if getattr(fig, "_suptitle", None) is not None:
        texts.append(fig._suptitle)
    for ax in fig.axes:
        if not ax.get_visible() or not ax.axison:
            continue
        for axis in (ax.xaxis, ax.yaxis):
            texts += _tick_labels(axis)
            texts += [t for t in (axis.label, axis.get_offset_text())
                      if t.get_visible() and t.get_text()]  # fmt: skip
        texts += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    return texts


def _legends(fig: Any) -> list[tuple[Any, Any]]:
    """(legend, the panel it belongs to or None) for every legend of the figure."""
    found = [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend() is not None]
    return found + [(leg, None) for leg in fig.legends]


def _inside_panel(legend: Any, ax: Any) -> bool:
    """Whether a legend is anchored to its panel (not placed outside it)."""
    return bool(np.allclose(legend.get_bbox_to_anchor().bounds, ax.bbox.bounds))


def _legend_clashes(fig: Any, legend: Any, renderer: Any) -> list[str]:
    """What a legend's box covers: plotted points of any panel, tick labels, titles; and
    whether a legend meant to sit inside its panel sticks out of it."""
    box = legend.get_window_extent(renderer).padded(-1)
    clashes = []
    owner = legend.axes
    if owner is not None and _inside_panel(legend, owner):
        frame = owner.bbox
        if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
            clashes.append("sticks out of its panel")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for name, px in _data_pixels(ax):
            covered = (px[:, 0] > box.x0) & (px[:, 0] < box.x1)
            covered &= (px[:, 1] > box.y0) & (px[:, 1] < box.y1)
            if covered.any():
                clashes.append(f"covers {int(covered.sum())} points of {name!r} in {_panel(ax, i)}")
    for t in _texts(fig):
        if box.overlaps(t.get_window_extent(renderer)):
            clashes.append(f"covers the text {t.get_text()!r}")
    return clashes


def legend_problems(fig: Any) -> list[str]:
    """A legend must cover no plotted point, tick label or title (in display coordinates)."""
    renderer = fig.canvas.get_renderer()
    return [
        f"legend of {_panel(ax, fig.axes.index(ax)) if ax else 'the figure'} {clash}"
        for legend, ax in _legends(fig)
        for clash in _legend_clashes(fig, legend, renderer)
    ]


def _tick_labels(axis: Any) -> list[Any]:
    """The major tick labels an axis draws: visible, not empty, at a tick inside the view."""
    lo, hi = sorted(axis.get_view_interval())
    slack = 1e-9 * max(abs(hi - lo), 1e-300)
    locs = axis.get_majorticklocs()
    return [
        label
        for loc, tick in zip(locs, axis.get_major_ticks(len(locs)))
        if lo - slack <= loc <= hi + slack
        for label in (tick.label1, tick.label2)
        if label.get_visible() and label.get_text().strip()
    ]


def _shown_labels(axis: Any) -> list[str]:
    return [t.get_text() for t in _tick_labels(axis)]


def _shares_labels(ax: Any, which: str) -> bool:
    """Whether a panel's axis is shared with a panel that labels it (sharey's inner panels)."""
    group = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    return any(
        sib is not ax and _shown_labels(sib.xaxis if which == "x" else sib.yaxis)
        for sib in group.get_siblings(ax)
    )


def _needs_ticks(ax: Any) -> list[tuple[str, Any, list[str]]]:
    """(x or y, axis, its labels) for each numeric axis of a panel that shows fewer than three
    labelled ticks. Category labels (K=1, d=48) are not numeric; an axis whose labels another
    panel shows (sharey's inner panels) is exempt."""
    if not ax.get_visible() or not ax.axison or getattr(ax, "_colorbar", None):
        return []
    found = []
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        labels = _shown_labels(axis)
        if len(labels) >= 3 or (labels and not all(_is_number(t) for t in labels)):
            continue
        if not labels and _shares_labels(ax, which):
            continue
        found.append((which, axis, labels))
    return found


def tick_problems(fig: Any) -> list[str]:
    """Every numeric axis shows at least three labelled ticks."""
    return [
        f"{_panel(ax, i)}: the {which} axis has {len(labels)} labelled ticks "
        f"({', '.join(labels) or 'none'}); a reader needs at least 3"
        for i, ax in enumerate(fig.axes)
        for which, _, labels in _needs_ticks(ax)
    ]


def _distances(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """Each point's distance (pixels) to the nearest segment of a polyline."""
    if len(polyline) == 1:
        return np.hypot(*(points - polyline[0]).T)
    a, ab = polyline[:-1], np.diff(polyline, axis=0)
    t = np.einsum("pmk,mk->pm", points[:, None, :] - a[None], ab) / np.maximum(
        np.einsum("mk,mk->m", ab, ab), 1e-12
    )
    nearest = a[None] + np.clip(t, 0, 1)[..., None] * ab[None]
    return np.hypot(*(points[:, None, :] - nearest).transpose(2, 0, 1)).min(axis=1)


def _thin(px: np.ndarray, step: float = 1.0) -> np.ndarray:
    """A polyline without consecutive points closer than `step` pixels (fewer segments)."""
    keep = [0]
    for k in range(1, len(px)):
        if np.hypot(*(px[k] - px[keep[-1]])) >= step:
            keep.append(k)
    return px[keep]


def _hides(below: Any, above: Any) -> bool:
    """Whether a line drawn on top would hide one it runs along: each part of the lower line
    (its stroke, its markers) is covered by a solid stroke at least as wide or by the same
    marker at least as large. Dashes, dots and a different marker let it show through."""
    solid = above.get_linestyle() in ("-", "solid")
    if _has_stroke(below) and not (solid and above.get_linewidth() >= 0.8 * below.get_linewidth()):
        return False
    if _has_marker(below):
        same = _has_marker(above) and above.get_marker() == below.get_marker()
        if not (same and above.get_markersize() >= 0.8 * below.get_markersize()) and not (
            solid and above.get_linewidth() >= below.get_markersize()
        ):
            return False
    return True


def _under(ax: Any, above: Any, px: np.ndarray, top: np.ndarray) -> float:
    """The share of a line's pixels that lie under another line's stroke or markers."""
    if _has_stroke(above):
        tol = max(1.0, above.get_linewidth() * ax.figure.dpi / 72 / 2)
        return float(np.mean(_distances(px, _thin(top)) <= tol))
    return float(np.mean([np.hypot(*(top - p).T).min() <= 1.0 for p in px]))


def hidden_series(fig: Any, share: float = 0.5) -> list[str]:
    """A series is hidden when at least `share` of its length lies under a line drawn on top
    of it that hides it (`_hides`); a scatter series when as many of its points sit on
    another's."""
    from matplotlib.collections import PathCollection

    problems = []
    for i, ax in enumerate(fig.axes):
        lines = sorted((ln for ln in ax.lines if _is_data_line(ax, ln)), key=Line2D.get_zorder)
        pixels = {id(ln): _line_pixels(ax, ln) for ln in lines}
        for j, low in enumerate(lines):
            for high in lines[j + 1 :]:
                px, top = pixels[id(low)], pixels[id(high)]
                if len(px) < 2 or not len(top) or not _hides(low, high):
                    continue
                under = _under(ax, high, px, top)
                if under >= share:
                    problems.append(
                        f"{_panel(ax, i)}: {low.get_label()!r} is hidden under "
                        f"{high.get_label()!r} along {under:.0%} of its length"
                    )
        dots = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets())]
        for j, low in enumerate(dots):
            for high in dots[j + 1 :]:
                a, b = (c.get_offset_transform().transform(c.get_offsets()) for c in (low, high))
                near = np.array([np.hypot(*(b - p).T).min() for p in a]) <= 1.0
                if near.mean() >= share:
                    problems.append(
                        f"{_panel(ax, i)}: scatter {low.get_label()!r} is hidden under "
                        f"{high.get_label()!r} ({near.mean():.0%} of its points)"
                    )
    return problems


def noisy_numbers(fig: Any) -> list[str]:
    """Numbers printed with float noise (0.30000000000000004) in any text of the figure."""
    from matplotlib.text import Text

    return [
        f"float noise in {t.get_text()!r}"
        for t in fig.findobj(Text)
        if t.get_visible() and FLOAT_NOISE.search(t.get_text())
    ]


def text_problems(fig: Any) -> list[str]:
    """Text a reader cannot read: tick labels of one axis drawn over each other, and any tick
    label, axis label or title cut by the figure's edge."""
    renderer = fig.canvas.get_renderer()
    edge = fig.bbox.padded(1)
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            boxes = [t.get_window_extent(renderer) for t in _tick_labels(axis)]
            if any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])):
                problems.append(f"{_panel(ax, i)}: the {which} tick labels overlap each other")
    for t in _texts(fig):
        e = t.get_window_extent(renderer)
        if e.x0 < edge.x0 or e.x1 > edge.x1 or e.y0 < edge.y0 or e.y1 > edge.y1:
            problems.append(f"the text {t.get_text()!r} is cut by the figure's edge")
    return problems


def readability_problems(fig: Any) -> list[str]:
    """Everything that keeps a reader from reading a figure: a legend over data or labels, a
    numeric axis with fewer than three labelled ticks, tick labels over each other or text cut
    by the edge, a series hidden under another, float noise. Empty for a readable figure; tests/test_plots.py runs it on every shipped figure,
    and `show` on every notebook figure."""
    fig.canvas.draw()
    return (
        legend_problems(fig) + tick_problems(fig) + text_problems(fig) + hidden_series(fig)
        + noisy_numbers(fig)
    )  # fmt: skip


DEPTH_TICKS = [1, 2, 4, 6, 8, 10, 12, 14, 16]


def _depth_ticks(ax: Any, axis: str = "x") -> None:
    """Serving and training depths are integers: tick them as such (on a vertical axis 1, 4,
    8, 12, 16, whose labels do not touch on a short panel)."""
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    ticks = DEPTH_TICKS if axis == "x" else [1, 4, 8, 12, 16]
    (ax.set_xticks if axis == "x" else ax.set_yticks)([t for t in ticks if lo <= t <= hi])


def _plain_log_ticks(ax: Any, axis: str = "y") -> None:
    """A log axis spanning less than a few decades gets at least three ticks labelled as plain
    numbers (0.5, 2, 1e13), not matplotlib's `6.1022x10^0` or no label at all: 1, 2, 5 x 10^n,
    else every integer mantissa, else evenly spaced round numbers."""
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    lo, hi = sorted((lo, hi))
    if lo <= 0 or hi / lo > 1e3:
        return
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.FixedLocator(_log_ticks(lo, hi)))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _plain(v)))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _log_ticks(lo: float, hi: float) -> list[float]:
    """At least three round ticks between lo and hi on a log axis."""
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    for mantissas in ((1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7), range(1, 10)):
        ticks = [m * 10.0**e for e in decades for m in mantissas]
        ticks = [t for t in ticks if lo <= t <= hi]
        if len(ticks) >= 3:
            return ticks
    return _linear_ticks(lo, hi)


def _linear_ticks(lo: float, hi: float) -> list[float]:
    """Three to six round ticks between lo and hi."""
    locator = matplotlib.ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10], min_n_ticks=3)
    return [float(f"{t:.6g}") for t in locator.tick_values(lo, hi) if lo <= t <= hi]


def _plain(v: float) -> str:
    """0.5, 2, 30 as written; large numbers as 2e12 or 7.5e11 (no '+', no padding zeros)."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _plain_large(ax: Any, axis: str) -> None:
    """A linear axis of large numbers (FLOPs) labels each tick in full (7.5e11, 1e12) rather
    than with an offset written apart in the corner ('1e12')."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    if not isinstance(target.get_major_formatter(), matplotlib.ticker.ScalarFormatter):
        return
    lo, hi = target.get_view_interval()
    if max(abs(lo), abs(hi)) >= 1e5:
        target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _plain(v)))


def _enough_ticks(fig: Any) -> bool:
    """Give every numeric axis that shows fewer than three labelled ticks round ones (the
    check is `tick_problems`); returns whether any axis changed."""
    fig.canvas.draw()
    changed = False
    for ax in fig.axes:
        for which, axis, _ in _needs_ticks(ax):
            scale = ax.get_xscale() if which == "x" else ax.get_yscale()
            lo, hi = sorted(axis.get_view_interval())
            if scale == "log" and lo > 0:
                ticks = _log_ticks(lo, hi)
            elif scale == "linear":
                ticks = _linear_ticks(lo, hi)
            else:
                continue
            axis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
            axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _plain(v)))
            changed = True
    return changed


def _crowded(axis: Any, renderer: Any) -> bool:
    boxes = [t.get_window_extent(renderer) for t in _tick_labels(axis)]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def _uncrowd_ticks(fig: Any) -> bool:
    """Fewer ticks on an axis whose labels touch (long labels such as 2.6e12 on a narrow
    panel): fewer bins on a linear axis, every other tick on a fixed one, keeping at least
    three. Returns whether any axis changed."""
    renderer = fig.canvas.get_renderer()
    changed = False
    for ax in fig.axes:
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for bins in (5, 4, 3):
                if not _crowded(axis, renderer):
                    break
                scale = ax.get_xscale() if which == "x" else ax.get_yscale()
                locs = [float(t) for t in axis.get_majorticklocs()]
                if scale == "linear" and not isinstance(
                    axis.get_major_locator(), matplotlib.ticker.FixedLocator
                ):
                    axis.set_major_locator(
                        matplotlib.ticker.MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10])
                    )
                elif len(locs) >= 5:
                    axis.set_major_locator(matplotlib.ticker.FixedLocator(locs[::2]))
                else:
                    break
                changed = True
                fig.canvas.draw()
    return changed


# where a legend may go inside its panel, tried in this order after matplotlib's "best"
LEGEND_SPOTS = ("best", "upper right", "upper left", "lower left", "lower right", "center right",
                "center left", "upper center", "lower center", "center")  # fmt: skip


def _first_clear_spot(fig: Any, legend: Any, spots: tuple[str, ...], renderer: Any) -> bool:
    for loc in spots:
        legend.set_loc(loc)
        if not _legend_clashes(fig, legend, renderer):
            return True
    return False


def _headroom(ax: Any, legend: Any, renderer: Any) -> None:
    """Raise the top of a panel's y-range so that a legend fits above everything it plots."""
    share = legend.get_window_extent(renderer).height / ax.bbox.height + 0.04
    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log":
        top = np.log10(lo) + (np.log10(hi) - np.log10(lo)) / (1 - share)
        ax.set_ylim(lo, 10**top)
    else:
        ax.set_ylim(lo, lo + (hi - lo) / (1 - share))


def _place_legends(fig: Any) -> bool:
    """Move each legend that covers a plotted point, a tick label or a title, or sticks out of
    its panel, to the first spot of `LEGEND_SPOTS` where it covers nothing; failing that, make
    room above the data for it; failing that, put it outside its panel on the right. Returns
    whether the layout must be redone."""
    renderer = fig.canvas.get_renderer()
    relayout = False
    for legend, ax in _legends(fig):
        if ax is None or not _inside_panel(legend, ax):
            continue
        if not _legend_clashes(fig, legend, renderer):
            continue
        if _first_clear_spot(fig, legend, LEGEND_SPOTS, renderer):
            continue
        relayout = True
        if legend.get_window_extent(renderer).height < 0.45 * ax.bbox.height:
            _headroom(ax, legend, renderer)
            fig.canvas.draw()
            if _first_clear_spot(fig, legend, ("upper right", "upper left", "upper center"),
                                 renderer):  # fmt: skip
                continue
        _outside(legend, ax, renderer)
    return relayout


def _outside(legend: Any, ax: Any, renderer: Any) -> None:
    """Put a legend outside its panel: below it when it is wider than half the panel (beside it
    would squeeze the panel), else on its right."""
    if legend.get_window_extent(renderer).width > 0.5 * ax.bbox.width:
        legend.set_loc("upper center")
        axis = ax.xaxis.get_tightbbox(renderer)  # tick labels and the axis label
        drop = (ax.bbox.y0 - axis.y0 + 4) * 72 / ax.figure.dpi  # in points: layout-proof
        below = matplotlib.transforms.offset_copy(ax.transAxes, ax.figure, y=-drop, units="points")
        legend.set_bbox_to_anchor((0.5, 0.0), transform=below)
    else:
        legend.set_loc("upper left")
        legend.set_bbox_to_anchor((1.02, 1.0), transform=ax.transAxes)


def _ticks(fig: Any) -> None:
    """Integer depth ticks, plain labels on short log axes and on axes of large numbers."""
    for ax in fig.axes:
        if ax.get_xlabel().startswith("serving depth"):
            _depth_ticks(ax)
        if ax.get_ylabel().startswith("training depth"):
            _depth_ticks(ax, "y")
        for axis in ("x", "y"):
            scale = ax.get_xscale() if axis == "x" else ax.get_yscale()
            if scale == "log":
                _plain_log_ticks(ax, axis)
            elif scale == "linear":
                _plain_large(ax, axis)


def _finish(fig: Any) -> None:
    """Ticks a reader can read, then a layout in which no legend covers data or labels."""
    _ticks(fig)
    fig.tight_layout()
    if _enough_ticks(fig):
        fig.tight_layout()
    for _ in range(3):  # a legend moved changes the layout: place the others again
        fig.canvas.draw()
        if not _place_legends(fig):
            break
        _ticks(fig)
        fig.tight_layout()
        _enough_ticks(fig)
    fig.canvas.draw()
    if _uncrowd_ticks(fig):
        fig.tight_layout()


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    _finish(fig)
    _check(fig)
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def _group(runs: list[dict], **match: Any) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in runs:
        if all(r.get(k) == v for k, v in match.items()):
            out[r["label"]].append(r)
    return out


def _nll(row: dict) -> list[float]:
    """The NLL a figure plots: fact NLL where the run has it (bios data, the demo), token NLL
    otherwise (text runs, `looped plot --runs`)."""
    return row["fact_nll"] if "fact_nll" in row else row["token_nll"]


def _nll_label(result: dict, short: bool = False) -> str:
    label = result.get("meta", {}).get("nll_label", "token NLL (nats/token)")
    # "fact NLL (nats per fact, held-out templates)" -> "fact NLL (nats per fact)": an axis
    # label must fit the panel's height
    return label.split(" (")[0] if short else label.split(",")[0] + (")" if "," in label else "")


def _main_runs(result: dict) -> list[dict]:
    return [r for r in result["runs"] if "main" in r["group"]]


def _at_full_budget(result: dict, **match: Any) -> dict[str, list[dict]]:
    """The main grid's runs at its largest budget, grouped by schedule label."""
    runs = _main_runs(result)
    return _group(runs, budget=max(r["budget"] for r in runs), **match)


# -- demo figures ----------------------------------------------------------------------------
def fig1_recall(result: dict, path: Path) -> Path:
    """Recalled bits per person across serving depths, one panel per budget (paper Fig. 1)."""
    runs = _main_runs(result)
    budgets = sorted({r["budget"] for r in runs})
    fig, axes = plt.subplots(
        1, len(budgets), figsize=(4.2 * len(budgets), 3.6), sharey=True, squeeze=False
    )
    for ax, budget in zip(axes[0], budgets):
        for i, (label, group) in enumerate(_group(runs, budget=budget).items()):
            _band(
                ax,
                group[0]["depths"],
                [r["bits"] for r in group],
                label,
                _color(label, i),
                marker=_marker(label, i),
                ms=3,
            )
        ax.set_title(f"{budget:.0%} of the full FLOP budget")
        ax.set_xlabel("serving depth K")
    axes[0][0].set_ylabel("recalled bits per person")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.suptitle("Recall across serving depths at matched training compute", y=1.0)
    return _save(fig, path)


def fig2_nll_vs_flops(result: dict, path: Path) -> Path:
    """Left: mean serving-depth NLL against modeled FLOPs; right: NLL minus uniform (Fig. 2)."""
    runs = _main_runs(result)
    top = max(r["budget"] for r in runs)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, group) in enumerate(_group(runs).items()):  # main grid only, no catch-up
        budgets = sorted({r["budget"] for r in group})
        xs = [np.mean([r["flops"] for r in group if r["budget"] == b]) for b in budgets]
        ys = [[np.mean(_nll(r)) for r in group if r["budget"] == b] for b in budgets]
        left.plot(xs, [np.mean(y) for y in ys], marker=_marker(label, i), color=_color(label, i),
                  label=label, **_dashes(label))  # fmt: skip
        left.vlines(
            xs, [min(y) for y in ys], [max(y) for y in ys], color=_color(label, i), alpha=0.5
        )
    left.set_xscale("log")
    left.set_yscale("log")
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_xlabel("modeled training FLOPs")
    left.set_ylabel(f"mean {_nll_label(result, True)} over depths 1..16")
    left.set_title("Serving quality against training compute")
    left.legend(fontsize=8)
    full = _group(runs, budget=top)
    uniform = full.get(LABELS[UNIFORM])
    if uniform:
        base = np.mean([_nll(r) for r in uniform], axis=0)
        for i, (label, group) in enumerate(full.items()):
            if label == LABELS[UNIFORM]:
                continue
            _band(
                right,
                group[0]["depths"],
                [np.asarray(_nll(r)) - base for r in group],
                label,
                _color(label, i),
                marker=_marker(label, i),
                ms=3,
            )
        right.axhline(0, color="k", lw=0.8)
        right.set_xlabel("serving depth K")
        right.set_ylabel(f"{_nll_label(result, True)} minus uniform's\n(above 0: worse)")
        right.set_title(f"Against uniform, {top:.0%} of the budget")
        right.legend(fontsize=8)
    else:  # no uniform run to compare against (`looped plot --runs` on other schedules)
        right.remove()
    return _save(fig, path)


def fig3_loss(result: dict, path: Path) -> Path:
    """Training loss over steps with the switch marked, full and terminal (paper Fig. 3)."""
    full = _at_full_budget(result, seed=0)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    switch = None
    for i, (label, group) in enumerate(full.items()):
        curve = np.asarray(group[0]["curve"], dtype=float)
        smooth = _smooth(curve[:, 1])
        for ax in (left, right):
            ax.plot(curve[:, 0], smooth, color=_color(label, i), label=label, lw=1.2,
                    **_dashes(label))  # fmt: skip
        if group[0].get("switch_step"):
            switch = group[0]["switch_step"]
            tail = curve[:, 0] >= switch * 0.9
            right.set_xlim(curve[tail, 0].min(), curve[:, 0].max())
            right.set_ylim(0, max(smooth[tail].max() * 1.1, 0.05))
    for ax, title in ((left, "full run"), (right, "terminal phase")):
        if switch:
            ax.axvline(switch, color="k", ls="--", lw=0.8, label="switch to uniform")
        ax.set_xlabel("optimizer step")
        ax.set_title(f"Training NLL, {title}")
    left.set_yscale("log")
    left.set_ylabel("training loss (nats/token, smoothed)")
    left.legend(fontsize=8)
    return _save(fig, path)


def _smooth(y: np.ndarray, window: int = 9) -> np.ndarray:
    if len(y) < window:
        return y
    kernel = np.ones(window) / window  # trailing mean: a spike shows after the switch, not before
    padded = np.pad(y, (window - 1, 0), mode="edge")
    return np.convolve(padded, kernel, mode="valid")


def fig5_specialisation(result: dict, path: Path) -> Path:
    """Recall across serving depths for fixed K=1,2,4,8, normalised by each peak (Fig. 5)."""
    runs = sorted(
        (r for r in result["runs"] if "depth" in r["group"]),
        key=lambda r: int(r["schedule"].split(":")[1]),
    )
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    colors = sns.color_palette("viridis", len(runs))
    for i, (color, r) in enumerate(zip(colors, runs)):
        k = int(r["schedule"].split(":")[1])
        bits = np.asarray(r["bits"])
        marker = ("o", "s", "^", "D", "v", "P")[i % 6]  # models that recall nothing coincide
        left.plot(
            r["depths"],
            bits / max(bits.max(), 1e-9),
            marker=marker,
            ms=3,
            color=color,
            label=f"trained at K={k}",
        )
        left.axvline(k, color=color, ls=":", lw=0.8)
        right.plot(r["depths"], _nll(r), marker=marker, ms=3, color=color,
                   label=f"trained at K={k}")  # fmt: skip
    left.set_ylabel("recall / peak recall")
    left.set_title("Recall, normalised by each model's peak")
    right.set_yscale("log")
    right.set_ylabel(_nll_label(result))
    right.set_title("NLL across serving depths")
    for ax in (left, right):
        ax.set_xlabel("serving depth K")
        ax.legend(fontsize=8)
    return _save(fig, path)


def fig7_schedules(result: dict, path: Path) -> Path:
    """The depth each step trains at: uniform vs fixed-first (paper Fig. 7)."""
    full = _at_full_budget(result, seed=0)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, label in zip(axes, (LABELS[UNIFORM], LABELS[FIXED_FIRST])):
        if label not in full:
            continue
        curve = np.asarray(full[label][0]["curve"], dtype=float)
        ax.scatter(curve[:, 0], curve[:, 2], s=2, color=_color(label), alpha=0.6)
        if full[label][0].get("switch_step"):
            ax.axvline(full[label][0]["switch_step"], color="k", ls="--", lw=0.8)
        ax.set_title(label)
        ax.set_xlabel("optimizer step")
    axes[0].set_ylabel("training depth K")
    return _save(fig, path)


def fig8_nll_by_depth(result: dict, path: Path) -> Path:
    """Next-token NLL across serving depths with seed bands: full range and K>=4 (Fig. 8)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (label, group) in enumerate(_at_full_budget(result).items()):
        depths = group[0]["depths"]
        marker = _marker(label, i)
        _band(left, depths, [_nll(r) for r in group], label, _color(label, i), marker=marker, ms=3)
        keep = [j for j, k in enumerate(depths) if k >= 4]
        _band(
            right,
            [depths[j] for j in keep],
            [[_nll(r)[j] for j in keep] for r in group],
            label,
            _color(label, i),
            marker=marker,
            ms=3,
        )
    left.set_yscale("log")
    left.set_title("All serving depths")
    right.set_title("K = 4..16")
    for ax in (left, right):
        ax.set_xlabel("serving depth K")
        ax.set_ylabel(_nll_label(result))
    left.legend(fontsize=8)
    return _save(fig, path)


def fig_finish(result: dict, path: Path) -> Path:
    """Fixed-first before its switch and after its uniform finish, beside uniform (seed 0)."""
    full = _at_full_budget(result, seed=0)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ff = full.get(LABELS[FIXED_FIRST], [])
    if ff and ff[0].get("pre_switch"):
        r, pre = ff[0], ff[0]["pre_switch"]
        color = _color(FIXED_FIRST)
        ax.plot(pre["depths"], _nll(pre), "o--", color=color, alpha=0.6, ms=3,
                label=f"fixed-first, before the switch (step {r['switch_step']})")  # fmt: skip
        ax.plot(r["depths"], _nll(r), "o-", color=color, ms=3,
                label=f"fixed-first, after the finish (step {r['steps']})")  # fmt: skip
    for r in full.get(LABELS[UNIFORM], [])[:1]:
        ax.plot(r["depths"], _nll(r), "s:", color=_color(UNIFORM), ms=3,
                label=f"{LABELS[UNIFORM]}, end (step {r['steps']})")  # fmt: skip
    ax.axvline(4, color="k", ls=":", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("serving depth K")
    ax.set_ylabel(_nll_label(result))
    ax.set_title("What the finishing phase does (seed 0, full budget)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def fig_two_hop(result: dict, path: Path) -> Path:
    """Two-hop recall (employer -> city) across serving depths: where extra loops can matter."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for i, (label, group) in enumerate(_at_full_budget(result).items()):
        if "two_hop_acc" in group[0]:
            _band(
                ax,
                group[0]["depths"],
                [r["two_hop_acc"] for r in group],
                label,
                _color(label, i),
                marker=_marker(label, i),
                ms=3,
            )
    for r in (r for r in result["runs"] if r["group"] == "depth" and "two_hop_acc" in r):
        ax.plot(r["depths"], r["two_hop_acc"], ls=":", lw=1, label=r["label"])
    ax.set_xlabel("serving depth K")
    ax.set_ylabel("two-hop exact-match accuracy")
    ax.set_title("Two-hop recall across serving depths")
    ax.legend(fontsize=7)
    return _save(fig, path)


def demo_figures(result: dict, out_dir: str | Path) -> list[Path]:
    """Every demo figure into out_dir; returns the paths written."""
    _style()
    out = Path(out_dir)
    has_bits = all("bits" in r for r in result["runs"])
    paths = [
        fig2_nll_vs_flops(result, out / "fig2_nll_vs_flops.png"),
        fig3_loss(result, out / "fig3_loss_trajectory.png"),
        fig7_schedules(result, out / "fig7_schedules.png"),
        fig8_nll_by_depth(result, out / "fig8_nll_by_depth.png"),
    ]
    if has_bits:
        paths.insert(0, fig1_recall(result, out / "fig1_recall_bits.png"))
        if any("depth" in r["group"] for r in result["runs"]):
            paths.append(fig5_specialisation(result, out / "fig5_depth_specialisation.png"))
        if any(r.get("pre_switch") for r in result["runs"]):
            paths.append(fig_finish(result, out / "finishing_phase.png"))
        if any("two_hop_acc" in r for r in result["runs"]):
            paths.append(fig_two_hop(result, out / "two_hop_recall.png"))
    return paths


# -- figures from run directories ------------------------------------------------------------
def load_runs(paths: Iterable[str | Path]) -> list[dict]:
    """Rows like the demo's from run directories (searched recursively for metrics.jsonl)."""
    rows = []
    for root in paths:
        root = Path(root)
        found = (
            [root]
            if (root / "metrics.jsonl").is_file()
            else sorted(p.parent for p in root.rglob("metrics.jsonl"))
        )
        for run in found:
            rows.append(_run_row(run))
    if not rows:
        raise UserError(
            f"no metrics.jsonl under {', '.join(map(str, paths))}; pass run directories written by `looped train`"
        )
    return rows


def _run_row(run: Path) -> dict:
    from omegaconf import OmegaConf

    from looped.eval.evaluate import token_nll_of

    cfg = OmegaConf.load(run / "config.yaml")
    records = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a live or crashed run
    train = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    row: dict[str, Any] = {
        "name": run.name, "schedule": str(cfg.schedule), "label": paper.label(str(cfg.schedule)), "seed": int(cfg.seed),
        "budget": float(cfg.budget_frac or 1.0), "group": "main",
        "curve": [[r["step"], r["loss"], r["depth"]] for r in train],
        "flops": train[-1]["flops"] if train else 0.0,
    }  # fmt: skip
    summary = run / "summary.json"
    if summary.is_file():
        row["switch_step"] = json.loads(summary.read_text()).get("switch_step")
    if evals:
        last = evals[-1]
        token_nll = token_nll_of(last)
        depths = sorted(int(k) for k in token_nll)
        row["depths"], row["token_nll"] = depths, [token_nll[str(k)] for k in depths]
    return row


def runs_figures(run_dirs: Iterable[str | Path], out_dir: str | Path) -> list[Path]:
    """Fig. 2, 3 and 8 analogs from run directories (their last evaluation and training curves)."""
    _style()
    rows = [r for r in load_runs(run_dirs) if "token_nll" in r]
    if not rows:
        raise UserError(
            "the runs have no evaluation records yet; let them reach an eval_interval or finish"
        )
    out = Path(out_dir)
    result = {"runs": rows}
    paths = [fig8_nll_by_depth(result, out / "fig8_nll_by_depth.png")]
    paths.append(fig2_nll_vs_flops(result, out / "fig2_nll_vs_flops.png"))
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(rows):
        curve = np.asarray(r["curve"], dtype=float)
        if len(curve):
            ax.plot(
                curve[:, 0],
                _smooth(curve[:, 1]),
                label=f"{r['label']} s{r['seed']}",
                color=_color(r["label"], i),
                lw=1,
                **_dashes(r["label"]),
            )
        if r.get("switch_step"):
            ax.axvline(r["switch_step"], color=_color(r["label"], i), ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss (smoothed)")
    ax.set_title("Training NLL; vertical lines mark switches")
    ax.legend(fontsize=7)
    paths.append(_save(fig, out / "fig3_loss_trajectory.png"))
    return paths


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="looped plot", description="the paper's figures from run directories"
    )
    parser.add_argument(
        "--runs", nargs="+", required=True, help="run directories, or folders holding them"
    )
    parser.add_argument(
        "--out", default="figures/runs", help="where to write PNGs (default figures/runs)"
    )
    parser.add_argument(
        "--demo-json",
        action="store_true",
        help="--runs is a demo.json file: redraw the demo figures",
    )
    args = parser.parse_args(argv)
    matplotlib.use(
        "Agg"
    )  # files only; importing this module leaves notebooks' inline backend alone
    if args.demo_json:
        paths = demo_figures(json.loads(Path(args.runs[0]).read_text()), args.out)
    else:
        paths = runs_figures(args.runs, args.out)
    for p in paths:
        print(p)
    return 0


def fig_architecture(depth: int = 4) -> Any:
    """The paper's Fig. 6 as code draws it: P once, the same block A applied `depth` times with
    the embedding injected from the second loop on, H once. Every A box is the same weights."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    _style()
    boxes = ["P"] + ["A"] * depth + ["H"]
    fig, ax = plt.subplots(figsize=(1.25 * len(boxes) + 1.2, 2.4))
    colors = {"P": "#8da0cb", "A": "#66c2a5", "H": "#fc8d62"}
    for i, name in enumerate(boxes):
        ax.add_patch(FancyBboxPatch((i + 0.2, 0.15), 0.6, 0.7, boxstyle="round,pad=0.02",
                                    fc=colors[name], ec="k", lw=0.8))  # fmt: skip
        ax.text(i + 0.5, 0.5, name if name != "A" else f"A\n(k={i})", ha="center", va="center")
        ax.add_patch(FancyArrowPatch((i - 0.2, 0.5), (i + 0.2, 0.5), arrowstyle="-|>",
                                     mutation_scale=12, lw=1.2, color="k", shrinkA=0, shrinkB=0))  # fmt: skip
    for k in range(2, depth + 1):  # input injection: e = P(x) re-enters loops 2..K
        ax.add_patch(FancyArrowPatch((0.5, 0.85), (k + 0.5, 0.85), connectionstyle="arc3,rad=-0.25",
                                     arrowstyle="-|>", mutation_scale=8, lw=0.6, color="0.4"))  # fmt: skip
    ax.add_patch(FancyArrowPatch((len(boxes) - 0.2, 0.5), (len(boxes) + 0.2, 0.5),
                                 arrowstyle="-|>", mutation_scale=12, lw=1.2, color="k",
                                 shrinkA=0, shrinkB=0))  # fmt: skip
    ax.text(-0.25, 0.5, "tokens", ha="right", va="center")
    ax.text(len(boxes) + 0.25, 0.5, "logits", ha="left", va="center")
    ax.set_xlim(-1.3, len(boxes) + 0.9)
    ax.set_ylim(-0.1, 1.9)
    ax.axis("off")
    ax.set_title(
        f"$P \\to A^{{{depth}}} \\to H$: one block's weights, applied {depth} times "
        "(grey: the embedding e injected)"
    )
    return fig
