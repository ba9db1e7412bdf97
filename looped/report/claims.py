"""The paper's claims on the bios track, each decided from demo.json as a `Finding`.

Each claim function reads demo.json and returns a `Finding` holding the verdict and the numbers it was decided from; the
sentence the docs print is rendered from those numbers separately (`Finding.markdown`), so a
test checks the decision and the values, and the docs check the wording.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

import looped.eval.stats as stats
from looped.paper import FIXED, FIXED_FIRST, NLL_GAP, UNIFORM, fixed_depth, fixed_phase, label


class Shows(str, Enum):
    """Whether a qualitative claim of the paper shows in the numbers at this scale."""

    SHOWS = "shows"
    DOES_NOT_SHOW = "does not show"
    REVERSES = "reverses"


@dataclass
class Finding:
    """One line of the README's findings: a paper claim with the verdict the numbers give, or a
    supporting measurement (no claim, no verdict), and the numbers behind it."""

    # the paper's claim in bold, or "" for a supporting sentence
    claim: str
    # Shows for a qualitative claim, stats.Verdict for a seed-paired gap; None: numbers only
    verdict: Shows | stats.Verdict | None
    # the measured values the verdict was read from and the sentence states
    numbers: dict[str, Any]
    # (qualifier, sentence) from the numbers; the qualifier replaces the bare verdict in the
    # text where it says more ("shows for 3 of 4 models")
    render: Callable[[dict[str, Any]], tuple[str, str]] = field(repr=False)

    def markdown(self) -> str:
        said, sentence = self.render(self.numbers)
        if not self.claim:
            return sentence
        verdict = self.verdict.value if self.verdict is not None else ""
        return f"**{self.claim}** ({said or verdict}): {sentence}"


def _runs(result: dict, schedule: str) -> list[dict]:
    """A main schedule's runs at the grid's largest budget."""
    top = max(r["budget"] for r in result["runs"] if "main" in r["group"])
    return [
        r
        for r in result["runs"]
        if r["schedule"] == schedule and r["budget"] == top and "main" in r["group"]
    ]


def _mean(rows: list[dict], key: str) -> np.ndarray:
    return np.mean([r[key] for r in rows], axis=0)


class _Data:
    """What every claim reads from demo.json: the full-budget runs of each main schedule and the
    index of each serving depth."""

    def __init__(self, result: dict) -> None:
        self.result = result
        self.depths = result["runs"][0]["depths"]
        self.at = {k: i for i, k in enumerate(self.depths)}
        self.ff = _runs(result, FIXED_FIRST)
        self.uni = _runs(result, UNIFORM)
        self.fx = _runs(result, FIXED)
        self.catch = sorted(
            (r for r in result["runs"] if r["group"] == "catchup"), key=lambda r: r["budget"]
        )

    def per_depth(self, values: np.ndarray, ks: tuple[int, ...] = (1, 4, 8, 16)) -> list[float]:
        return [float(values[self.at[k]]) for k in ks]


def _slashed(values: list[float], fmt: str) -> str:
    return " / ".join(format(v, fmt) for v in values)


NOT_AT_THIS_SCALE = "does not show at this scale"


def depth_specialisation(d: _Data) -> Finding | None:
    """Paper Fig. 5: a model trained at fixed K serves best at serving depths near K."""
    spec = sorted(
        (r for r in d.result["runs"] if "depth" in r["group"]),
        key=lambda r: fixed_depth(r["schedule"]),
    )
    if not spec:
        return None
    models = []
    for r in spec:
        k = fixed_depth(r["schedule"])
        best = d.depths[int(np.argmin(r["fact_nll"]))]
        models.append(
            {
                "k": k,
                "best": best,
                "best_nll": min(r["fact_nll"]),
                "at_16": r["fact_nll"][d.at[16]],
                "hit": abs(best - k) <= max(1, k // 2),
            }
        )
    hits = sum(m["hit"] for m in models)
    verdict = Shows.SHOWS if hits else Shows.DOES_NOT_SHOW
    return Finding(
        "Fixed-depth models serve best near their training depth",
        verdict,
        {"models": models, "hits": hits},
        _render_specialisation,
    )


def _render_specialisation(n: dict) -> tuple[str, str]:
    hits, total = n["hits"], len(n["models"])
    said = (
        ""
        if hits == total
        else f"shows for {hits} of {total} models"
        if hits
        else NOT_AT_THIS_SCALE
    )
    parts = [
        f"K={m['k']} is best at serving depth {m['best']} (NLL {m['best_nll']:.3f}; "
        f"{m['at_16']:.2f} at K=16)"
        for m in n["models"]
    ]
    return said, "; ".join(parts) + "."


def matched_compute(d: _Data) -> Finding | None:
    """Fixed-first against uniform at the same modeled FLOPs (the full budget), seed by seed."""
    if not (d.ff and d.uni):
        return None
    ff_nll = float(np.mean([np.mean(r["fact_nll"]) for r in d.ff]))
    uni_nll = float(np.mean([np.mean(r["fact_nll"]) for r in d.uni]))
    rel = ff_nll / uni_nll - 1
    row = {r["schedule"]: r for r in d.result["summary"]}.get(FIXED_FIRST, {})
    gap = row.get("vs_uniform_by_seed") or {"mean": rel, "min": rel, "max": rel}
    if len(gap.get("values", [])) > 1:  # paired by seed, as the verdict reads it
        rel = stats.ratio_interval(gap["values"]).mean
    verdict, said = stats.gap_verdict(gap, NLL_GAP[0])
    numbers = {
        "ff_nll": ff_nll,
        "uni_nll": uni_nll,
        "rel": rel,
        "gap": gap,
        "said": said,
        "ff_steps": d.ff[0]["steps"],
        "uni_steps": d.uni[0]["steps"],
    }
    return Finding(
        "Fixed-first keeps uniform training's any-depth quality at matched compute",
        verdict,
        numbers,
        _render_matched,
    )


def _render_matched(n: dict) -> tuple[str, str]:
    gap = n["gap"]
    per_seed = f"; per seed {gap['min']:+.1%} to {gap['max']:+.1%}" if "values" in gap else ""
    return n["said"], (
        f"mean NLL over K=1..16 is {n['ff_nll']:.3f} for fixed-first against {n['uni_nll']:.3f} "
        f"for uniform ({n['rel']:+.1%}{per_seed}); at the same modeled FLOPs fixed-first takes "
        f"{n['ff_steps']} steps, uniform {n['uni_steps']}."
    )


def before_the_switch(d: _Data) -> Finding | None:
    """What the short uniform finish adds: fixed-first's NLL just before its switch and at the
    end."""
    pre = [r["pre_switch"] for r in d.ff if r.get("pre_switch")]
    if not pre:
        return None
    k, frac = fixed_phase(FIXED_FIRST)
    numbers = {
        "k": k,
        "frac": frac,
        "pre_nll": float(np.mean([np.mean(p["fact_nll"]) for p in pre])),
        "ff_nll": float(np.mean([np.mean(r["fact_nll"]) for r in d.ff])),
    }
    return Finding("", None, numbers, _render_before)


def _render_before(n: dict) -> tuple[str, str]:
    return "", (
        f"Just before its switch ({n['frac']:.0%} of its steps, all at K={n['k']}) fixed-first "
        f"has mean NLL {n['pre_nll']:.3f} over K=1..16; the short uniform finish takes it to "
        f"{n['ff_nll']:.3f}."
    )


def fixed_degrades(d: _Data) -> Finding | None:
    """Fixed-depth training does not transfer: NLL rises away from the training depth."""
    if not d.fx:
        return None
    k = fixed_depth(FIXED)
    nll = _mean(d.fx, "fact_nll")
    numbers = {
        "k": k,
        "at_k": float(nll[d.at[k]]),
        "at_1": float(nll[d.at[1]]),
        "at_16": float(nll[d.at[16]]),
    }
    ratio = numbers["at_16"] / numbers["at_k"]
    verdict = Shows.SHOWS if ratio > 1.5 else Shows.REVERSES if ratio < 1 else Shows.DOES_NOT_SHOW
    return Finding(
        f"Fixed K={k} degrades away from K={k}",
        verdict,
        numbers,
        lambda n: _render_degrades(n, verdict),
    )


def _render_degrades(n: dict, verdict: Shows) -> tuple[str, str]:
    k = n["k"]
    said = {Shows.SHOWS: "", Shows.REVERSES: f"reverses: better at K=16 than at K={k}"}.get(
        verdict, NOT_AT_THIS_SCALE
    )
    return said, f"NLL {n['at_k']:.3f} at K={k}, {n['at_1']:.3f} at K=1, {n['at_16']:.3f} at K=16."


def switch_spike(d: _Data, window: int = 20) -> Finding | None:
    """The training loss jumps when fixed-first starts drawing unseen depths."""
    if not d.ff:
        return None
    spikes = []
    for r in d.ff:
        curve = np.asarray(r["curve"], dtype=float)
        s = r["switch_step"]
        before = curve[(curve[:, 0] > s - window) & (curve[:, 0] <= s), 1].mean()
        after = curve[(curve[:, 0] > s) & (curve[:, 0] <= s + window), 1].max()
        spikes.append((before, after))
    b, a = np.mean(spikes, axis=0)
    verdict = Shows.SHOWS if a > 1.2 * b else Shows.DOES_NOT_SHOW
    numbers = {"before": float(b), "peak": float(a), "window": window}
    return Finding("A loss spike at the switch", verdict, numbers, _render_spike)


def _render_spike(n: dict) -> tuple[str, str]:
    said = "" if n["peak"] > 1.2 * n["before"] else NOT_AT_THIS_SCALE
    w = n["window"]
    return said, (
        f"training loss averages {n['before']:.3f} over the {w} steps before the switch and "
        f"peaks at {n['peak']:.3f} in the {w} steps after (seed mean)."
    )


def two_hop_depth(d: _Data) -> Finding | None:
    """Composition needs depth: two-hop accuracy should rise with serving depth."""
    two_hop = [r for r in d.ff + d.uni + d.fx if "two_hop_acc" in r]
    if not two_hop:
        return None
    acc = np.mean([r["two_hop_acc"] for r in two_hop], axis=0)
    numbers = {
        "at_1": float(acc[d.at[1]]),
        "peak": float(acc.max()),
        "best": d.depths[int(np.argmax(acc))],
    }
    verdict = Shows.SHOWS if numbers["peak"] > numbers["at_1"] + 0.05 else Shows.DOES_NOT_SHOW
    return Finding("More serving depth helps two-hop recall", verdict, numbers, _render_two_hop)


def _render_two_hop(n: dict) -> tuple[str, str]:
    said = "" if n["peak"] > n["at_1"] + 0.05 else NOT_AT_THIS_SCALE
    return said, (
        f"two-hop accuracy averaged over the three schedules is {n['at_1']:.2f} at K=1 and "
        f"peaks at {n['peak']:.2f} at K={n['best']}."
    )


def recalled_bits(d: _Data) -> Finding | None:
    """Recall in bits per person at four serving depths (no claim: the measurement)."""
    if not (d.ff and d.uni):
        return None
    numbers = {
        "ff": d.per_depth(_mean(d.ff, "bits")),
        "uni": d.per_depth(_mean(d.uni, "bits")),
        "full": d.result["runs"][0].get("full_bits"),
    }
    return Finding("", None, numbers, _render_bits)


def _render_bits(n: dict) -> tuple[str, str]:
    full = n["full"]
    return "", (
        f"Recalled bits per person at K=1/4/8/16: fixed-first {_slashed(n['ff'], '.1f')}, "
        f"uniform {_slashed(n['uni'], '.1f')}"
        + (f", out of {full:.1f} bits of attributes per person." if full else ".")
    )


def exact_recall(d: _Data) -> Finding | None:
    """Greedy answers right, which has no floor from knowing the pool (no claim)."""
    if not (d.ff and d.uni and "exact" in d.ff[0]):
        return None
    rows = (("fixed-first", d.ff), ("uniform", d.uni), (label(FIXED), d.fx))
    return Finding(
        "", None, {name: d.per_depth(_mean(runs, "exact")) for name, runs in rows}, _render_exact
    )


def _render_exact(n: dict) -> tuple[str, str]:
    parts = [f"{name} {_slashed(values, '.0%')}" for name, values in n.items()]
    return "", (
        "Exact recall (greedy answer right, mean over the six attributes) at K=1/4/8/16: "
        + "; ".join(parts)
        + ". Bits count against the whole pool, so knowing which values occur in the corpus at "
        "all already earns some (notebook 03 shows this anchor); exact recall has no such floor."
    )


def catch_up(d: _Data) -> Finding | None:
    """How much more compute uniform needs to reach fixed-first's NLL (the --catch-up runs)."""
    if not (d.ff and d.uni and d.catch):
        return None
    seed = d.catch[0]["seed"]
    target = float(np.mean([np.mean(r["fact_nll"]) for r in d.ff if r["seed"] == seed]))
    longer = [(r["budget"], float(np.mean(r["fact_nll"]))) for r in d.catch]
    reached = next((b for b, nll in longer if nll <= target), None)
    numbers = {"seed": seed, "target": target, "longer": longer, "reached_at": reached}
    return Finding("Compute uniform needs to catch up", None, numbers, _render_catch_up)


