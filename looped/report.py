"""Generated README sections: every number in them is read from a results file.

    looped report            # rewrite the README sections from results/demo.json, bench.md,
                             # fidelity.json and diagnose.json
    looped report --results runs/demo/demo.json   # ... from another demo's results (yours)
    looped report --check    # exit 1 if the README differs from what the files say (CI runs this)

Sections sit between markers such as ``<!-- demo:begin -->`` and ``<!-- demo:end -->``. The demo
section states each of the paper's claims with the measured numbers and says whether it shows
at this scale; the wording is chosen by the numbers, not typed after looking at them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from looped import diagnose, fidelity
from looped.demo import format_summary
from looped.errors import UserError
from looped.paper import FIXED, FIXED_FIRST, LABELS, NLL_GAP, UNIFORM, fixed_depth, fixed_phase


def _runs(
    result: dict, schedule: str, budget: float | None = None, group: str = "main"
) -> list[dict]:
    main = [r["budget"] for r in result["runs"] if "main" in r["group"]]
    top = max(main) if budget is None else budget
    return [
        r
        for r in result["runs"]
        if r["schedule"] == schedule and r["budget"] == top and group in r["group"]
    ]


def _mean(rows: list[dict], key: str) -> np.ndarray:
    return np.mean([r[key] for r in rows], axis=0)


@dataclass
class Finding:
    """One line of the README's findings: a paper claim with the verdict the numbers give
    ("shows", "does not show", "reverses"), or a supporting measurement (no claim, no verdict)."""

    # the paper's claim in bold, or "" for a supporting sentence
    claim: str
    # "shows", "does not show" or "reverses"; "" when the line states numbers only
    verdict: str
    # the measured numbers, as a sentence
    sentence: str
    # how the verdict is qualified in the text ("shows for 3 of 4 models", "at this scale")
    qualifier: str = ""

    def markdown(self) -> str:
        if not self.claim:
            return self.sentence
        said = self.qualifier or self.verdict
        return f"**{self.claim}** ({said}): {self.sentence}"


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

    def per_depth(self, values: np.ndarray, fmt: str, ks: tuple[int, ...] = (1, 4, 8, 16)) -> str:
        return " / ".join(format(values[self.at[k]], fmt) for k in ks)


def _not_shown(rest: str = "") -> tuple[str, str]:
    return "does not show", "does not show at this scale" + rest


def depth_specialisation(d: _Data) -> Finding | None:
    """Paper Fig. 5: a model trained at fixed K serves best at serving depths near K."""
    spec = sorted(
        (r for r in d.result["runs"] if "depth" in r["group"]),
        key=lambda r: fixed_depth(r["schedule"]),
    )
    if not spec:
        return None
    parts, hits = [], 0
    for r in spec:
        k = fixed_depth(r["schedule"])
        best = d.depths[int(np.argmin(r["fact_nll"]))]
        hits += abs(best - k) <= max(1, k // 2)
        parts.append(
            f"K={k} is best at serving depth {best} (NLL {min(r['fact_nll']):.3f}; "
            f"{r['fact_nll'][d.at[16]]:.2f} at K=16)"
        )
    if hits == len(spec):
        verdict, said = "shows", ""
    elif hits:
        verdict, said = "shows", f"shows for {hits} of {len(spec)} models"
    else:
        verdict, said = _not_shown()
    return Finding(
        "Fixed-depth models serve best near their training depth",
        verdict,
        "; ".join(parts) + ".",
        said,
    )


def matched_compute(d: _Data) -> Finding | None:
    """The headline: fixed-first's mean NLL over serving depths stays within the paper's gap of
    uniform training's at the same modeled FLOPs."""
    if not (d.ff and d.uni):
        return None
    ff_nll = np.mean([np.mean(r["fact_nll"]) for r in d.ff])
    uni_nll = np.mean([np.mean(r["fact_nll"]) for r in d.uni])
    rel = ff_nll / uni_nll - 1
    if abs(rel) <= NLL_GAP[0]:
        verdict, said = "shows", f"shows: within {NLL_GAP[0]:.1%}"
    elif rel < 0:
        verdict, said = "shows", f"shows, and more: fixed-first is {-rel:.0%} better"
    else:
        verdict, said = _not_shown(f": fixed-first is {rel:.1%} worse")
    return Finding(
        "Fixed-first keeps uniform training's any-depth quality at matched compute",
        verdict,
        f"mean NLL over K=1..16 is {ff_nll:.3f} for fixed-first against {uni_nll:.3f} for "
        f"uniform ({rel:+.1%}); at the same modeled FLOPs fixed-first takes "
        f"{d.ff[0]['steps']} steps, uniform {d.uni[0]['steps']}.",
        said,
    )


