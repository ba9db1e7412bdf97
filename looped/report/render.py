"""Generated docs: every number in them is read from a results file, every list from the code.

    looped report            # rewrite the generated sections of README.md, docs/RESULTS.md,
                             # docs/USAGE.md and notebooks/README.md from results/ (demo.json,
                             # demo_text.json, length.json, samples.json, diagnose.json, bench.md)
                             # and the notebooks
    looped report --results runs/demo/demo.json   # ... from another demo's results (yours)
    looped report --check    # exit 1 if a doc differs from what the files say (CI runs this)
    looped report --figures  # redraw every figure in figures/ from results/ (no training)

Sections sit between markers such as ``<!-- demo:begin -->`` and ``<!-- demo:end -->``; each doc
holds the markers of the sections it shows (the README's first screen the verdicts, the
results page every track's tables). Each study's module (`bios`, `text`, `length`, `samples`,
`diagnose`) writes its own section; this one puts them in place.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from looped.config import load_config
from looped.errors import UserError
from looped.flops import preset_rows
from looped.model import LoopedConfig
from looped.report import bios, diagnose, docs, length, samples, style, text
from looped.report.verdicts import load_result, verdicts_section

BUDGET_MINUTES = 12  # what a plain `make demo` may take on 2 CPU cores (the README's timing line)


def flops_section(presets: tuple[str, ...] = ("200m", "1b")) -> str:
    """The full-scale presets and their modeled savings, computed from the presets themselves."""
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


def demo_minutes(timing: dict) -> tuple[float, bool]:
    """A timed demo's wall-clock minutes as printed, and whether that is within the budget."""
    minutes = round(timing["wall_seconds"] / 60, 1)  # judged as printed
    return minutes, minutes <= BUDGET_MINUTES


def timing_section(timing: dict) -> str:
    """How long a plain `make demo` took on a fresh clone, phase by phase (results/demo_time.json,
    written by `looped demo --time-to`)."""
    phases = ", ".join(
        f"{name} {sec / 60:.1f} min" if sec >= 60 else f"{name} {sec:.0f} s"
        for name, sec in timing["phase_seconds"].items()
    )
    minutes, within = demo_minutes(timing)
    budget = "within" if within else "over"
    return (
        f"Measured: `{timing['command'].strip()}` on a fresh clone took {minutes:.1f} minutes "
        f"on {timing['machine']} in {timing['dtype']} ({timing['runs_trained']} bios runs and "
        f"{timing['text_runs']} text runs; {phases}), after the one-time set-up of the virtual "
        f"environment: {budget} the {BUDGET_MINUTES}-minute budget for 2 cores."
    )


def capitalized(markdown: str) -> str:
    """Generated markdown whose every bullet starts with a capital letter ("- fixed-first K=2
    ..." becomes "- Fixed-first K=2 ...")."""
    return re.sub(r"^- ([a-z])", lambda m: "- " + m.group(1).upper(), markdown, flags=re.M)


def _replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {name}:begin -->\n).*?(\n<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        return text
    body = capitalized(body.strip())
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def render(
    readme: str, root: Path, results: Path | None = None, doc: Path = Path("README.md")
) -> str:
    """A doc (the file `doc`, relative to root) with its generated sections rendered from
    root/results/ (or, for the demo section, from `results`) and from the code (the notebooks,
    the package map)."""
    if "<!-- notebooks:begin -->" in readme:  # read from root's files only where shown
        readme = _replace(readme, "notebooks", docs.notebooks_section(root, doc))
    if "<!-- codemap:begin -->" in readme:
        readme = _replace(readme, "codemap", docs.code_map(root, doc))
    if "<!-- modules:begin -->" in readme:
        readme = _replace(readme, "modules", docs.module_map(root))
    readme = _replace(readme, "flops", flops_section())
    demo = results or root / "results" / "demo.json"
    if demo.is_file():
        readme = _replace(readme, "demo", bios.section(json.loads(demo.read_text())))
    sections = (
        (
            "text",
            "demo_text",
            lambda r: text.section(r, "looped demo (its text track)", r.get("baselines")),
        ),
        ("length", "length", length.length_section),
        ("samples", "samples", samples.section),
        ("diagnose", "diagnose", diagnose.section),
    )
    for marker, name, section in sections:
        path = root / "results" / f"{name}.json"
        if path.is_file():
            readme = _replace(readme, marker, section(json.loads(path.read_text())))
    readme = _replace(readme, "verdicts", verdicts_section(root))
    if (study := load_result(root, "length")) is not None:
        readme = _replace(readme, "finding", length.finding(study))
    timing = root / "results" / "demo_time.json"
    if timing.is_file():
        readme = _replace(readme, "timing", timing_section(json.loads(timing.read_text())))
    bench = root / "results" / "bench.md"
    if bench.is_file():
        readme = _replace(readme, "bench", bench.read_text())
    return readme


# the files `looped report` writes, relative to the root: the README's first screen, every
# track's results, the usage guide, the module map, the notebooks' index (a file that is absent is skipped)
DOCS = (
    Path("README.md"),
    Path("docs/RESULTS.md"),
    Path("docs/USAGE.md"),
    Path("docs/ARCHITECTURE.md"),
    Path("notebooks/README.md"),
)


def figures(root: Path, out: Path | None = None) -> list[Path]:
    """Every figure of figures/ redrawn from root/results/*.json, without training: the bios
    figures, the bios LR sweep and Fig. 4 from demo.json, the text track's from demo_text.json,
    the diagnosis from diagnose.json, the length study's from length.json."""
    out = out or root / "figures"
    paths = []
    if (result := load_result(root, "demo")) is not None:
        paths += bios.figures(result, out)
    if (result := load_result(root, "demo_text")) is not None:
        paths += text.figures(result, out, prefix="text")
    if (result := load_result(root, "diagnose")) is not None:
        paths += diagnose.figures(result, out)
    if (result := load_result(root, "length")) is not None:
        paths.append(length.fig_gap(result, out / "length_gap.png"))
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="looped report", description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=".", help="project root (README.md, docs/, results/)")
    parser.add_argument("--check", action="store_true", help="fail if a doc is out of date")
    parser.add_argument(
        "--results",
        default=None,
        help="demo results to render (default: ROOT/results/demo.json, the committed reference)",
    )
    parser.add_argument(
        "--figures", action="store_true", help="redraw figures/ from results/ (no training)"
    )
    args = parser.parse_args(argv)
    root = Path(args.root)
    results = Path(args.results) if args.results else None
    if results is not None and not results.is_file():
        raise UserError(
            f"--results {results}: no such file; `looped demo` writes runs/demo/demo.json"
        )
    if args.figures:
        style.files_only()
        for path in figures(root):
            print(path)
        return 0
    stale = []
    for doc in DOCS:
        path = root / doc
        if not path.is_file():
            continue
        old = path.read_text()
        new = render(old, root, results, doc)
        if new == old:
            continue
        stale.append(doc.as_posix())
        if not args.check:
            path.write_text(new)
            print(f"updated {path}")
    if args.check and stale:
        print(f"{', '.join(stale)} out of date with results/; run `looped report`", file=sys.stderr)
        return 1
    return 0
