"""The figure linter: what a reader must be able to see in a figure, checked in display
coordinates on the matplotlib Figure as `looped.plotting.finish` lays it out. Only the tests use
it: tests/test_figures.py runs it on every shipped figure (redrawn from results/*.json) and
tests each check against a figure that breaks it."""

from __future__ import annotations

import re
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.container import BarContainer
from matplotlib.lines import Line2D
from matplotlib.text import Text

from looped.plotting import SAVED_DPI


def empty_panels(fig: Any) -> list[str]:
    """Titles of the panels that show no data in view (an axhline is a reference, not data)."""
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


def refuse_empty(fig: Any) -> None:
    if empty := empty_panels(fig):
        plt.close(fig)
        raise ValueError(f"figure has panels without data: {', '.join(map(repr, empty))}")


# a number as a tick label writes it: 0.5, -2, 1e12, 40%, or mathtext 10^{3}
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?%?$")
_MATHTEXT_POWER = re.compile(r"^\$\\mathdefault\{(\d+(\.\d+)?\\times)?\d*\^\{-?\d+\}\}\$$")
# float noise: what binary floats print as (0.0012000000000000001), not a chosen format (1.000)
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
    """Points every `step` display pixels along a polyline, its vertices included."""
    out = [points[:1]]
    for a, b in zip(points[:-1], points[1:]):
        n = max(1, int(np.ceil(np.hypot(*(b - a)) / step)))
        out.append(a + (b - a) * (np.arange(1, n + 1)[:, None] / n))
    return np.concatenate(out)


def _inside(ax: Any, px: np.ndarray) -> np.ndarray:
    box = ax.get_window_extent().padded(0.5)
    return px[((px >= box.min) & (px <= box.max)).all(axis=1)]


def _line_pixels(ax: Any, line: Any) -> np.ndarray:
    """A line in display pixels (vertices and points along its stroke) inside its panel."""
    xy = np.asarray(line.get_xydata(), dtype=float)
    xy = xy[np.isfinite(xy).all(axis=1)]
    if not len(xy):
        return np.empty((0, 2))
    px = line.get_transform().transform(xy)  # data coordinates, or an axhline's axes-and-data
    if _has_stroke(line) and len(px) > 1:
        px = _along(px)
    return _inside(ax, px)


def _data_pixels(ax: Any) -> list[tuple[str, np.ndarray]]:
    """(name, display points) of everything a panel plots and of each reference line with a
    legend entry (an axhline or axvline the reader is asked to compare against): a legend may
    cover none of it. Bands are shading, not points."""
    lines = [ln for ln in ax.lines if _is_data_line(ax, ln) or (ln.get_visible() and _labelled(ln))]
    found = [(ln.get_label(), _line_pixels(ax, ln)) for ln in lines]
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
            found.append(("bar", _inside(ax, _along(p.get_verts()))))  # its outline
    return found


def _shown_axes(fig: Any) -> list[tuple[int, Any]]:
    return [(i, ax) for i, ax in enumerate(fig.axes) if ax.get_visible() and ax.axison]


def _texts(fig: Any) -> list[Any]:
    """Every text a legend must leave readable: tick labels, axis labels, titles."""
    texts = [t for t in fig.texts if t.get_visible() and t.get_text()]
    if getattr(fig, "_suptitle", None) is not None:
        texts.append(fig._suptitle)
    for _, ax in _shown_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            shown = (axis.label, axis.get_offset_text())
            texts += tick_labels(axis) + [t for t in shown if t.get_visible() and t.get_text()]
        texts += [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text()]
    return texts


def legends(fig: Any) -> list[tuple[Any, Any]]:
    """(legend, its panel or None) for every legend of the figure."""
    found = [(ax.get_legend(), ax) for ax in fig.axes if ax.get_legend() is not None]
    return found + [(leg, None) for leg in fig.legends]