def _render_catch_up(n: dict) -> tuple[str, str]:
    parts = ", ".join(f"{b:.0f}x: {nll:.3f}" for b, nll in n["longer"])
    outcome = (
        f"uniform first matches it at {n['reached_at']:.0f}x the budget"
        if n["reached_at"] is not None
        else f"uniform has not caught up even at {n['longer'][-1][0]:.0f}x the budget"
    )
    return f"seed {n['seed']}", (
        f"fixed-first reaches mean fact NLL {n['target']:.3f} at 100% of the budget; uniform "
        f"trained longer reaches {parts}; {outcome}."
    )


def scale_differs(d: _Data) -> Finding | None:
    """Why this scale can disagree with the paper: uniform still on its memorisation plateau."""
    if not (d.ff and d.uni):
        return None
    bits_ff, bits_uni = _mean(d.ff, "bits"), _mean(d.uni, "bits")
    if bits_uni.max() >= 0.8 * bits_ff.max():
        return None
    longer = [r for r in d.catch if r["steps"] > d.ff[0]["steps"]]
    last = longer[-1] if longer else None
    numbers = {
        "params": d.result["meta"]["params"],
        "uni_bits": float(bits_uni.max()),
        "ff_bits": float(bits_ff.max()),
        "uni_steps": d.uni[0]["steps"],
        "ff_steps": d.ff[0]["steps"],
        "longest": None
        if last is None
        else {
            "budget": last["budget"],
            "steps": last["steps"],
            "nll": float(np.mean(last["fact_nll"])),
        },
    }
    return Finding("", None, numbers, _render_scale)


