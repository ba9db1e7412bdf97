"""How the studies' figures are finished on top of `looped.plotting`: readable ticks and legends
that cover nothing; `save` / `show` refuse a figure that fails `looped.studies.report.checks`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.transforms
import numpy as np
from matplotlib import ticker

from looped import plotting
from looped.studies.report import checks


def one_line_where_they_coincide(ax: Any) -> list[str]:
    """Where two series coinciding is the finding: each pair a reader cannot tell apart
    (`checks.coinciding_pairs`, over the same x) drawn as one line, their mean, shaded between
    them, the legend naming both; the labels merged. Call it before the legend."""
    ax.figure.canvas.draw()  # the pixels the check measures
    merged = []
    while pairs := [(a, b) for a, b, _ in checks.coinciding_pairs(ax) if _same_x(a, b)]:
        a, b = pairs[0]
        (x, ya), yb = a.get_data(), np.asarray(b.get_ydata(), dtype=float)
        ya = np.asarray(ya, dtype=float)
        a.set_ydata((ya + yb) / 2)
        a.set_label(f"{a.get_label()} and {b.get_label()}\n(drawn as one line: they coincide)")
        low, high = np.minimum(ya, yb), np.maximum(ya, yb)
        ax.fill_between(x, low, high, color=a.get_color(), alpha=0.3, lw=0)
        plotting.key(ax, "shading", "what separates two series drawn as one line")
        b.remove()
        merged.append(a.get_label())
    return merged


def _same_x(a: Any, b: Any) -> bool:
    xa, xb = (np.asarray(line.get_xdata(), dtype=float) for line in (a, b))
    return xa.shape == xb.shape and bool(np.allclose(xa, xb))


def show(fig: Any) -> None:
    """Show a notebook's figure once `checked`: a blank panel or a legend over data is a bug."""
    checked(fig)
    plt.show()


def checked(fig: Any) -> Any:
    """The figure finished, refused if a panel is empty, `readability_problems` finds any, or
    its text is too small in a notebook's output area (`checks.NOTEBOOK_WIDTH_PX`)."""
    finish(fig)
    checks.refuse_empty(fig)
    small = checks.small_text(fig, fig.dpi, checks.NOTEBOOK_WIDTH_PX)
    if problems := checks.readability_problems(fig) + small:
        plt.close(fig)
        raise ValueError("figure is hard to read: " + "; ".join(problems))
    return fig


def chosen_ticks(axis: Any, at: list[float]) -> None:
    """Ticks a figure chose itself (e.g. the lengths it trained), labelled plainly; `finish`
    keeps them where it would round a log axis's ticks (it may still thin crowded ones)."""
    axis.set_major_locator(ticker.FixedLocator(at))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    axis.set_minor_locator(ticker.NullLocator())
    axis.looped_chosen = True


def _round_ticks(axis: Any) -> bool:
    """Round ticks with plain labels (0.5, 2, 1e13, not `6.1022x10^0`); whether it could."""
    lo, hi = sorted(axis.get_view_interval())
    log, linear = axis.get_scale() == "log" and lo > 0, axis.get_scale() == "linear"
    if log or linear:
        ticks = _log_ticks(lo, hi) if log else _linear_ticks(lo, hi)
        axis.set_major_locator(ticker.FixedLocator(ticks))
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))
    return log or linear


def _log_ticks(lo: float, hi: float) -> list[float]:
    """At least three round ticks between lo and hi on a log axis, the outer ones within a
    factor 1.5 of the ends where a finer set allows: a dip near the bottom gets a label."""
    decades = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    found = []
    for mantissas in ((1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7), range(1, 10)):
        ticks = [m * 10.0**e for e in decades for m in mantissas]
        ticks = [t for t in ticks if lo <= t <= hi]
        found = found or (ticks if len(ticks) >= 3 else [])
        if len(ticks) >= 3 and ticks[0] <= 1.5 * lo and ticks[-1] >= hi / 1.5:
            return ticks
    return found or _linear_ticks(lo, hi)


def _linear_ticks(lo: float, hi: float) -> list[float]:
    """Three to six round ticks between lo and hi."""
    locator = ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10], min_n_ticks=3)
    return [float(f"{t:.6g}") for t in locator.tick_values(lo, hi) if lo <= t <= hi]


def plain(v: float) -> str:
    """0.5, 2, 30 as written; large numbers as 2e12 or 7.5e11 (no '+', no padding zeros)."""
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:g}"
    mantissa, exponent = f"{v:.2e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def _enough_ticks(fig: Any) -> bool:
    """Round ticks on every numeric axis with under three labelled ones; whether any changed."""
    fig.canvas.draw()
    changed = False
    for ax in fig.axes:
        for _, axis, _ in checks.needs_ticks(ax):
            changed |= _round_ticks(axis)
    return changed