def inside_panel(legend: Any, ax: Any) -> bool:
    return bool(np.allclose(legend.get_bbox_to_anchor().bounds, ax.bbox.bounds))


def _outside(box: Any, frame: Any) -> bool:
    return box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1


def legend_clashes(fig: Any, legend: Any, renderer: Any) -> list[str]:
    """What a legend covers (points, tick labels, titles), or that it sticks out of its panel."""
    box = legend.get_window_extent(renderer).padded(-1)
    clashes = []
    owner = legend.axes
    if owner is not None and inside_panel(legend, owner) and _outside(box, owner.bbox):
        clashes.append("sticks out of its panel")
    if _outside(box, fig.bbox):  # the saved picture would cut it
        clashes.append("runs off the figure")
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for name, px in _data_pixels(ax):
            if covered := box.count_contains(px):
                clashes.append(f"covers {covered} points of {name!r} in {_panel(ax, i)}")
    for t in _texts(fig):
        if box.overlaps(t.get_window_extent(renderer)):
            clashes.append(f"covers the text {t.get_text()!r}")
    return clashes


def legend_problems(fig: Any) -> list[str]:
    """A legend must cover no plotted point, tick label or title."""
    renderer = fig.canvas.get_renderer()
    return [
        f"legend of {_panel(ax, fig.axes.index(ax)) if ax else 'the figure'} {clash}"
        for legend, ax in legends(fig)
        for clash in legend_clashes(fig, legend, renderer)
    ]


def tick_labels(axis: Any) -> list[Any]:
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


def crowded(axis: Any, renderer: Any) -> bool:
    """Whether two neighbouring tick labels of an axis overlap."""
    boxes = [t.get_window_extent(renderer) for t in tick_labels(axis)]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def _shares_labels(ax: Any, which: str) -> bool:
    """Whether another panel labels this shared axis (sharey's inner panels)."""
    group = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
    return any(
        sib is not ax and tick_labels(getattr(sib, f"{which}axis"))
        for sib in group.get_siblings(ax)
    )


def needs_ticks(ax: Any) -> list[tuple[str, Any, list[str]]]:
    """(x or y, axis, labels) of each numeric axis with under three labelled ticks."""
    if not ax.get_visible() or not ax.axison or getattr(ax, "_colorbar", None):
        return []
    found = []
    for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        labels = [t.get_text() for t in tick_labels(axis)]
        if len(labels) >= 3 or (labels and not all(_is_number(t) for t in labels)):
            continue
        if not labels and _shares_labels(ax, which):
            continue
        found.append((which, axis, labels))
    return found


def tick_problems(fig: Any) -> list[str]:
    return [
        f"{_panel(ax, i)}: the {which} axis has {len(labels)} labelled ticks "
        f"({', '.join(labels) or 'none'}); a reader needs at least 3"
        for i, ax in enumerate(fig.axes)
        for which, _, labels in needs_ticks(ax)
    ]


def _distances(points: np.ndarray, polyline: np.ndarray) -> np.ndarray:
    """Each point's distance to the nearest segment of a polyline (two vertices or more)."""
    a, ab = polyline[:-1], np.diff(polyline, axis=0)
    length2 = np.maximum(np.einsum("mk,mk->m", ab, ab), 1e-12)
    t = np.einsum("pmk,mk->pm", points[:, None, :] - a[None], ab) / length2
    nearest = a[None] + np.clip(t, 0, 1)[..., None] * ab[None]
    return np.hypot(*(points[:, None, :] - nearest).transpose(2, 0, 1)).min(axis=1)


def _thin(px: np.ndarray, step: float = 1.0) -> np.ndarray:
    keep = [0]
    for k in range(1, len(px)):
        if np.hypot(*(px[k] - px[keep[-1]])) >= step:
            keep.append(k)
    return px[keep]


