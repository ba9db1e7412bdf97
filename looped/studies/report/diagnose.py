"""The diagnosis (`looped diagnose`) as tables and figures: pure functions of diagnose.json's
dict. Names, colours and markers come from `paper.SHOWN` through each variant's schedule."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from looped import paper, plotting
from looped.studies.report.tables import md_table

# each variant's schedule, whose label, colour and marker `paper.SHOWN` holds
SPECS = {
    "uniform": paper.UNIFORM,
    "fixed": paper.FIXED,
    "fixed-first": paper.FIXED_FIRST,
    "per-micro": paper.UNIFORM_PER_MICRO,
    "no-k1": paper.NO_K1,
}
INTERVENTIONS = ("per-micro", "no-k1")  # what each changes against uniform
# "seeds pooled": a ratio of seed-mean NLLs, not a mean of seed-paired ratios
SUMMARY = ["variant", "mean NLL K=1..16", "vs uniform (seeds pooled)", "grad norm K=1"]
SUMMARY += ["median grad norm K>1"]
PAIRS = ((1, 16), (4, 16), (8, 16))  # the depth pairs whose gradient cosine the table shows
SETTINGS = ["preset", "d", "steps", "tokens per step", "seeds", "dtype", "training minutes"]
SETTINGS += ["grad clip", "LR"]
INTERVENTION_HEAD = ["intervention", "mean NLL", "uniform", "fixed-first"]
INTERVENTION_HEAD += ["gap closed (seeds pooled)", "per seed"]
INTERVENTION_HEAD += ["seeds on the mean's side of 50%"]


def label(variant: str) -> str:
    return paper.label(SPECS[variant])


def seed_shares(v: dict, variant: str) -> list[float]:
    """The share of the uniform-to-fixed-first gap a variant closes, seed by seed."""
    u, f, x = (v[k]["seed_mean_nll"] for k in ("uniform", "fixed-first", variant))
    return [(a - c) / (a - b) for a, b, c in zip(u, f, x, strict=True) if abs(a - b) > 1e-12]


def closed_share(v: dict, variant: str) -> float:
    """The share of the uniform-to-fixed-first gap (seed-mean NLL) a variant closes; 0 if none."""
    u, f = v["uniform"]["mean_nll"], v["fixed-first"]["mean_nll"]
    return (u - v[variant]["mean_nll"]) / (u - f) if abs(u - f) > 1e-12 else 0.0


def _norms(variant: str, entry: dict) -> tuple[float, float] | None:
    """(K=1 grad norm, median over K>1), or None where a step mixes depths or lacks them."""
    norms = {} if variant == "per-micro" else entry["grad_norm_by_depth"]
    rest = [x for k, x in norms.items() if k != "1"]
    return (norms["1"], float(np.median(rest))) if "1" in norms and rest else None


def format_summary(result: dict) -> str:
    """One row per variant: mean NLL over depths, against uniform, and the gradient norms."""
    v = result["variants"]
    rows = []
    for variant, e in v.items():
        n = _norms(variant, e)
        norms = [f"{n[0]:.2f}", f"{n[1]:.2f}"] if n else ["-", "-"]
        nll = [f"{e['mean_nll']:.3f}", f"{e['vs_uniform']:+.1%}"]
        rows.append([label(variant), *nll, *norms])
    return md_table(SUMMARY, rows)


def settings_table(result: dict) -> str:
    """What was run: the same steps and tokens for every variant, each at its LR."""
    meta, s = result["meta"], result["meta"]["settings"]
    minutes = meta.get("train_seconds", meta["wall_seconds"]) / 60
    lrs = ", ".join(f"{label(k)} {x:g}" for k, x in (meta.get("lr") or {}).items())
    row = [meta["preset"], meta["d_model"], s["steps"], meta["tokens_per_step"], s["seeds"]]
    row += [meta["dtype"], f"{minutes:.0f}", f"{meta['grad_clip']:g}", lrs or "-"]
    return md_table(SETTINGS, [row])


def _probed(result: dict) -> dict[str, list[dict]]:
    """The gradient-agreement probes of each variant whose checkpoints were probed."""
    return {k: e["agreement"] for k, e in result["variants"].items() if e.get("agreement")}


def agreement_table(result: dict) -> str:
    """Gradient cosines on the same batch at each probed run's last checkpoint, and how much of
    a gradient's length survives averaging the probed depths."""
    rows = []
    for variant, probes in _probed(result).items():
        p, d = probes[-1], probes[-1]["depths"]
        cos = [f"{p['cosine'][d.index(a)][d.index(b)]:+.2f}" for a, b in PAIRS]
        rows.append([label(variant), str(p["step"]), *cos, f"{p['mean_survives']:.0%}"])
    head = ["run", "step", *(f"cos K={a} vs K={b}" for a, b in PAIRS), "length kept by the mean"]
    return md_table(head, rows)