def before_the_switch(d: _Data) -> Finding | None:
    """What the short uniform finish adds: fixed-first's NLL just before its switch and at the
    end."""
    pre = [r["pre_switch"] for r in d.ff if r.get("pre_switch")]
    if not pre:
        return None
    k, frac = fixed_phase(FIXED_FIRST)
    pre_nll = np.mean([np.mean(p["fact_nll"]) for p in pre])
    ff_nll = np.mean([np.mean(r["fact_nll"]) for r in d.ff])
    return Finding(
        "",
        "",
        f"Just before its switch ({frac:.0%} of its steps, all at K={k}) fixed-first has mean "
        f"NLL {pre_nll:.3f} over K=1..16; the short uniform finish takes it to {ff_nll:.3f}.",
    )


def fixed_degrades(d: _Data) -> Finding | None:
    """Fixed-depth training does not transfer: NLL rises away from the training depth."""
    if not d.fx:
        return None
    k = fixed_depth(FIXED)
    nll = _mean(d.fx, "fact_nll")
    ratio = nll[d.at[16]] / nll[d.at[k]]
    if ratio > 1.5:
        verdict, said = "shows", ""
    elif ratio < 1:
        verdict, said = "reverses", f"reverses: better at K=16 than at K={k}"
    else:
        verdict, said = _not_shown()
    return Finding(
        f"Fixed K={k} degrades away from K={k}",
        verdict,
        f"NLL {nll[d.at[k]]:.3f} at K={k}, {nll[d.at[1]]:.3f} at K=1, {nll[d.at[16]]:.3f} at K=16.",
        said,
    )


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
    verdict, said = ("shows", "") if a > 1.2 * b else _not_shown()
    return Finding(
        "A loss spike at the switch",
        verdict,
        f"training loss averages {b:.3f} over the {window} steps before the switch and peaks at "
        f"{a:.3f} in the {window} steps after (seed mean).",
        said,
    )


def two_hop_depth(d: _Data) -> Finding | None:
    """Composition needs depth: two-hop accuracy should rise with serving depth."""
    two_hop = [r for r in d.ff + d.uni + d.fx if "two_hop_acc" in r]
    if not two_hop:
        return None
    acc = np.mean([r["two_hop_acc"] for r in two_hop], axis=0)
    best = d.depths[int(np.argmax(acc))]
    verdict, said = ("shows", "") if acc.max() > acc[d.at[1]] + 0.05 else _not_shown()
    return Finding(
        "More serving depth helps two-hop recall",
        verdict,
        f"two-hop accuracy averaged over the three schedules is {acc[d.at[1]]:.2f} at K=1 and "
        f"peaks at {acc.max():.2f} at K={best}.",
        said,
    )


def recalled_bits(d: _Data) -> Finding | None:
    """Recall in bits per person at four serving depths (no claim: the measurement)."""
    if not (d.ff and d.uni):
        return None
    full = d.result["runs"][0].get("full_bits")
    return Finding(
        "",
        "",
        f"Recalled bits per person at K=1/4/8/16: fixed-first "
        f"{d.per_depth(_mean(d.ff, 'bits'), '.1f')}, uniform "
        f"{d.per_depth(_mean(d.uni, 'bits'), '.1f')}"
        + (f", out of {full:.1f} bits of attributes per person." if full else "."),
    )