def _render_scale(n: dict) -> tuple[str, str]:
    lo, hi = NLL_GAP
    text = (
        f"Where this scale differs from the paper: the paper's 200M and 1B models on web text end "
        f"within {lo * 100:.1f}-{hi:.1%} of uniform training; this "
        f"{n['params'] / 1e6:.2f}M-parameter model trained with uniform depths "
        f"from the start is still on its memorisation plateau when the budget ends "
        f"({n['uni_bits']:.1f} bits at best, against {n['ff_bits']:.1f} for fixed-first). At "
        f"matched compute it also gets fewer optimizer steps ({n['uni_steps']} against "
        f"{n['ff_steps']})"
    )
    if r := n["longest"]:
        text += (
            f", but steps alone do not explain the gap: with {r['budget']:.0f}x the budget "
            f"uniform takes {r['steps']} steps and still ends at mean fact NLL {r['nll']:.3f}."
        )
    else:
        text += "."
    return "", text


def equal_tokens(d: _Data) -> Finding | None:
    """The paper's framing on the bios track: fixed-first at uniform's steps (the same data),
    against uniform, seed by seed."""
    rows = {r["schedule"]: r for r in d.result.get("summary_tokens", [])}
    ff = rows.get(FIXED_FIRST)
    if not ff or "vs_uniform_by_seed" not in ff:
        return None
    verdict, said = stats.gap_verdict(ff["vs_uniform_by_seed"], NLL_GAP[1])
    keys = ("steps", "mean_fact_nll", "fact_nll_vs_uniform", "compute_vs_uniform")
    numbers = {**{k: ff[k] for k in keys}, "gap": ff["vs_uniform_by_seed"], "said": said}
    numbers["fact_nll_vs_uniform"] = stats.ratio_interval(ff["vs_uniform_by_seed"]["values"]).mean
    return Finding(
        "Fixed-first keeps uniform training's any-depth quality at equal tokens",
        verdict,
        numbers,
        _render_equal_tokens,
    )


