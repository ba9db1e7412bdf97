"""Generated docs: the sections between markers such as ``<!-- demo:begin -->`` and
``<!-- demo:end -->`` in README.md and docs/*.md are tables written from results/*.json (and
lists written from the code); the sentences around them are written by hand. Each study's
module writes its own tables; this one puts them in place."""

from __future__ import annotations

import json
import re
from pathlib import Path

from looped.commands.flops import preset_rows
from looped.config import load_config
from looped.studies.recipe import recipe_of
from looped.studies.report import bios, diagnose, docs, recipe, samples, text
from looped.studies.report import map as map_report
from looped.studies.report.tables import md_table
from looped.studies.report.verdicts import (
    bottom_line,
    chosen_recipe,
    load_result,
    verdicts_section,
)

BUDGET_MINUTES = 10  # what a plain `make demo` may take on 2 CPU cores (the README's timing line)


FLOPS_HEADER = ["preset", "parameters", "layers (prelude + loop + coda)", "width", "seq", "F/R"]
FLOPS_HEADER += ["schedule", "saving vs uniform 1..16"]
TIMING_HEADER = [
    "command (fresh clone)",
    "machine",
    "dtype",
    "minutes",
    "minutes per phase",
    "bios runs",
    "text runs",
    f"within {BUDGET_MINUTES} minutes",
]


def flops_section() -> str:
    """The full-scale presets and their modeled savings, computed from the presets themselves."""
    rows = []
    for name in ("200m", "1b"):
        m = load_config(name).model
        shape = [f"{m.n_prelude} + {m.n_block} + {m.n_coda}", m.d_model]
        for r in (r for r in preset_rows(name) if r["schedule"] != r["reference"]):
            size, f_r = f"{r['params'] / 1e6:,.0f}M", f"{r['fixed_over_loop']:.2f}"
            cells = [f_r, f"`{r['schedule']}`", f"{r['saving_vs_uniform']:.1%}"]
            rows.append([f"`{name}`", size, *shape, r["seq_len"], *cells])
    return md_table(FLOPS_HEADER, rows)


def demo_minutes(timing: dict) -> tuple[float, bool]:
    """A timed demo's wall-clock minutes as printed, and whether that is within the budget."""
    minutes = round(timing["wall_seconds"] / 60, 1)  # judged as printed
    return minutes, minutes <= BUDGET_MINUTES


def timed_demos(data: dict) -> list[dict]:
    """The timed demos in a demo_time.json: one per command, machine and dtype (a file from
    before there could be several holds one, at the top level)."""
    return data["timings"] if "timings" in data else [data]


def timing_section(data: dict) -> str:
    """How long a plain `make demo` took on a fresh clone, phase by phase (`--time-to`)."""
    rows = []
    for timing in timed_demos(data):
        minutes, within = demo_minutes(timing)
        phases = ", ".join(f"{k} {sec / 60:.1f}" for k, sec in timing["phase_seconds"].items())
        run = [f"`{timing['command'].strip()}`", timing["machine"], timing["dtype"]]
        counts = [phases, timing["runs_trained"], timing["text_runs"], "yes" if within else "no"]
        rows.append([*run, f"{minutes:.1f}", *counts])
    return md_table(TIMING_HEADER, rows)


def step_speed_section(speed: dict) -> str:
    """Each setting's training-step speed as a ratio to the text study's worker, measured
    one after another in one run of scripts/step_speed.py (never across runs)."""
    ms, ratios = speed["ms_per_step"], speed["speed_vs_worker"]
    rows = [[name, f"{ms[name]:.0f}", f"{ratio:.2f}x"] for name, ratio in ratios.items()]
    pair = f"{speed['two_workers_vs_two_threads']:.2f}x"
    rows.append(["two 1-thread processes vs one 2-thread process (steps/s)", "-", pair])
    where = f"setting ({speed['machine']}, torch {speed['torch']})"
    return md_table([where, f"ms per step ({speed['statistic']})", "speed"], rows)