def exact_recall(d: _Data) -> Finding | None:
    """Greedy answers right, which has no floor from knowing the pool (no claim)."""
    if not (d.ff and d.uni and "exact" in d.ff[0]):
        return None
    rows = (("fixed-first", d.ff), ("uniform", d.uni), (LABELS[FIXED], d.fx))
    parts = [f"{name} {d.per_depth(_mean(runs, 'exact'), '.0%')}" for name, runs in rows]
    return Finding(
        "",
        "",
        "Exact recall (greedy answer right, mean over the six attributes) at K=1/4/8/16: "
        + "; ".join(parts)
        + ". Bits count against the whole pool, so knowing which values occur in the corpus at "
        "all already earns some (notebook 03 shows this anchor); exact recall has no such floor.",
    )


def catch_up(d: _Data) -> Finding | None:
    """How much more compute uniform needs to reach fixed-first's NLL (the --catch-up runs)."""
    if not (d.ff and d.uni and d.catch):
        return None
    seed = d.catch[0]["seed"]
    target = np.mean([np.mean(r["fact_nll"]) for r in d.ff if r["seed"] == seed])
    reached = [r for r in d.catch if np.mean(r["fact_nll"]) <= target]
    parts = ", ".join(f"{r['budget']:.0f}x: {np.mean(r['fact_nll']):.3f}" for r in d.catch)
    verdict = (
        f"uniform first matches it at {reached[0]['budget']:.0f}x the budget"
        if reached
        else f"uniform has not caught up even at {d.catch[-1]['budget']:.0f}x the budget"
    )
    return Finding(
        "Compute uniform needs to catch up",
        "",
        f"fixed-first reaches mean fact NLL {target:.3f} at 100% of the budget; uniform trained "
        f"longer reaches {parts}; {verdict}.",
        f"seed {seed}",
    )


def scale_differs(d: _Data) -> Finding | None:
    """Why this scale can disagree with the paper: uniform still on its memorisation plateau."""
    if not (d.ff and d.uni):
        return None
    bits_ff, bits_uni = _mean(d.ff, "bits"), _mean(d.uni, "bits")
    if bits_uni.max() >= 0.8 * bits_ff.max():
        return None
    lo, hi = NLL_GAP
    text = (
        f"Where this scale differs from the paper: the paper's 200M and 1B models on web text end "
        f"within {lo * 100:.1f}-{hi:.1%} of uniform training; this "
        f"{d.result['meta']['params'] / 1e6:.2f}M-parameter model trained with uniform depths "
        f"from the start is still on its memorisation plateau when the budget ends "
        f"({bits_uni.max():.1f} bits at best, against {bits_ff.max():.1f} for fixed-first). At "
        f"matched compute it also gets fewer optimizer steps ({d.uni[0]['steps']} against "
        f"{d.ff[0]['steps']})"
    )
    longer = [r for r in d.catch if r["steps"] > d.ff[0]["steps"]]
    if longer:
        r = longer[-1]
        text += (
            f", but steps alone do not explain the gap: with {r['budget']:.0f}x the budget "
            f"uniform takes {r['steps']} steps and still ends at mean fact NLL "
            f"{np.mean(r['fact_nll']):.3f}."
        )
    else:
        text += "."
    return Finding("", "", text)