def _hides(below: Any, above: Any) -> bool:
    """Whether a line on top hides one it runs along (dashes or another marker show through)."""
    solid = above.get_linestyle() in ("-", "solid")
    if _has_stroke(below) and not (solid and above.get_linewidth() >= 0.8 * below.get_linewidth()):
        return False
    if _has_marker(below):
        same = _has_marker(above) and above.get_marker() == below.get_marker()
        covers = same and above.get_markersize() >= 0.8 * below.get_markersize()
        return covers or (solid and above.get_linewidth() >= below.get_markersize())
    return True


def noisy_numbers(fig: Any) -> list[str]:
    """Numbers printed with float noise (0.30000000000000004) in any text of the figure."""
    return [
        f"float noise in {t.get_text()!r}"
        for t in fig.findobj(Text)
        if t.get_visible() and FLOAT_NOISE.search(t.get_text())
    ]


def text_problems(fig: Any) -> list[str]:
    """Tick labels of one axis over each other, and text cut by the figure's edge."""
    renderer = fig.canvas.get_renderer()
    problems = [
        f"{_panel(ax, i)}: the {which} tick labels overlap each other"
        for i, ax in _shown_axes(fig)
        for which, axis in (("x", ax.xaxis), ("y", ax.yaxis))
        if crowded(axis, renderer)
    ]
    return problems + [
        f"the text {t.get_text()!r} is cut by the figure's edge"
        for t in _texts(fig)
        if _outside(t.get_window_extent(renderer), fig.bbox.padded(1))
    ]


# How wide a notebook shows a figure, measured in JupyterLab at 1280x900 in `make lab`'s layout
# (headless Chromium, the element's width); the widths the docs' pages give a figure are
# measured by tests/test_figures.py, which checks every shipped figure there.
NOTEBOOK_WIDTH_PX = 848  # a notebook's image output (`plotting.show`, IPython's Image)
SMALLEST_TEXT_PX = 9  # the smallest text a reader can read there, in screen pixels


def text_px(fig: Any, dpi: float = SAVED_DPI, shown: float = NOTEBOOK_WIDTH_PX) -> dict[str, float]:
    """Each text's height in screen pixels once the figure, rendered at `dpi` (a saved figure's
    or a notebook's inline dpi), is shown `shown` pixels wide (narrower: at its own size)."""
    scale = min(1.0, shown / (fig.get_figwidth() * dpi)) * dpi / 72  # screen pixels per point
    texts = _texts(fig) + [t for ax in fig.axes for t in ax.texts if t.get_visible()]
    for legend, _ in legends(fig):
        texts += [*legend.get_texts(), legend.get_title()]
    sizes: dict[str, float] = {}
    for t in texts:
        if t.get_text().strip():
            sizes[t.get_text()] = min(sizes.get(t.get_text(), np.inf), t.get_fontsize() * scale)
    return sizes


def small_text(fig: Any, dpi: float = SAVED_DPI, shown: float = NOTEBOOK_WIDTH_PX) -> list[str]:
    """Text under `SMALLEST_TEXT_PX` pixels at the width the figure is shown (`text_px`)."""
    small = {text: px for text, px in text_px(fig, dpi, shown).items() if px < SMALLEST_TEXT_PX}
    return [
        f"the text {text!r} is {px:.1f} px at {shown:.0f} px wide (under {SMALLEST_TEXT_PX:g})"
        for text, px in sorted(small.items(), key=lambda item: item[1])[:3]
    ]


COINCIDE_SHARE = 0.6  # more of their shared range than this, and two series read as one
HIDDEN_SHARE = 0.5  # this much of its shared range under a series drawn over it, and it is lost


def _half_width(ax: Any, mark: Any) -> float:
    """Half the thickness a series is drawn with, in display pixels: a line's stroke, else its
    marker; a scatter's dots are their centres."""
    if isinstance(mark, PathCollection):
        return 0.0
    points = mark.get_linewidth() if _has_stroke(mark) else mark.get_markersize()
    return points * ax.figure.dpi / 72 / 2