def _replace(text: str, name: str, body: str) -> str:
    # the body between the markers may be empty (a section not rendered yet)
    pattern = re.compile(rf"(<!-- {name}:begin -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        return text
    # every generated bullet starts with a capital letter
    body = re.sub(r"^- ([a-z])", lambda m: "- " + m.group(1).upper(), body.strip(), flags=re.M)
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


# marker -> (results file, its tables); each is rendered where a doc has the marker
SECTIONS = {
    "demo": ("demo.json", bios.section),
    "text": ("demo_text.json", text.section),
    "map": ("map.json", map_report.section),
    "map_fit": ("map.json", map_report.fit_section),
    "map_frontier": ("map.json", map_report.frontier_section),
    "map_costs": ("map.json", map_report.cost_section),
    "finding": ("map.json", map_report.finding),
    "pooled": ("map.json", map_report.pooled_section),
    "recipe": ("recipe.json", recipe.recipe_section),
    "own_recipe": ("recipe.json", recipe.own_section),
    "samples": ("samples.json", samples.section),
    "diagnose": ("diagnose.json", diagnose.section),
    "timing": ("demo_time.json", timing_section),
    "step_speed": ("step_speed.json", step_speed_section),
    "bench": ("bench.md", None),
}


def render(
    readme: str, root: Path, results: Path | None = None, doc: Path = Path("README.md")
) -> str:
    """A doc (`doc`, relative to root) with its generated sections rendered from root/results/
    (the demo's from `results` where given) and from the code."""
    from_code = {
        "notebooks": lambda: docs.notebooks_section(root, doc),
        "flops": flops_section,
        "verdicts": lambda: verdicts_section(root),
        "escape_delay": lambda: recipe.delay_section(recipe_maps(root)),
        "bottom_line": lambda: bottom_line(root),
        "map_rerun": lambda: rerun_section(root, "chosen"),
        "map_rerun_earlier": lambda: rerun_section(root, "earlier"),
        "finding_rerun": lambda: finding_rerun(root),
        "map_depths": lambda: depth_section(root),
        "demo_recipe": lambda: demo_recipe_section(root),
    }
    for marker, write in from_code.items():
        if f"<!-- {marker}:begin -->" in readme:  # read from root's files only where shown
            readme = _replace(readme, marker, write())
    for marker, (name, tables) in SECTIONS.items():
        path = results if marker == "demo" and results else root / "results" / name
        if f"<!-- {marker}:begin -->" in readme and path.is_file():
            body = path.read_text()
            readme = _replace(readme, marker, tables(json.loads(body)) if tables else body)
    return readme


# the files `looped report` writes, relative to the root (one that is absent is skipped)
DOCS = tuple(
    map(
        Path,
        (
            "README.md",
            "docs/RESULTS.md",
            "docs/HISTORY.md",
            "docs/USAGE.md",
            "docs/ARCHITECTURE.md",
            "notebooks/README.md",
        ),
    )
)


def figures(root: Path, out: Path | None = None) -> list[Path]:
    """Every figure of figures/ redrawn from root/results/*.json, without training."""
    out, paths = out or root / "figures", []
    drawn = (("demo", bios), ("demo_text", text), ("diagnose", diagnose), ("map", map_report))
    for name, module in drawn:  # each results file by the module that reports it
        if (result := load_result(root, name)) is not None:
            paths += module.figures(result, out)
    if (result := load_result(root, "recipe")) is not None:
        paths.append(recipe.fig_escape(result, out / "recipe_escape.png"))
    for path in sorted((root / "results").glob("map-*.json")):  # the map under other recipes
        paths += map_report.figures(json.loads(path.read_text()), out, path.stem)
    if maps := recipe_maps(root):
        paths.append(recipe.fig_escape_delay(maps, out / "escape_delay.png"))
    if (found := chosen_map(root)) and map_report.headline_rows(found[1]):
        paths.append(map_report.fig_headline(found[1], out / "headline.png"))
    return paths


def chosen_map(root: Path) -> tuple[str, dict] | None:
    """The recipe the probe chose and the map under it (`looped map --recipe`), once both exist."""
    chosen = chosen_recipe(root)
    new = load_result(root, f"map-{chosen}") if chosen else None
    return (chosen, new) if new else None


def rerun_section(root: Path, only: str = "") -> str:
    """The map under each recipe it was rerun under, the probe's present choice first: its
    cells, then each against the map's own recipe. A rerun under an earlier choice stays, said
    to be one, so that a probe that changes its mind never hides what was measured; `only`
    ("chosen" or "earlier") keeps the present choice's part or the others'."""
    chosen = chosen_recipe(root)
    reruns = {k: v for k, v in recipe_maps(root).items() if not k.endswith("(the map's)")}
    if not reruns:
        return "No block has run under the chosen recipe yet (`looped map --recipe`)."
    own = load_result(root, "map") or {}
    parts = []
    if chosen and chosen not in reruns and only != "earlier":
        parts.append(f"No block has run yet under `{chosen}`, the probe's present choice.")
    for name in sorted(reruns, key=lambda n: n != chosen):
        if only and (name == chosen) != (only == "chosen"):
            continue
        role = "the probe's present choice" if name == chosen else "an earlier choice of the probe"
        blocks = ", ".join(_block_name(n, b) for n, b in reruns[name].get("blocks", {}).items())
        parts.append(f"**Under `{name}`** ({role}; blocks {blocks}):")
        parts.append(map_report.map_rows(reruns[name]))
        parts.append(recipe.change_section(own, reruns[name], name))
    return "\n\n".join(parts)


def finding_rerun(root: Path) -> str:
    """The README's finding under the recipe the probe chose, each cell beside the map's own."""
    chosen = chosen_recipe(root)
    rerun = load_result(root, f"map-{chosen}") if chosen else None
    if not rerun or not map_report.cells(rerun, vocab=None):
        return f"No cell has run under `{chosen}`, the probe's present choice, yet."
    return map_report.finding_under(load_result(root, "map") or {}, rerun, chosen)


def depth_section(root: Path) -> str:
    """The map under the recipe the probe chose, each cell with a verdict at three depths."""
    if (found := chosen_map(root)) is None:
        return "No block has run under the chosen recipe yet (`looped map --recipe`)."
    return map_report.depth_rows(found[1], found[0])


def _block_name(name: str, block: dict) -> str:
    """A block as the rerun section lists it: one collected before any reported seed finished
    says so, since its cells are not in the tables yet."""
    if block.get("cells"):
        return name
    return f"{name} (its LR sweep alone so far, {len(block.get('sweep', []))} runs)"


# the demo's reference under the recipe it trained with before the probe (bios: the demo
# preset's 20 warmup steps; text: the text setup's 10; the block counted once at init)
OLD_DEMO = ("w20_i1", "w10_i1")


def demo_recipe_section(root: Path) -> str:
    """The demo's reference under the chosen recipe beside the one it replaced."""
    bios_old, text_old = (f"demo-{OLD_DEMO[0]}", f"demo_text-{OLD_DEMO[1]}")
    files = [load_result(root, n) for n in ("demo", bios_old, "demo_text", text_old)]
    if any(f is None for f in files):
        return "The demo has no reference under an earlier recipe to compare."
    new, old, new_text, old_text = files
    # the recipe its reference trained with, read from the reference itself (the probe's choice
    # may have moved on since)
    given = new["meta"]["settings"]
    names = (recipe_of(load_config(given["preset"], given.get("overrides", []))), *OLD_DEMO)
    return bios.recipe_change(new, old, new_text, old_text, names)


def recipe_maps(root: Path) -> dict[str, dict]:
    """The map under each recipe it has run with, by the recipe's name: map.json is the map's
    own (10 warmup steps, the block counted once at init), map-RECIPE.json any other."""
    maps = {}
    if (own := load_result(root, "map")) is not None:
        maps["w10_i1 (the map's)"] = own
    for path in sorted((root / "results").glob("map-*.json")):
        maps[path.stem.removeprefix("map-")] = json.loads(path.read_text())
    return maps


def write_docs(root: Path, results: Path | None = None, check: bool = False) -> list[str]:
    """Render every doc of DOCS that root holds; the ones out of date, written unless `check`."""
    stale = []
    for doc in DOCS:
        path = root / doc
        if not path.is_file():
            continue
        old = path.read_text()
        new = render(old, root, results, doc)
        if new != old:
            stale.append(doc.as_posix())
            if not check:
                path.write_text(new)
                print(f"updated {path}")
    return stale