def interventions_table(result: dict) -> str:
    """The share of the uniform-to-fixed-first gap each intervention closes, per seed too, and
    how many seeds fall on the same side of half as the mean."""
    v = result["variants"]
    u, f = v["uniform"]["mean_nll"], v["fixed-first"]["mean_nll"]
    rows = []
    for variant in INTERVENTIONS:
        share, seeds = closed_share(v, variant), seed_shares(v, variant)
        closed = "-" if abs(u - f) < 1e-12 else f"{share:.0%}"
        spread = f"{min(seeds):.0%} to {max(seeds):.0%}" if len(seeds) > 1 else "-"
        same = sum((x >= 0.5) == (share >= 0.5) for x in seeds)
        nll = [f"{x:.3f}" for x in (v[variant]["mean_nll"], u, f)]
        rows.append([label(variant), *nll, closed, spread, f"{same}/{len(seeds)}"])
    return md_table(INTERVENTION_HEAD, rows)


def section(result: dict) -> str:
    """The docs' diagnosis section: tables only (the prose around them is written by hand)."""
    tables = (settings_table, format_summary, agreement_table, interventions_table)
    return "\n\n".join(t(result) for t in tables)


DODGE = 0.3  # serving depths between the two interventions' markers, side by side at each K


def _by_variant(
    x_y: dict[str, tuple[list, list]], apart: tuple[str, ...] = ()
) -> tuple[plt.Figure, plt.Axes]:
    """A panel with one line per variant in its schedule's colour and marker; the variants in
    `apart` (which end level) as markers only, side by side at each x, so both stay visible."""
    plotting.use_theme()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant, (x, y) in x_y.items():
        spec = SPECS[variant]
        kw = {"marker": paper.marker_of(spec), "color": paper.color_of(spec)}
        if variant in apart:
            shift = DODGE * (apart.index(variant) - (len(apart) - 1) / 2)
            x, kw["ls"] = np.asarray(x) + shift, "none"
        ax.plot(x, y, ms=4, label=label(variant), **kw)
    return fig, ax


def fig_grad_norms(result: dict, path: Path) -> Path:
    """Median pre-clip gradient norm of the steps at each depth, per variant (log scale)."""
    norms = {k: e["grad_norm_by_depth"] for k, e in result["variants"].items()}
    norms.pop("per-micro", None)  # a step there mixes 4 depths: no per-depth norm
    fig, ax = _by_variant({k: ([int(d) for d in n], [*n.values()]) for k, n in norms.items() if n})
    if clip := result["meta"]["grad_clip"]:
        ax.axhline(clip, color="k", ls=":", lw=0.8, label=f"clip at {clip:g}")
    ax.set_yscale("log")
    plotting.plain_ticks(ax.yaxis, subs=(1, 2, 5))
    plotting.chosen_ticks(ax.xaxis, plotting.DEPTH_TICKS)
    ax.set_xlabel("training depth K of the step")
    ax.set_ylabel("pre-clip gradient norm")
    ax.set_title("Gradient size by training depth (after warmup)")
    ax.legend(fontsize=8, loc="upper center")  # the norms peak at the ends of the depth range
    return plotting.save(fig, path)


def fig_agreement(result: dict, path: Path) -> Path:
    """Two depths' gradient cosine on the same batch over training, a panel per probed run."""
    plotting.use_theme()
    probed = _probed(result)
    fig, axes = plt.subplots(1, len(probed), figsize=(5.2 * len(probed), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, (variant, probes) in zip(axes, probed.items()):
        depths, steps = probes[0]["depths"], [p["step"] for p in probes]
        pairs = [(i, j) for i in range(len(depths)) for j in range(i + 1, len(depths))]
        for n, (i, j) in enumerate(pairs):
            name, color = f"K={depths[i]} vs K={depths[j]}", plotting.color("", n)
            ax.plot(steps, [p["cosine"][i][j] for p in probes], "o-", ms=4, label=name, color=color)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("training step of the checkpoint")
        ax.set_title(label(variant))
    axes[0].set_ylabel("gradient cosine (same batch)")
    fig.legend(*axes[-1].get_legend_handles_labels(), fontsize=8, ncol=6)  # under the panels
    return plotting.save(fig, path)


def fig_nll(result: dict, path: Path) -> Path:
    """Held-out NLL at every serving depth at the end, per variant (equal steps and tokens)."""
    v, s = result["variants"], result["meta"]["settings"]
    apart = tuple(k for k in INTERVENTIONS if k in v)  # the two often end level: side by side
    fig, ax = _by_variant({k: (e["depths"], e["nll"]) for k, e in v.items()}, apart)
    metric = next(iter(v.values()))["metric"]
    unit = "nats per fact" if metric == "fact_nll" else "nats per token"
    ax.set_xlabel("serving depth K")
    ax.set_ylabel(f"{metric.split('_')[0]} NLL ({unit}, held out)")
    seeds = f"{s['seeds']} seed{'s' * (s['seeds'] > 1)}"
    ax.set_title(f"After {s['steps']} steps, equal tokens ({seeds})")
    plotting.chosen_ticks(ax.xaxis, plotting.DEPTH_TICKS)
    handles, labels = ax.get_legend_handles_labels()
    labels = [f"{la} (markers side by side)" if la in map(label, apart) else la for la in labels]
    fig.legend(handles, labels, fontsize=8, ncol=2)  # under the panel, which keeps its height
    fig.set_figheight(4.4)
    return plotting.save(fig, path)


def figures(result: dict, out_dir: str | Path) -> list[Path]:
    draw = {"grad_norms": fig_grad_norms, "agreement": fig_agreement, "nll_by_depth": fig_nll}
    return [fig(result, Path(out_dir) / f"diagnose_{name}.png") for name, fig in draw.items()]