def _near(ax: Any, a: Any, b: Any, pa: np.ndarray, pb: np.ndarray, reach: float) -> float | None:
    """The share of a's drawn points, within the x-range both series span, at most `reach`
    display pixels from b's stroke (else from its nearest marker or dot)."""
    lo, hi = max(pa[:, 0].min(), pb[:, 0].min()), min(pa[:, 0].max(), pb[:, 0].max())
    mine = pa[(pa[:, 0] >= lo - 0.5) & (pa[:, 0] <= hi + 0.5)]
    if len(mine) < (1 if isinstance(a, PathCollection) else 2):
        return None
    if isinstance(b, Line2D) and _has_stroke(b) and len(pb) > 1:
        distance = _distances(mine, pb)
    else:
        distance = np.array([np.hypot(*(pb - p).T).min() for p in mine])
    return float(np.mean(distance <= reach))


def _series(ax: Any, labelled: bool = False) -> list[list[tuple[Any, np.ndarray]]]:
    """A panel's lines (`labelled`: those with a legend entry only) in the order drawn, then
    its scatters, as (series, its display points)."""
    lines = [ln for ln in ax.lines if _is_data_line(ax, ln) and (_labelled(ln) or not labelled)]
    kinds = [[(ln, _line_pixels(ax, ln)) for ln in sorted(lines, key=Line2D.get_zorder)]]
    if not labelled:
        dots = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_visible()]
        at = [(c, c.get_offset_transform().transform(c.get_offsets())) for c in dots]
        kinds.append([(c, _inside(ax, px)) for c, px in at if len(px)])
    return [[(s, _thin(px)) for s, px in kind if len(px)] for kind in kinds]


def _apart(ax: Any, labelled: bool = False) -> list[tuple]:
    """(below, above, their points, share) for each two series of one kind in a panel, the one
    drawn first below; share: of each, the part within touching distance of the other (their
    half-thicknesses and a pixel of gap: `_near`), the smaller."""
    found = []
    for kind in _series(ax, labelled):
        for j, (a, pa) in enumerate(kind):
            for b, pb in kind[j + 1 :]:
                touch = _half_width(ax, a) + _half_width(ax, b) + 1.0
                shares = (_near(ax, a, b, pa, pb, touch), _near(ax, b, a, pb, pa, touch))
                if None not in shares:
                    found.append((a, b, pa, pb, min(shares)))
    return found


def coinciding_pairs(ax: Any) -> list[tuple[Any, Any, float]]:
    """(line, line, share) for two labelled lines of a panel that a reader cannot tell apart
    (their strokes touch, or their markers overlap) over more than `COINCIDE_SHARE` of the
    x-range both span: whatever their dashes or markers, the reader sees one curve where the
    legend promises two."""
    return [(a, b, near) for a, b, _, _, near in _apart(ax, labelled=True) if near > COINCIDE_SHARE]


def lost_series(fig: Any) -> list[str]:
    """Series a reader cannot find: two that cannot be told apart (`coinciding_pairs`, here for
    every line and scatter), or one at least `HIDDEN_SHARE` of which lies under the stroke or
    markers of one drawn over it that hides it (a solid stroke as wide, the same markers; any
    dots on dots)."""
    problems = []
    for i, ax in enumerate(fig.axes):
        for low, high, pl, ph, near in _apart(ax):
            a, b = repr(low.get_label()), repr(high.get_label())
            hides = isinstance(low, PathCollection) or _hides(low, high)
            under = _near(ax, low, high, pl, ph, max(1.0, _half_width(ax, high))) if hides else 0
            if near > COINCIDE_SHARE:
                what = f"{a} and {b} cannot be told apart along {near:.0%} of their shared range"
                problems.append(f"{_panel(ax, i)}: {what}")
            elif under >= HIDDEN_SHARE:
                what = f"{a} is hidden under {b} along {under:.0%} of their shared range"
                problems.append(f"{_panel(ax, i)}: {what}")
    return problems