def _uncrowd_ticks(fig: Any) -> bool:
    """Fewer ticks where labels touch (2.6e12 on a narrow panel); whether any axis changed."""
    renderer = fig.canvas.get_renderer()
    changed = False
    for axis in (axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)):
        for bins in (5, 4, 3):
            if not checks.crowded(axis, renderer):
                break
            locs = [float(t) for t in axis.get_majorticklocs()]
            fixed = isinstance(axis.get_major_locator(), ticker.FixedLocator)
            if axis.get_scale() == "linear" and not fixed:
                axis.set_major_locator(ticker.MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]))
            elif len(locs) >= 5:
                axis.set_major_locator(ticker.FixedLocator(locs[::2]))
            else:
                break
            changed = True
            fig.canvas.draw()
    return changed


# where a legend may go inside its panel, tried in this order after matplotlib's "best"
LEGEND_SPOTS = ("best", "upper right", "upper left", "lower left", "lower right", "center right",
                "center left", "upper center", "lower center", "center")  # fmt: skip
ABOVE_DATA = ("upper right", "upper left", "upper center")  # once the y-range made room


def _first_clear_spot(fig: Any, legend: Any, spots: tuple[str, ...], renderer: Any) -> bool:
    for loc in spots:
        legend.set_loc(loc)
        if not checks.legend_clashes(fig, legend, renderer):
            return True
    return False


def _headroom(ax: Any, legend: Any, renderer: Any) -> None:
    """Raise the top of a panel's y-range so that a legend fits above everything it plots."""
    share = legend.get_window_extent(renderer).height / ax.bbox.height + 0.04
    scale = ax.yaxis.get_transform()  # linear or log: the share is of the panel's height
    lo, hi = scale.transform(ax.get_ylim())
    ax.set_ylim(top=float(scale.inverted().transform(lo + (hi - lo) / (1 - share))))


def place_legends(fig: Any) -> bool:
    """Move each legend that covers data or text to a clear spot; whether to redo the layout."""
    renderer = fig.canvas.get_renderer()
    relayout = False
    for legend, ax in checks.legends(fig):
        if ax is None or not checks.inside_panel(legend, ax):
            continue
        if not checks.legend_clashes(fig, legend, renderer):
            continue
        if _first_clear_spot(fig, legend, LEGEND_SPOTS, renderer):
            continue
        relayout = True
        if legend.get_window_extent(renderer).height < 0.45 * ax.bbox.height:
            ylim = ax.get_ylim()
            _headroom(ax, legend, renderer)
            fig.canvas.draw()
            if _first_clear_spot(fig, legend, ABOVE_DATA, renderer):
                continue
            ax.set_ylim(ylim)  # outside after all: no empty room left above the data
        _outside(legend, ax, renderer)
    return relayout


def _outside(legend: Any, ax: Any, renderer: Any) -> None:
    """A legend outside its panel: below when wider than half the panel, else on its right."""
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
    """Integer depth ticks (fewer on a short vertical axis), plain labels on short log axes and
    on axes of large numbers."""
    for ax in fig.axes:
        depths = (
            (ax.xaxis, "serving depth", plotting.DEPTH_TICKS),
            (ax.yaxis, "training depth", [1, 4, 8, 12, 16]),
        )
        for axis, depth, ticks in depths:
            lo, hi = sorted(axis.get_view_interval())
            if axis.get_label_text().startswith(depth):
                axis.set_ticks([t for t in ticks if lo <= t <= hi])
            elif getattr(axis, "looped_chosen", False):
                continue
            elif axis.get_scale() == "log" and lo > 0 and hi / lo <= 1e3:  # under three decades
                _round_ticks(axis)
                axis.set_minor_formatter(ticker.NullFormatter())
            elif axis.get_scale() == "linear" and max(abs(lo), abs(hi)) >= 1e5:
                # large numbers (FLOPs) in full at each tick (7.5e11), not as an offset
                if isinstance(axis.get_major_formatter(), ticker.ScalarFormatter):
                    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: plain(v)))


def finish(fig: Any) -> None:
    """Keys, ticks a reader can read, then a layout in which no legend covers data or labels."""
    plotting.write_keys(fig)
    _ticks(fig)
    plotting.layout(fig)
    if _enough_ticks(fig):
        plotting.layout(fig)
    for _ in range(3):  # a legend moved changes the layout: place the others again
        fig.canvas.draw()
        if not place_legends(fig):
            break
        _ticks(fig)
        plotting.layout(fig)
        _enough_ticks(fig)
    fig.canvas.draw()
    if _uncrowd_ticks(fig):
        plotting.layout(fig)


def save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    finish(fig)
    checks.refuse_empty(fig)
    fig.savefig(path, dpi=plotting.SAVED_DPI)
    plt.close(fig)
    return path
