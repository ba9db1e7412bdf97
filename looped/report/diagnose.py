"""The diagnosis (`looped diagnose`) as a reader sees it: its table, what each piece of evidence
says (chosen by the numbers), and its three figures. Pure functions of diagnose.json's dict; the
variants' display names, colours and markers live here and the study reads its labels from here.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import looped.eval.stats as stats
from looped import paper
from looped.report import style
from looped.report.prose import aside

# each variant's schedule, whose label, colour and marker `paper.SHOWN` holds
SPECS = {
    "uniform": paper.UNIFORM,
    "fixed": paper.FIXED,
    "fixed-first": paper.FIXED_FIRST,
    "per-micro": paper.UNIFORM_PER_MICRO,
    "no-k1": paper.NO_K1,
}


def label(variant: str) -> str:
    return paper.label(SPECS[variant])


def format_summary(result: dict) -> str:
    """One line per variant: mean NLL over depths, against uniform, and the gradient norms."""
    v = result["variants"]
    base = v["uniform"]["mean_nll"]
    lines = [
        "| variant | mean NLL K=1..16 | vs uniform | grad norm K=1 | median grad norm K>1 |",
        "|---|---|---|---|---|",
    ]
    for entry in v.values():
        norms = {} if entry is v.get("per-micro") else entry["grad_norm_by_depth"]  # mixed K
        rest = [x for k, x in norms.items() if k != "1"]
        lines.append(
            f"| {entry['label']} | {entry['mean_nll']:.3f} | {entry['mean_nll'] / base - 1:+.1%} | "
            f"{norms['1']:.2f} | {float(np.median(rest)):.2f} |"
            if "1" in norms and rest
            else f"| {entry['label']} | {entry['mean_nll']:.3f} | {entry['mean_nll'] / base - 1:+.1%} | - | - |"
        )
    return "\n".join(lines)


def closes(v: dict, variant: str) -> str:
    """How much of the gap between uniform and fixed-first (mean NLL) a variant closes."""
    u, f, x = (v[k]["mean_nll"] for k in ("uniform", "fixed-first", variant))
    if abs(u - f) < 1e-12:
        return "uniform and fixed-first end level here, so there is no gap to close"
    share = (u - x) / (u - f)
    shares = stats.seed_shares(v, variant)
    per_seed = f" (per seed {min(shares):.0%} to {max(shares):.0%})" if len(shares) > 1 else ""
    return (
        f"mean NLL {x:.3f} against uniform's {u:.3f} and fixed-first's {f:.3f}: it closes "
        f"{share:.0%} of the gap{per_seed}"
    )


def section(result: dict) -> str:
    """The README's diagnosis section: the table and what each piece of evidence says."""
    meta, v = result["meta"], result["variants"]
    s = meta["settings"]
    u = v["uniform"]
    norms = u["grad_norm_by_depth"]
    rest = float(np.median([x for k, x in norms.items() if k != "1"]))
    last_u, last_f = u["agreement"][-1], v["fixed"]["agreement"][-1]
    d = last_u["depths"]

    def cos(probe: dict, a: int, b: int) -> float:
        return probe["cosine"][d.index(a)][d.index(b)]

    lines = [
        f"Measured by `looped diagnose` ({meta['preset']} preset, d={meta['d_model']}, "
        f"{s['steps']} steps of {meta['tokens_per_step']} tokens for every variant, {s['seeds']} "
        f"seed{'s' if s['seeds'] > 1 else ''}, {meta['dtype']}; the runs trained for "
        f"{meta.get('train_seconds', meta['wall_seconds']) / 60:.0f} minutes in all, one core each)"
        + aside(
            (f"{label(k)} {v:g}" for k, v in (meta.get("lr") or {}).items()),
            before=", each at the demo's tuned LR (",
        )
        + ". Mean NLL is over "
        "serving depths 1..16; gradient norms are pre-clip, the median over the steps at each "
        "depth after the first 10% of the run.",
        "",
        format_summary(result),
        "",
        f"- **The depths' gradients differ in size**: in uniform training a K=1 step's gradient "
        f"norm is {norms['1']:.2f}, {norms['1'] / rest:.1f}x the median over K=2..16 ({rest:.2f}); "
        f"with clipping at {meta['grad_clip']:g}, "
        + (
            "more than half of the K=1 steps are clipped."
            if norms["1"] > meta["grad_clip"]
            else "most K=1 steps are not clipped."
        ),
        f"- **...and in direction**: at step {last_u['step']} of the uniform run the cosine between "
        f"the K=1 and K=16 gradients on one batch is {cos(last_u, 1, 16):+.2f}, K=4 vs K=16 "
        f"{cos(last_u, 4, 16):+.2f}, K=8 vs K=16 {cos(last_u, 8, 16):+.2f}; averaging the four "
        f"keeps {last_u['mean_survives']:.0%} of a gradient's length. In the fixed K=4 run at "
        f"step {last_f['step']}: K=1 vs K=16 {cos(last_f, 1, 16):+.2f}, K=4 vs K=16 "
        f"{cos(last_f, 4, 16):+.2f}.",
        f"- **A K per micro-batch** (each step averages 4 depths): {closes(v, 'per-micro')}.",
        f"- **Leaving out K=1** (uniform 2..16): {closes(v, 'no-k1')}.",
        f"- **Reading**: {reading(v)} {certainty(v, s['seeds'])}",
    ]
    return "\n".join(lines)


