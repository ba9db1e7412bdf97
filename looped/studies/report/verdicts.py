"""The paper's claims against the numbers in results/: three tables (the claims with the verdict
each 95% interval gives, the costs, the trend with training length), no sentences."""

from __future__ import annotations

import json
from pathlib import Path

from looped import paper
from looped.paper import FIXED_FIRST, SAVINGS, WALL_SAVING, tolerance
from looped.schedule_spec import parse_schedule
from looped.studies.report import block
from looped.studies.report import map as map_report
from looped.studies.report.block import RECIPES
from looped.studies.report.tables import gap_text, md_table, verdict_words

# the bios track's two bases; each judges FIXED_FIRST at that recipe's own tolerance
BIOS_BASES = (("summary_tokens", "equal tokens"), ("summary", "equal FLOPs"))
TREND_HEADER = ["schedule", "measured on", "lengths", "seeds"]
TREND_HEADER += ["gap change per doubling of tokens [95% interval]", "direction"]
CLAIMS_HEADER = ["paper claim", "measured on", "steps", "tokens/param", "seeds"]
CLAIMS_HEADER += ["gap to uniform: paired mean [95% interval]", "tolerance", "verdict"]


def load_result(root: Path, name: str) -> dict | None:
    path = root / "results" / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def chosen_recipe(root: Path) -> str | None:
    """The recipe the probe ranks first now (recipe.json), None before it has chosen."""
    return ((load_result(root, "recipe") or {}).get("chosen_recipe") or {}).get("recipe")


TOKENS = " at equal tokens"
NOT_MEASURED = "not measured"  # a recipe the map's block has no cell of yet
BLOCK = "d64"  # the map block the text claims are read from: its longest length on one pass
RERUN_BLOCK = "d64-160"  # that length alone, as a map under another recipe runs it
MAP_ON = f"text, `looped map`, block {BLOCK}"  # how the claims table names the map's block


def _claim(schedule: str, on: str = "") -> str:
    k, frac = paper.fixed_phase(schedule)
    return f"K={k} for {frac:.0%} ends within its tolerance of uniform{on}"


def judged(root: Path) -> tuple[dict | None, str, str]:
    """The block the text claims are read from, how the tables name it, and its recipe ("": the
    map's own): the map's `BLOCK`, until the recipe the probe chose has rerun that block's longest
    length (`RERUN_BLOCK`) with every fixed-first recipe at a planned look. Then the rerun: the
    answer against a uniform baseline tuned as carefully as fixed-first replaces the old one."""
    study = (load_result(root, "map") or {}).get("blocks", {}).get(BLOCK)
    chosen = chosen_recipe(root)
    rerun = (load_result(root, f"map-{chosen}") or {}).get("blocks", {}).get(RERUN_BLOCK)
    if rerun:
        mine = [block.longest(rerun, s) for s in RECIPES]
        theirs = [block.longest(study, s) if study else None for s in RECIPES]
        if all(
            m and m.get("planned_look", True) and (t is None or t["steps"] == m["steps"])
            for m, t in zip(mine, theirs)
        ):
            return rerun, f"text, `looped map --recipe {chosen}`, block {RERUN_BLOCK}", chosen
    return study, MAP_ON, ""


def text_rows(study: dict | None, on: str = MAP_ON) -> list[list]:
    """Each recipe at the longest length the block `on` names judged it: interval and verdict."""
    rows = []
    for s in RECIPES:
        tol = f"{tolerance(s):.1%}"
        if (c := block.longest(study, s) if study else None) is None:
            cells = [on, "-", "-", "-", "-", tol, NOT_MEASURED]
        else:
            tpp = f"{c['tokens_per_non_embedding_param']:.0f} (non-emb.)"
            cells = [f"{on} (d={c['d_model']})", c["steps"], tpp, c["gap"]["n"]]
            cells += [gap_text(c["gap"]), tol, verdict_words(c)]
        rows.append([_claim(s, TOKENS), *cells])
    return rows


def bios_rows(bios: dict | None) -> list[list]:
    """Fixed-first against uniform on the bios facts (not the paper's metric), paired by seed:
    the interval and verdict the bios track decided."""
    rows = []
    tol = tolerance(FIXED_FIRST)
    for key, basis in BIOS_BASES:
        row = {r["schedule"]: r for r in (bios or {}).get(key, [])}.get(FIXED_FIRST)
        if not row or "verdict" not in row:
            continue
        on = f"bios facts, `looped demo`, d={bios['meta']['model']['d_model']}"
        claim = f"{_claim(FIXED_FIRST, ' at ' + basis)}, on memorised facts"
        n = len(row["vs_uniform_by_seed"]["values"])
        cells = [claim, on, row["steps"], "-", n, gap_text(row["gap"])]
        rows.append([*cells, f"{tol:.1%}", verdict_words(row)])
    return rows