# every claim and measurement of the demo section, in the order the README lists them
CLAIMS = (
    depth_specialisation,
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
    """Each claim's verdict and sentence, from demo.json (claims without their data left out)."""
    d = _Data(result)
    return [f for f in (claim(d) for claim in CLAIMS) if f is not None]


def findings(result: dict) -> list[str]:
    """One markdown line per claim, with numbers from demo.json and a verdict computed from them."""
    depths = result["runs"][0]["depths"]
    if not {1, 4, 8, 16} <= set(depths):
        return [f"(the findings need serving depths 1, 4, 8 and 16; this demo evaluated {depths})"]
    return [f.markdown() for f in claims(result)]


def demo_section(result: dict) -> str:
    meta = result["meta"]
    s = meta["settings"]
    lines = [
        f"Measured by `looped demo` on {meta['machine']} in {meta['wall_seconds'] / 60:.1f} minutes: "
        f"{len(result['runs'])} runs, {s['seeds']} seeds, a {meta['params'] / 1e6:.2f}M-parameter model "
        f"(d={meta['model']['d_model']}, {meta['model']['n_block']} looped layer) on {meta['persons']} synthetic "
        f"persons, batch {meta['batch_size']}x{meta['seq_len']} tokens, {meta['dtype']}; full budget "
        f"{meta['full_budget_flops']:.3g} modeled FLOPs"
        + (
            f" (the optional `--catch-up` runs took {meta['catchup_seconds'] / 60:.1f} more minutes)"
            if meta.get("catchup_seconds")
            else ""
        )
        + ". Full budget, seed means:",
        "",
        format_summary(result["summary"]),
        "",
    ]
    lines += [f"- {f}" for f in findings(result)]
    return "\n".join(lines)


def flops_section(presets: tuple[str, ...] = ("200m", "1b")) -> str:
    """The full-scale presets and their modeled savings, computed from the presets themselves."""
    from looped.config import load_config
    from looped.flops import preset_rows
    from looped.model import LoopedConfig

    lines = [
        "| preset | parameters | layers (prelude + loop + coda) | width | seq | F/R | schedule | saving vs uniform 1..16 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in presets:
        m: LoopedConfig = load_config(name).model
        for r in preset_rows(name):
            if r["schedule"] == r["reference"]:
                continue
            lines.append(
                f"| `{name}` | {r['params'] / 1e6:,.0f}M | {m.n_prelude} + {m.n_block} + {m.n_coda} | {m.d_model} | "
                f"{r['seq_len']} | {r['fixed_over_loop']:.2f} | `{r['schedule']}` | {r['saving_vs_uniform']:.1%} |"
            )
    return "\n".join(lines)


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(\n<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        return text
    return pattern.sub(lambda m: m.group(1) + body.strip() + m.group(2), text)


def render(readme: str, root: Path, results: Path | None = None) -> str:
    """The README with its generated sections rendered from root/results/ (or, for the demo
    section, from `results`)."""
    readme = _replace(readme, "flops", flops_section())
    demo = results or root / "results" / "demo.json"
    if demo.is_file():
        readme = _replace(readme, "demo", demo_section(json.loads(demo.read_text())))
    for name, section in (("fidelity", fidelity.section), ("diagnose", diagnose.section)):
        path = root / "results" / f"{name}.json"
        if path.is_file():
            readme = _replace(readme, name, section(json.loads(path.read_text())))
    bench = root / "results" / "bench.md"
    if bench.is_file():
        readme = _replace(readme, "bench", bench.read_text())
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="looped report", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="project root (README.md, results/)")
    parser.add_argument("--check", action="store_true", help="fail if the README is out of date")
    parser.add_argument(
        "--results",
        default=None,
        help="demo results to render (default: ROOT/results/demo.json, the committed reference)",
    )
    args = parser.parse_args(argv)
    root = Path(args.root)
    results = Path(args.results) if args.results else None
    if results is not None and not results.is_file():
        raise UserError(
            f"--results {results}: no such file; `looped demo` writes runs/demo/demo.json"
        )
    path = root / "README.md"
    old = path.read_text()
    new = render(old, root, results)
    if args.check:
        if new != old:
            print("README.md is out of date with results/; run `looped report`", file=sys.stderr)
            return 1
        return 0
    if new != old:
        path.write_text(new)
        print(f"updated {path}")
    return 0
