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
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import seaborn as sns

from looped import paper
from looped.errors import UserError
from looped.paper import FIXED_FIRST, LABELS, UNIFORM


def _style() -> None:
    sns.set_theme(style="whitegrid", context="notebook", font_scale=0.95)


def _color(label: str, i: int = 0) -> Any:
    return paper.color_of(label) or sns.color_palette("deep")[i % 10]


def _band(ax: Any, x: Iterable, ys: list[list[float]], label: str, color: Any, **kw: Any) -> None:
    """Seed mean as a line, min-max across seeds as a band."""
    arr = np.asarray(ys, dtype=float)
    x = list(x)
    ax.plot(
        x,
        arr.mean(0),
        label=f"{label} (n={len(arr)})" if len(arr) > 1 else label,
        color=color,
        **kw,
    )
    if len(arr) > 1:
        ax.fill_between(x, arr.min(0), arr.max(0), color=color, alpha=0.2, lw=0)


DEPTH_TICKS = [1, 2, 4, 6, 8, 10, 12, 14, 16]


def _depth_ticks(ax: Any, axis: str = "x") -> None:
    """Serving and training depths are integers: tick them as such."""
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    (ax.set_xticks if axis == "x" else ax.set_yticks)([t for t in DEPTH_TICKS if lo <= t <= hi])


def _plain_log_ticks(ax: Any, axis: str = "y") -> None:
    """A log axis spanning less than a few decades gets ticks at 1, 2, 5 x 10^n labelled as
    plain numbers (0.5, 2, 1e13), not matplotlib's `6.1022x10^0` or no label at all."""
    lo, hi = ax.get_ylim() if axis == "y" else ax.get_xlim()
    if lo <= 0 or hi / lo > 1e3:
        return
    ticks = [
        m * 10.0**e
        for e in range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
        for m in (1, 2, 5)
    ]
    ticks = [t for t in ticks if lo <= t <= hi]
    if len(ticks) < 2:  # a range under a factor 2.5: add the ends
        ticks = sorted({float(f"{lo:.2g}"), *ticks, float(f"{hi:.2g}")})
        ticks = [t for t in ticks if lo <= t <= hi]
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: _plain(v)))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _plain(v: float) -> str:
    """0.5, 2, 30 as written; large numbers as 2e12 (no '+', no padding zeros)."""
    if 1e-3 <= abs(v) < 1e4:
        return f"{v:g}"
    mantissa, exponent = f"{v:.1e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


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
    """Show a notebook's figure after checking that every panel holds data: a blank panel is a
    bug in the data selection (notebook 05 once drew one), never something to publish."""
    _finish(fig)
    _check(fig)
    plt.show()


def _finish(fig: Any) -> None:
    for ax in fig.axes:
        if ax.get_xlabel().startswith("serving depth"):
            _depth_ticks(ax)
        if ax.get_ylabel().startswith("training depth"):
            _depth_ticks(ax, "y")
        for axis in ("x", "y"):
            if (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log":
                _plain_log_ticks(ax, axis)
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
                marker="o",
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
        left.plot(xs, [np.mean(y) for y in ys], marker="o", color=_color(label, i), label=label)
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
                marker="o",
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
            ax.plot(curve[:, 0], smooth, color=_color(label, i), label=label, lw=1.2)
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
    for color, r in zip(colors, runs):
        k = int(r["schedule"].split(":")[1])
        bits = np.asarray(r["bits"])
        left.plot(
            r["depths"],
            bits / max(bits.max(), 1e-9),
            marker="o",
            ms=3,
            color=color,
            label=f"trained at K={k}",
        )
        left.axvline(k, color=color, ls=":", lw=0.8)
        right.plot(r["depths"], _nll(r), marker="o", ms=3, color=color, label=f"trained at K={k}")
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
        _band(left, depths, [_nll(r) for r in group], label, _color(label, i), marker="o", ms=3)
        keep = [j for j, k in enumerate(depths) if k >= 4]
        _band(
            right,
            [depths[j] for j in keep],
            [[_nll(r)[j] for j in keep] for r in group],
            label,
            _color(label, i),
            marker="o",
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
                marker="o",
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

    from looped.evaluate import token_nll_of

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
            )
        if r.get("switch_step"):
            ax.axvline(r["switch_step"], color=_color(r["label"], i), ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss (smoothed)")
    ax.set_title("Training NLL; dashed lines mark switches")
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