def cost_rows(root: Path) -> list[list]:
    """Compute saved (modeled: stated, not judged) and wall-clock saved (`scripts/bench.py`), each
    row naming the model and the run its number comes from."""
    rows = []
    wide = load_result(root, "demo_text") or {}
    by = {r["schedule"]: r for r in wide.get("equal_tokens", [])}
    for s in RECIPES[::-1]:
        if s in by:
            st = wide["meta"]["settings"]
            on = f"the FLOP model of the demo's text model (d={st['d_model']}, {st['tokenizer']})"
            here = f"{by[s]['compute_saving']:.0%} (modeled)"
            rows.append(
                [f"training compute saved, {paper.label(s)}", f"{SAVINGS[s]:.0%}", here, on]
            )
    bench = load_result(root, "bench") or {}
    return rows + [bench_row(bench, x) for x in bench.get("schedule", []) if "measured_saving" in x]


def bench_row(bench: dict, x: dict) -> list:
    """One wall-clock row of `scripts/bench.py`: over a whole run's exact draws (per-K step times),
    or a short real run, whose draws may average another K than the schedule's expectation."""
    what = f"wall-clock saved, {paper.label(FIXED_FIRST)}"
    on = f"`scripts/bench.py`, another model (d={bench['config']['d_model']}, {x['precision']})"
    measured, modeled = f"{x['measured_saving']:.1%}", f"{x['modeled_saving']:.1%}"
    if "depths" not in x:
        here, whole = f"{measured} from per-K step times, {modeled} modeled", f"{what}, a whole run"
        return [whole, WALL_SAVING, here, f"{on}: the exact draws of {x['steps']} steps"]
    drawn = x["depths"][paper.UNIFORM]
    mean_k = sum(drawn) / len(drawn)
    expected = parse_schedule(paper.UNIFORM).expected_depth(0, 1)
    draws = f"uniform's draws averaging K={mean_k:.1f} (expected {expected:.1f})"
    here = f"{measured} timed, {modeled} modeled for its draws"
    return [f"{what}, a short run", WALL_SAVING, here, f"{on}: {x['steps']} steps, {draws}"]


def trend_rows(study: dict | None, on: str) -> list[list]:
    """Each schedule's per-seed slope of its gap per doubling of tokens, 95% interval over seeds;
    each row names its block and recipe (`on`), since the claims above may read another recipe."""
    rows = []
    for s in block.compared(study) if study else []:
        t = study["trends"].get(s)
        if t and t["slope"]:
            sl = t["slope"]
            rows.append([paper.label(s), on, t["lengths"], sl["n"], gap_text(sl), t["direction"]])
    return rows


def verdicts_section(root: Path) -> str:
    """The claims, the costs and the trend, each table left out where nothing measured it."""
    study, on, _ = judged(root)
    bios = load_result(root, "demo")
    parts = [md_table(CLAIMS_HEADER, text_rows(study, on) + bios_rows(bios))]
    if costs := cost_rows(root):
        parts.append(md_table(["cost", "paper", "here", "measured on"], costs))
    # the trend needs every length of the map's block, which only the map's own recipe ran
    first = (load_result(root, "map") or {}).get("blocks", {}).get(BLOCK)
    named = f"{MAP_ON} (d={first['cells'][0]['d_model']}), first recipe (`w10_i1`)" if first else ""
    if trends := trend_rows(first, named):
        parts.append(md_table(TREND_HEADER, trends))
    return "\n\n".join(parts)


def bottom_line(root: Path) -> str:
    """The finding in at most 50 words, verdict first, under the recipe the probe chose: each
    arm's gap pooled after the fact over the BPE-512 cells with a verdict, beside its gap in the
    longest of them alone, and the cell where fixed-first leads, each with how late uniform
    starts there (`map.headline_rows`)."""
    chosen = chosen_recipe(root)
    rows = map_report.headline_rows(load_result(root, f"map-{chosen}") or {}) if chosen else []
    pooled = next((r for r in rows if r["at"] is None), None)
    if pooled is None:
        return "**Bottom line**: not measured yet (`looped map --recipe`)."
    own = [r for r in rows if r["at"] and r["at"][1] == 512]
    longest = max(own, key=lambda r: r["at"][2])
    parts = []
    for s in RECIPES:
        g, tol = pooled["gaps"][s], tolerance(s)
        past = " past its tolerance," if g["lo"] > tol else ""
        parts.append(f"{paper.label(s).removeprefix('fixed-first ')}{past} {gap_text(g)} pooled")
    parts[0] += f" after the fact, {gap_text(longest['gaps'][RECIPES[0]])} in the longest cell"
    parts[1] += f", {gap_text(longest['gaps'][RECIPES[1]])} there"
    lead = "**Bottom line:** fixed-first trails uniform where uniform starts at most"
    lead += f" {max(r['late'] for r in own):.0f} steps late: " + "; ".join(parts) + "."
    ahead = [r for r in rows if r["at"] and any(g["hi"] < 0 for g in r["gaps"].values())]
    late = " and ".join(f"{r['late']:.0f}" for r in ahead)
    return lead + (f" Ahead only where uniform starts {late} steps late." if ahead else "")