RESOLVED = 1e-3  # the smallest relative difference a plotted measure can claim by default


def below_noise(fig: Any) -> list[str]:
    """A value axis whose whole span is below a 0.1% relative difference: its ticks then read as
    differences no measurement here resolves."""
    problems = []
    for i, ax in _shown_axes(fig):
        if ax.get_yscale() != "linear" or not _data_pixels(ax):
            continue
        low, high = sorted(ax.get_ylim())
        noise = RESOLVED * max(abs(low), abs(high))
        if 0 < high - low < noise:
            what = f"the y axis spans {high - low:.2g} ({low:.4g} to {high:.4g})"
            problems.append(f"{_panel(ax, i)}: {what}, below its noise ({noise:.2g})")
    return problems


def _labelled(artist: Any) -> bool:
    return not str(artist.get_label()).startswith("_")


def _shows_data(ax: Any, artist: Any) -> bool:
    """Whether a legend's series draws anything visible inside its panel."""
    if isinstance(artist, Line2D):  # a reference line (axhline, axvline) spans its panel
        return not _is_data_line(ax, artist) or len(_line_pixels(ax, artist)) > 0
    if isinstance(artist, BarContainer):
        return any(abs(p.get_height()) * abs(p.get_width()) > 0 for p in artist.patches)
    if isinstance(artist, PathCollection):
        return len(artist.get_offsets()) > 0
    if isinstance(artist, PolyCollection):
        return any(len(p.vertices) > 2 for p in artist.get_paths())
    return True


def unkeyed_marks(fig: Any) -> list[str]:
    """Marks a reader finds no key for: a reference line (other than a line at zero) that no
    legend names, and shading or bars (a seed band, an error bar) in a figure whose legends have
    no title to say what they span. A figure without any legend is read by its labels alone."""
    if not legends(fig):
        return []
    keyed = {t.get_text() for legend, _ in legends(fig) for t in legend.get_texts()}
    # a legend's title keys the marks without an entry of their own, such as seed bands
    titled = any(legend.get_title().get_text() for legend, _ in legends(fig))
    problems = []
    for i, ax in enumerate(fig.axes):
        refs = [ln for ln in ax.lines if not _is_data_line(ax, ln) and ln.get_visible()]
        styles = {ln.get_linestyle() for ln in refs if ln.get_label() in keyed}  # "dotted: ..."
        for line in refs:
            xy = np.asarray(line.get_xydata(), dtype=float)
            at_zero = len(xy) and (np.all(xy[:, 0] == 0) or np.all(xy[:, 1] == 0))
            if not at_zero and line.get_label() not in keyed and line.get_linestyle() not in styles:
                problems.append(f"{_panel(ax, i)}: a reference line with no key")
        spans = [c for c in ax.collections if isinstance(c, PolyCollection | LineCollection)]
        if any(not _labelled(c) for c in spans) and not titled:
            problems.append(f"{_panel(ax, i)}: shading or bars with no key")
    return problems


def empty_legend_entries(fig: Any) -> list[str]:
    """A legend entry whose series shows no data (a stacked bar of height 0, a line outside the
    view): the legend names something the reader cannot find."""
    problems = []
    for i, ax in enumerate(fig.axes):
        if ax.get_legend() is None:
            continue
        for artist, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not _shows_data(ax, artist):
                problems.append(f"{_panel(ax, i)}: the legend names {label!r}, which shows no data")
    return problems


# what `readability_problems` checks, in the order it reports
CHECKS = (legend_problems, tick_problems, text_problems, lost_series, below_noise,
          empty_legend_entries, noisy_numbers)  # fmt: skip


def readability_problems(fig: Any) -> list[str]:
    """Everything that keeps a reader from reading a figure; empty for a readable one."""
    fig.canvas.draw()
    return [problem for check in CHECKS for problem in check(fig)]