def _render_equal_tokens(n: dict) -> tuple[str, str]:
    v = n["gap"]
    return n["said"], (
        f"at uniform's {n['steps']} steps fixed-first's mean fact NLL over K=1..16 is "
        f"{n['mean_fact_nll']:.3f} ({n['fact_nll_vs_uniform']:+.1%} against uniform; per seed "
        f"{v['min']:+.1%} to {v['max']:+.1%}) for {1 - n['compute_vs_uniform']:.0%} less modeled "
        "compute."
    )


# every claim and measurement of the demo section, in the order the README lists them
CLAIMS = (
    depth_specialisation,
    equal_tokens,
    matched_compute,
    before_the_switch,
    fixed_degrades,
    switch_spike,
    two_hop_depth,
    recalled_bits,
    exact_recall,
    catch_up,
    scale_differs,
)


def claims(result: dict) -> list[Finding]:
    """Each claim's verdict and numbers, from demo.json (claims without their data left out)."""
    d = _Data(result)
    return [f for f in (claim(d) for claim in CLAIMS) if f is not None]


def findings(result: dict) -> list[str]:
    """One markdown line per claim, with numbers from demo.json and a verdict computed from them."""
    depths = result["runs"][0]["depths"]
    if not {1, 4, 8, 16} <= set(depths):
        return [f"(the findings need serving depths 1, 4, 8 and 16; this demo evaluated {depths})"]
    return [f.markdown() for f in claims(result)]