def reading(v: dict) -> str:
    """What the two interventions together say, chosen by their numbers."""
    micro, no_k1 = stats.closed_share(v, "per-micro"), stats.closed_share(v, "no-k1")
    if micro >= 0.5 and no_k1 < 0.5:
        return (
            "averaging depths within each step recovers most of uniform's deficit and dropping "
            "K=1 little of it, so at this scale uniform lags mainly because its depth changes "
            "from step to step: each update follows one depth's gradient, and far-apart depths' "
            "gradients are nearly orthogonal, while its outsized K=1 gradients matter less."
        )
    if no_k1 >= 0.5 > micro:
        return "dropping K=1 recovers most of the deficit, averaging depths per step does not."
    if micro >= 0.5 and no_k1 >= 0.5:
        return "both interventions recover most of the deficit; they do not separate the causes."
    return "neither intervention recovers most of the deficit; the cause stays open."


def certainty(v: dict, seeds: int) -> str:
    """How far the reading holds: one seed is a lead; with more, whether every seed agrees."""
    if seeds == 1:
        return "One seed at one scale, so this is a measured lead, not a settled cause."
    micro, no_k1 = stats.seed_shares(v, "per-micro"), stats.seed_shares(v, "no-k1")
    same = all((m >= 0.5) == (stats.closed_share(v, "per-micro") >= 0.5) for m in micro) and all(
        (n >= 0.5) == (stats.closed_share(v, "no-k1") >= 0.5) for n in no_k1
    )
    if same:
        return (
            f"Every one of the {seeds} seeds gives the same reading; it is measured at one small "
            "scale, so whether it is why uniform lags at the paper's scale stays open."
        )
    return f"The {seeds} seeds do not all agree (see the per-seed ranges): a lead, not a cause."


def fig_grad_norms(result: dict, path: Path) -> Path:
    """Mean pre-clip gradient norm of the steps at each depth, per variant (log scale)."""
    style.use_theme()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant, entry in result["variants"].items():
        norms = entry["grad_norm_by_depth"]
        if variant == "per-micro" or not norms:  # a step there mixes 4 depths: no per-depth norm
            continue
        ks = [int(k) for k in norms]
        ax.plot(
            ks,
            list(norms.values()),
            marker=paper.marker_of(SPECS[variant]),
            ms=4,
            label=entry["label"],
            color=paper.color_of(SPECS[variant]),
        )
    clip = result["meta"]["grad_clip"]
    if clip:
        ax.axhline(clip, color="k", ls=":", lw=0.8, label=f"clip at {clip:g}")
    ax.set_yscale("log")
    ax.set_xticks([1, 2, 4, 6, 8, 10, 12, 14, 16])
    ax.set_xlabel("training depth K of the step")
    ax.set_ylabel("pre-clip gradient norm")
    ax.set_title("Gradient size by training depth (after warmup)")
    ax.legend(fontsize=8)
    return style.save(fig, path)


def fig_agreement(result: dict, path: Path) -> Path:
    """Cosine between the gradients at two depths on the same batch, over training, for the
    uniform and the fixed run: one line per depth pair."""
    style.use_theme()
    probed = [v for v, entry in result["variants"].items() if entry.get("agreement")]
    fig, axes = plt.subplots(1, len(probed), figsize=(5.2 * len(probed), 3.6), sharey=True)
    axes = np.atleast_1d(axes)
    for ax, variant in zip(axes, probed):
        probes = result["variants"][variant]["agreement"]
        depths = probes[0]["depths"]
        steps = [p["step"] for p in probes]
        pairs = [(i, j) for i in range(len(depths)) for j in range(i + 1, len(depths))]
        for n, (i, j) in enumerate(pairs):
            ax.plot(
                steps,
                [p["cosine"][i][j] for p in probes],
                "o-",
                ms=4,
                label=f"K={depths[i]} vs K={depths[j]}",
                color=style.color("", n),
            )
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlabel("training step of the checkpoint")
        ax.set_title(result["variants"][variant]["label"])
    axes[0].set_ylabel("gradient cosine (same batch)")
    axes[-1].legend(fontsize=8, ncol=2)
    return style.save(fig, path)


def fig_nll(result: dict, path: Path) -> Path:
    """Held-out NLL at every serving depth at the end, per variant (equal steps and tokens)."""
    style.use_theme()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for variant, entry in result["variants"].items():
        ax.plot(
            entry["depths"],
            entry["nll"],
            marker=paper.marker_of(SPECS[variant]),
            ms=4,
            label=entry["label"],
            color=paper.color_of(SPECS[variant]),
        )
    metric = next(iter(result["variants"].values()))["metric"]
    ax.set_xlabel("serving depth K")
    unit = "nats per fact" if metric == "fact_nll" else "nats per token"
    ax.set_ylabel(f"{metric.split('_')[0]} NLL ({unit}, held out)")
    s = result["meta"]["settings"]
    ax.set_title(
        f"After {s['steps']} steps, equal tokens ({s['seeds']} seed{'s' * (s['seeds'] > 1)})"
    )
    ax.legend(fontsize=8)
    return style.save(fig, path)


def figures(result: dict, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    paths = [
        fig_grad_norms(result, out / "diagnose_grad_norms.png"),
        fig_agreement(result, out / "diagnose_agreement.png"),
        fig_nll(result, out / "diagnose_nll_by_depth.png"),
    ]
    return paths
