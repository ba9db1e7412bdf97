"""The numbers a reader takes from README.md and docs/RESULTS.md, recomputed from results/*.json
by a path of their own: plain arithmetic on the per-run NLLs, no looped code. A gap is the
seed-paired relative NLL difference to uniform, its 95% interval Student's t over log ratios,
its verdict the rule the docs state (lo > tol: worse; inside +-tol: within tolerance; ...)."""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UNIFORM = "uniform:1-16"
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365}  # t quantiles by df
NUMBER = r"([-+]\d+\.\d+)%?"
TRIPLE = re.compile(rf"{NUMBER}% \[{NUMBER}, {NUMBER}\]")


def _json(name: str) -> dict:
    return json.loads((ROOT / "results" / name).read_text())


def _names(schedule: str, text: str) -> bool:
    """Whether a cell names this fixed-first schedule: "K=4 (80%)" or "K=4 for 80%" for
    fixed-first:k=4,frac=0.8."""
    spec = dict(kv.split("=") for kv in schedule.split(":", 1)[1].split(",")[:2])
    return bool(re.search(rf"\bK={spec['k']}\b\D*\b{round(float(spec['frac']) * 100)}%", text))


def _interval(gaps: list[float], crit: float | None = None) -> tuple[float, float, float]:
    """(mean, lo, hi) in percent: Student's t over the log ratios, mapped back; CRIT replaces
    the t quantile where a cell took a second round of seeds (a group-sequential look)."""
    logs = [math.log1p(g) for g in gaps]
    n = len(logs)
    mean = sum(logs) / n
    crit = T975[n - 1] if crit is None else crit
    half = crit * math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1) / n)
    return tuple(100 * math.expm1(v) for v in (mean, mean - half, mean + half))


def _verdict(lo: float, hi: float, tol: float, informative: bool = True) -> str:
    """The docs' rule, in percent."""
    if not informative:
        return "not informative"
    if -tol <= lo and hi <= tol:
        return "within tolerance"
    if hi < 0:
        return "better"
    if hi <= tol:
        return "no worse than tolerance"
    if lo > tol:
        return "worse"
    return "undecided, behind" if lo > 0 else "undecided"  # the interval clears zero


def _agrees(shown: str, mine: tuple[float, float, float]) -> None:
    """The first "+a% [+b, +c]" in a cell matches a recomputed (mean, lo, hi) to its rounding
    (the docs' interval is group-sequential: at a single look it is the t interval, up to the
    simulation that sets its critical value)."""
    found = TRIPLE.search(shown)
    assert found, f"no gap [interval] in {shown!r}"
    half = (mine[2] - mine[1]) / 2
    for said, value in zip(map(float, found.groups()), mine):
        assert abs(said - value) <= 0.006 + 0.002 * half, f"{shown!r}: recomputed {mine}"


def _tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table of a text, each a list of {header: cell} rows."""
    tables, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            head, rows = block[0], [r for r in block[1:] if not set("".join(r)) <= set("-: ")]
            tables.append([dict(zip(head, r)) for r in rows])
            block = []
    return tables


def _table(text: str, column: str) -> list[dict[str, str]]:
    return next(t for t in _tables(text) if t and column in t[0])


def _section(path: str, name: str) -> str:
    """A generated section of a page; RESULTS' appendix page (docs/HISTORY.md) counts as RESULTS."""
    text = (ROOT / path).read_text()
    if path == "docs/RESULTS.md":
        text = _results_text()
    return re.search(rf"<!-- {name}:begin -->\n(.*?)<!-- {name}:end -->", text, re.S).group(1)


def _results_text() -> str:
    """RESULTS and its appendix page, the history, as one text."""
    return "\n".join((ROOT / "docs" / name).read_text() for name in ("RESULTS.md", "HISTORY.md"))


def _where(row: dict[str, str]) -> tuple[int, int, int]:
    """A table row's cell: "d=64, BPE-512, 1,044 steps" in one column."""
    d, v, steps = re.match(r"d=(\d+), BPE-(\d+), ([\d,]+) steps", row["cell"]).groups()
    return int(d), int(v), int(steps.replace(",", ""))


# -- the map: results/map.json -------------------------------------------------------------------
MAP = _json("map.json")
BLOCK = MAP["blocks"]["d64"]  # the block README's verdict table reads
FIXED_FIRST = [s for s in BLOCK["meta"]["settings"]["schedules"] if s != UNIFORM]


def _nll(row: dict, depth: int | None = None) -> float:
    """A run's test NLL: at one serving depth, or the mean over K=1..16."""
    per_depth = row["token_nll"]
    return per_depth[depth - 1] if depth else sum(per_depth) / len(per_depth)


def _tolerance(schedule: str) -> float:
    """The tolerance the README's glossary states for this schedule, in percent."""
    lines = (ROOT / "README.md").read_text().splitlines()
    line = next(x for x in lines if x.startswith("- **tolerance**"))  # the glossary's entry
    said = re.findall(r"(\d+\.\d+)% for (K=\d+ \(\d+%\))", line)
    (tol,) = [float(t) for t, name in said if _names(schedule, name)]
    return tol


def _map_runs(block: dict, schedule: str, steps: int) -> dict[int, dict]:
    lr = block["shared_lr"][str(steps)]
    return {
        r["seed"]: r
        for r in block["rows"]
        if r["schedule"] == schedule and r["steps"] == steps and r["lr"] == lr
    }


def _paired(
    d: int, schedule: str, vocab: int = 512, results: dict = MAP
) -> dict[int, tuple[dict, list[dict], list[dict]]]:
    """Width d's lengths at this vocabulary, on one pass, where `schedule` and uniform share two
    or more seeds: {steps: (block, its runs, uniform's runs)}, paired by seed."""
    blocks = [
        b
        for b in results["blocks"].values()
        if any(r["d_model"] == d and r["vocab_size"] == vocab for r in b["rows"])
        and any(r["schedule"] == schedule for r in b["rows"])
    ]
    paired = {}
    for b in blocks:
        train = b["meta"]["corpus"]["splits"]["train"]["tokens"]
        for steps in {r["steps"] for r in b["rows"]}:
            ours, ref = _map_runs(b, schedule, steps), _map_runs(b, UNIFORM, steps)
            seeds = sorted(set(ours) & set(ref))
            if len(seeds) > 1 and ours[seeds[0]]["tokens"] <= train:
                paired[steps] = (b, [ours[s] for s in seeds], [ref[s] for s in seeds])
    return paired


def _judged(results: dict):
    """Every (d, vocab, steps, schedule, its runs, uniform's) of a map where the cell has a
    verdict: the arm's runs and uniform's all beat the bigram table, paired by seed."""
    for d, v in sorted(
        {(r["d_model"], r["vocab_size"]) for b in results["blocks"].values() for r in b["rows"]}
    ):
        for schedule in FIXED_FIRST:
            for steps, (b, ours, ref) in _paired(d, schedule, v, results).items():
                if max(map(_nll, ours + ref)) < b["baselines"]["test"]["bigram"]:
                    yield d, v, steps, schedule, ours, ref


def _sweep(block: dict) -> tuple[dict[float, list[dict]], dict[float, float]]:
    """A block's LR sweep rows by LR, and each LR's mean validation NLL over its LR seeds."""
    by_lr: dict[float, list[dict]] = {}
    for r in block["sweep"]:
        by_lr.setdefault(r["lr"], []).append(r)
    return by_lr, {lr: sum(r["val_nll"] for r in v) / len(v) for lr, v in by_lr.items()}


def test_the_readme_finding_is_each_widths_longest_one_pass_gap_on_the_map():
    """Each width (BPE-512) at its longest length on one pass with two or more seeds, and at the
    longest length every width reached (in tokens per non-embedding parameter), then the other
    vocabularies at that matched length; each recipe's gap recomputed from the runs' per-depth
    NLLs and the verdict by the rule, at the tolerance its column states."""
    rows = _table(_section("docs/RESULTS.md", "finding"), "regime")
    shown = []
    for r in rows:
        got = re.match(r"d=(\d+)(?:, BPE-(\d+), ([\d,]+) steps)?", r["regime"]).groups()
        shown.append(
            (int(got[0]), int(got[1] or 512), int(got[2].replace(",", "")) if got[2] else None)
        )
    base = [(d, n) for d, v, n in shown if v == 512]
    assert base == sorted(base, key=lambda x: (x[0], x[1] or 0))
    assert [v for _, v, _ in shown] == sorted(v for _, v, _ in shown)  # BPE-512 first
    pairs = {(d, v): {s: _paired(d, s, v) for s in FIXED_FIRST} for d, v, _ in shown}
    # each width's paired lengths in tokens per non-embedding parameter
    tpp = {k: {n: t for s in FIXED_FIRST for n, t in _tpp_of(pairs[k][s]).items()} for k in pairs}
    reached = [max(t.values()) for (_, v), t in tpp.items() if t and v == 512]
    matched = round(min(reached))
    for (d, v), t in tpp.items():  # the rows shown are exactly the longest and the matched lengths
        want = {
            n for n, x in t.items() if round(x) == matched or (v == 512 and x == max(t.values()))
        }
        assert {n for w, u, n in shown if (w, u) == (d, v)} == (want or {None}), (d, v)
    ran = {(r["d_model"], r["vocab_size"]) for b in MAP["blocks"].values() for r in b["rows"]}
    for d, v in ran - {(d, 512) for d, _ in ran}:  # each other vocabulary at the matched length
        reach = [_tpp_of(_paired(d, s, v)).values() for s in FIXED_FIRST]
        assert (d, v) in pairs or not any(round(x) == matched for t in reach for x in t), (d, v)
    for (d, v, steps), row in zip(shown, rows):
        pairs_d = pairs[(d, v)]
        for schedule in FIXED_FIRST:
            (column,) = [k for k in row if _names(schedule, k)]
            cell, tol = row[column], float(re.search(r"tolerance (\d+\.\d+)%", column).group(1))
            assert tol == _tolerance(schedule)
            if steps not in pairs_d[schedule]:  # not run, or seeds training: no pair yet
                assert cell == "not yet run"
                continue
            b, ours, ref = pairs_d[schedule][steps]
            mine = _interval([_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)])
            if len(ours) % 4:  # seeds come in rounds of four: a round still training
                # an interim look's interval is the group-sequential one (its critical value
                # simulated, not Student's t): the mean is recomputed, the label is checked
                assert cell.endswith("(interim look)")
                assert abs(float(TRIPLE.search(cell).group(1)) - mine[0]) <= 0.006
                continue
            _agrees(cell, mine)
            assert f"{len(ours)} seeds" in cell and f"{steps:,} steps" in row["regime"]
            bigram = b["baselines"]["test"]["bigram"]
            missed = {
                s: [_nll(r) >= bigram for r in _map_runs(b, s, steps).values()]
                for s in (UNIFORM, schedule)
            }
            said = cell.split(": ", 1)[1]
            if not any(map(any, missed.values())):
                assert said.split(" (")[0] == _verdict(mine[1], mine[2], tol)  # marks aside
            elif all(map(all, missed.values())):
                assert said == "no verdict: no model beat the bigram table"
            else:  # whose models stayed above the table, in how many seeds
                for who, s in (("uniform", UNIFORM), ("fixed-first", schedule)):
                    m, n = sum(missed[s]), len(missed[s])
                    assert (f"{who} missed the bigram table in {m} of {n} seeds" in said) == (m > 0)


def _tpp_of(paired: dict) -> dict[int, float]:
    return {n: x[1][0]["tokens"] / x[1][0]["params_non_embedding"] for n, x in paired.items()}


def _block_gaps(block: dict, schedule: str, steps: int) -> list[float]:
    ours, ref = _map_runs(block, schedule, steps), _map_runs(block, UNIFORM, steps)
    assert sorted(ours) == sorted(ref) and len(ours) > 1, "gaps are paired by seed"
    return [_nll(ours[s]) / _nll(ref[s]) - 1 for s in sorted(ours)]


def _judged_lengths(block: dict) -> list[int]:
    """The block's lengths on one pass whose every reported model beats the bigram table."""
    train = block["meta"]["corpus"]["splits"]["train"]["tokens"]
    out = []
    for steps in sorted({r["steps"] for r in block["rows"]}):
        runs = [r for s in (UNIFORM, *FIXED_FIRST) for r in _map_runs(block, s, steps).values()]
        beats = max(_nll(r) for r in runs) < block["baselines"]["test"]["bigram"]
        if beats and runs[0]["tokens"] <= train:
            out.append(steps)
    return out


def test_the_readme_verdicts_on_text_are_the_d64_blocks_longest_gaps():
    rows = [
        r
        for r in _table(_section("README.md", "verdicts"), "tolerance")
        if r["measured on"].startswith("text")
    ]
    assert len(rows) == len(FIXED_FIRST)
    # the map's d64, or that length rerun under a recipe the probe chose, as the rows name it
    (on,) = {r["measured on"] for r in rows}
    rerun = re.search(r"--recipe (\w+)`, block ([\w-]+)", on)
    block = _json(f"map-{rerun[1]}.json")["blocks"][rerun[2]] if rerun else BLOCK
    longest = max(_judged_lengths(block))
    assert longest == max(_judged_lengths(BLOCK))  # the same cell, whichever recipe trained it
    for schedule in FIXED_FIRST:
        (row,) = [r for r in rows if _names(schedule, r["paper claim"])]
        gaps = _block_gaps(block, schedule, longest)
        mine = _interval(gaps)
        _agrees(next(v for k, v in row.items() if k.startswith("gap to uniform")), mine)
        assert (row["steps"], row["seeds"]) == (str(longest), str(len(gaps)))
        run = next(iter(_map_runs(block, schedule, longest).values()))
        assert row["tokens/param"].startswith(f"{run['tokens'] / run['params_non_embedding']:.0f}")
        assert row["verdict"] == _verdict(mine[1], mine[2], _tolerance(schedule))


def test_every_gap_of_the_map_table_recomputes_from_the_runs():
    """Each row of RESULTS' map table (the main arms): the gap from the per-depth NLLs, paired by
    seed, and its verdict by the rule (past one pass: never judged)."""
    rows = _table(_section("docs/RESULTS.md", "map"), "arm")
    checked = 0
    for row in rows:
        schedule = next((s for s in FIXED_FIRST if _names(s, row["arm"])), None)
        d, vocab, steps = _where(row)
        pairs = _paired(d, schedule, vocab) if schedule else {}
        if steps not in pairs:
            continue
        _, ours, ref = pairs[steps]
        mine = _interval([_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)])
        cell = next(v for k, v in row.items() if k.startswith("gap to uniform"))
        if len(ours) % 4:  # an interim look: a group-sequential interval, its mean recomputed
            assert abs(float(TRIPLE.search(cell).group(1)) - mine[0]) <= 0.006
            continue
        _agrees(cell, mine)
        checked += 1
    assert checked >= 8


def _crit(result: dict, d: int, vocab: int, n: int) -> float:
    """The group-sequential critical value of the looks the cell's block planned, the seeds' own
    count among them (`stats.sequential_critical`, a simulation this test does not redo): the t
    quantile for a block of one look, wider at every look of a block that planned two."""
    from looped.studies.stats import planned_looks, sequential_critical

    (looks,) = {
        tuple(planned_looks(b["meta"]["settings"]["rounds"], b["meta"]["settings"]["max_seeds"]))
        for b in result["blocks"].values()
        if any(
            (c.get("d_model"), c.get("vocab_size"), c.get("seeds")) == (d, vocab, n)
            for c in b["cells"]
        )
    }
    return sequential_critical(tuple(sorted({*looks, n})))


def test_the_maps_rerun_recomputes_and_its_prose_quotes_its_tables():
    """The map under each recipe it was rerun under (RESULTS' rerun tables, one part per recipe):
    each gap from that recipe's own runs, paired by seed; every "a% [b, c]" the prose above the
    tables gives is one of the maps' tables."""
    section = _section("docs/RESULTS.md", "map_rerun")
    section += _section("docs/HISTORY.md", "map_rerun_earlier")
    parts = re.split(r"\*\*Under `([\w]+)`\*\*", section)[1:]
    assert parts, "the rerun section names no recipe"
    checked = 0
    for name, part in zip(parts[::2], parts[1::2]):
        rerun = _json(f"map-{name}.json")
        for row in _table(part, "arm"):
            schedule = next(s for s in FIXED_FIRST if _names(s, row["arm"]))
            d, vocab, steps = _where(row)
            _, ours, ref = _paired(d, schedule, vocab, rerun)[steps]
            cell = next(v for k, v in row.items() if k.startswith("gap to uniform"))
            gaps = [_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)]
            _agrees(cell, _interval(gaps, _crit(rerun, d, vocab, len(gaps))))
            checked += 1
    assert checked >= 8
    text = _results_text()
    prose = text.split("## The reruns under the 2% warmup, block by block")[1].split("\n## ")[0]
    tables = section + _section("docs/RESULTS.md", "map")
    quoted = [m.group(0) for m in TRIPLE.finditer(prose)]
    assert len(quoted) >= 3 and all(q in tables for q in quoted)
    readme = (ROOT / "README.md").read_text().split("## What we found so far")[1]
    readme = readme.split("<!-- finding_rerun:begin")[0]
    assert any(n in readme for n in parts[::2])
    assert all(m.group(0) in tables for m in TRIPLE.finditer(readme))  # either map's tables


def test_the_readme_rerun_finding_recomputes_under_both_recipes():
    """README's finding under the chosen recipe: each arm's gap from that recipe's runs, and after
    "first recipe:" the same cell's gap from map.json's, each paired by seed and recomputed here;
    a verdict cell gives the verdict the docs' rule reads off its interval."""
    chosen = _json("recipe.json")["chosen_recipe"]["recipe"]
    section = _section("README.md", "finding_rerun")
    assert f"Under `{chosen}`" in section
    rerun, checked = _json(f"map-{chosen}.json"), 0
    rows = _table(section, "cell")
    shown = []
    for row in rows:
        d, v, steps = re.match(r"d=(\d+), BPE-(\d+), ([\d,]+) steps", row["cell"]).groups()
        shown.append((int(d), int(v), int(steps.replace(",", ""))))
    # the rows: each width and vocabulary's longest paired length, and every length with a
    # verdict (an arm whose runs and uniform's all beat the bigram table there)
    want = set()
    for d, v in {
        (r["d_model"], r["vocab_size"]) for b in rerun["blocks"].values() for r in b["rows"]
    }:
        paired = {s: _paired(d, s, v, rerun) for s in FIXED_FIRST}
        lengths = {n for p in paired.values() for n in p}
        for n in lengths:
            verdict = any(
                max(map(_nll, p[n][1] + p[n][2])) < p[n][0]["baselines"]["test"]["bigram"]
                for p in paired.values()
                if n in p
            )
            if verdict or n == max(lengths):
                want.add((d, v, n))
    assert sorted(shown) == sorted(want) and len(shown) == len(set(shown))
    for row, (d, v, steps) in zip(rows, shown):
        for schedule in FIXED_FIRST:
            (column,) = [k for k in row if _names(schedule, k)]
            new, _, old = row[column].partition("; first recipe: ")
            for said, results in ((new, rerun), (old, MAP)):
                if not said:
                    continue
                _, ours, ref = _paired(d, schedule, v, results)[steps]
                gaps = [_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)]
                mine = _interval(gaps, _crit(results, d, v, len(gaps)))
                _agrees(said, mine)
                if "no verdict" not in said:
                    verdict = said.split("], ")[1]
                    assert verdict == _verdict(mine[1], mine[2], _tolerance(schedule)), said
                checked += 1
    assert checked == 2 * len(FIXED_FIRST) * len(rows)  # every cell, under both recipes


def test_the_pooled_gaps_recompute_per_seed_from_the_runs_of_the_cells_they_name():
    """The first recipe's pooled sentence (the history page): each seed's gap (mean over depths, ratio to uniform) averaged
    over the cells the sentence names, then the t interval over seeds."""
    said = _section("docs/RESULTS.md", "pooled")
    named = [(int(d), int(n.replace(",", ""))) for d, n in re.findall(r"d=(\d+) at ([\d,]+)", said)]
    assert len(named) >= 2
    for schedule in FIXED_FIRST:
        per_seed: dict[int, list[float]] = {}
        for d, steps in named:
            _, ours, ref = _paired(d, schedule)[steps]
            for o, u in zip(ours, ref):
                per_seed.setdefault(o["seed"], []).append(_nll(o) / _nll(u) - 1)
        pooled = [sum(v) / len(v) for v in per_seed.values()]
        (part,) = [p for p in said.split(";") if _names(schedule, p)]
        _agrees(part, _interval(pooled))


def test_the_gap_trend_is_a_least_squares_slope_per_seed_over_the_informative_lengths():
    """Per seed, the gap against log2(tokens) over the d64 block's lengths whose models beat
    the bigram; the slopes' mean and t interval (a plain difference), in percent per doubling."""
    lengths = _judged_lengths(BLOCK)
    rows = _table(_section("README.md", "verdicts"), "direction")
    for schedule in FIXED_FIRST:
        (row,) = [r for r in rows if _names(schedule, r["schedule"])]
        by_length = [_block_gaps(BLOCK, schedule, n) for n in lengths]
        xs = [math.log2(n) for n in lengths]
        mx = sum(xs) / len(xs)
        slopes = []
        for seed_gaps in zip(*by_length):
            my = sum(seed_gaps) / len(seed_gaps)
            cov = sum((x - mx) * (y - my) for x, y in zip(xs, seed_gaps))
            slopes.append(100 * cov / sum((x - mx) ** 2 for x in xs))
        n, mean = len(slopes), sum(slopes) / len(slopes)
        half = T975[n - 1] * math.sqrt(sum((s - mean) ** 2 for s in slopes) / (n - 1) / n)
        _agrees(
            next(v for k, v in row.items() if k.startswith("gap change")),
            (mean, mean - half, mean + half),
        )
        assert row["lengths"] == str(len(lengths)) and row["seeds"] == str(n)
        rising, falling = mean - half > 0, mean + half < 0
        assert row["direction"] == (
            "rising" if rising else "falling" if falling else "no clear trend"
        )


# -- the demo's bios track: results/demo.json -------------------------------------------------
def test_the_readme_verdicts_on_memorised_facts_recompute_from_the_demo_runs():
    """Fact NLL (mean over depths) per seed: fixed-first at equal tokens (its `tokens` runs, as
    many steps as uniform) and at equal FLOPs (its full-budget run), against uniform's."""
    runs = _json("demo.json")["runs"]
    ff = next(s for s in {r["schedule"] for r in runs} if s.startswith("fixed-first"))

    def fact_nll(schedule: str, group: str, budget: float) -> dict[int, float]:
        return {
            r["seed"]: sum(r["fact_nll"]) / len(r["fact_nll"])
            for r in runs
            if (r["schedule"], r["group"], r["budget"]) == (schedule, group, budget)
        }

    uniform = fact_nll(UNIFORM, "main", 1.0)
    rows = [
        r
        for r in _table(_section("README.md", "verdicts"), "tolerance")
        if "bios" in r["measured on"]
    ]
    for claim, (group, budget) in {
        "equal tokens": ("tokens", 0.0),
        "equal FLOPs": ("main", 1.0),
    }.items():
        ours = fact_nll(ff, group, budget)
        assert sorted(ours) == sorted(uniform)
        mine = _interval([ours[s] / uniform[s] - 1 for s in sorted(uniform)])
        (row,) = [r for r in rows if claim in r["paper claim"]]
        _agrees(next(v for k, v in row.items() if k.startswith("gap to uniform")), mine)
        assert row["seeds"] == str(len(uniform))
        assert row["verdict"] == _verdict(mine[1], mine[2], float(row["tolerance"].rstrip("%")))


def test_how_to_read_the_bios_tables_recomputes_the_equal_token_seeds():
    """At equal tokens, fixed-first's per-seed range and fixed K=4's side, from demo.json."""
    from looped import paper

    page = _results_text()
    said = " ".join(page[page.index("How to read the bios tables") :].split()[:80])
    tok = {r["schedule"]: r["gap"]["values"] for r in _json("demo.json")["summary_tokens"]}
    ff = sorted(100 * v for v in tok[paper.FIXED_FIRST])
    assert max(ff) < 0 and f"ahead in every seed ({ff[-1]:.1f}% to {ff[0]:.1f}%)" in said
    assert min(tok[paper.FIXED]) > 0 and "fixed K=4 ends behind uniform in all three" in said


def test_what_the_recipe_changed_in_the_demo_recomputes_from_both_references():
    """RESULTS' paragraphs on the demo under the chosen recipe: uniform's fact NLL per seed on
    bios; on text, where the chosen recipe is the old one, that the runs repeat (uniform's seed 0
    to its numerics), and what the probe's first choice did to that seed, each read from the
    references under the new recipe, the one it replaced and the first choice."""
    page = _results_text()
    start = page.index("On bios the recipe lifted")
    said = page[start : page.index("## As training lengthens", start)]

    def bios(name: str) -> dict[int, float]:
        return {
            r["seed"]: sum(r["fact_nll"]) / len(r["fact_nll"])
            for r in _json(name)["runs"]
            if (r["schedule"], r["group"], r["budget"]) == (UNIFORM, "main", 1.0)
        }

    flat = " ".join(said.split())
    new, old = bios("demo.json"), bios("demo-w20_i1.json")
    assert sorted(new) == sorted(old) == [0, 1, 2]
    moves = [f"{100 * (new[s] / old[s] - 1):+.1f}%" for s in (0, 1, 2)]
    assert (
        f"{moves[0]}, {moves[1]} and {moves[2]} (seed 1 from {old[1]:.3f} to {new[1]:.3f})" in flat
    )
    mean = [sum(d.values()) / 3 for d in (old, new)]
    assert f"fell from {mean[0]:.3f} to {mean[1]:.3f}" in flat

    def text(name: str) -> dict[tuple[str, int], dict]:
        runs = _json(name)["runs"]
        return {(r["schedule"], r["seed"]): r for r in runs if r["steps"] == 480}

    # text: the chosen recipe is the old one at 480 steps, so its runs repeat the old ones
    new_t, old_t = text("demo_text.json"), text("demo_text-w10_i1.json")
    assert sorted(new_t) == sorted(old_t)
    arms = [k for k in new_t if k[0] != UNIFORM]
    assert all(round(new_t[k]["mean_nll"], 4) == round(old_t[k]["mean_nll"], 4) for k in arms)
    near = [abs(new_t[UNIFORM, s]["mean_nll"] / old_t[UNIFORM, s]["mean_nll"] - 1) for s in (1, 2)]
    assert max(near) < 1e-4
    nll = (new_t[UNIFORM, 0]["mean_nll"], old_t[UNIFORM, 0]["mean_nll"])
    assert f"seed 0 ended at {nll[0]:.3f} against {nll[1]:.3f}" in flat
    curves = [[p[1] for p in t[UNIFORM, 0]["curve"]] for t in (new_t, old_t)]
    parted = next(i for i, (x, y) in enumerate(zip(*curves)) if x != y)
    assert f"fifth digit at step {new_t[UNIFORM, 0]['curve'][parted][0]}" in flat
    assert abs(curves[0][parted] / curves[1][parted] - 1) < 1e-4
    # and under the probe's first choice (the depth-aware init), seed 0 escaped late
    i16 = text("demo_text-w2pct_i16.json")[UNIFORM, 0]
    steps = (i16["escape_step"], old_t[UNIFORM, 0]["escape_step"])
    assert f"step {steps[0]} instead of {steps[1]}" in flat
    nll = (i16["mean_nll"], old_t[UNIFORM, 0]["mean_nll"])
    assert f"at {nll[0]:.3f} against {nll[1]:.3f} ({100 * (nll[0] / nll[1] - 1):+.1f}%)" in flat


def test_an_end_printed_on_the_tolerance_is_given_unrounded_where_the_prose_reads_it():
    """A verdict whose interval end rounds onto the tolerance (d=64 at 1,044 steps under
    w2pct_i1: +0.80 against 0.8%) is read in RESULTS from the unrounded end, quoted there."""
    rerun = _json("map-w2pct_i1.json")["blocks"]["d64-80"]
    (cell,) = [c for c in rerun["cells"] if c["schedule"] == FIXED_FIRST[0] and "gap" in c]
    lo = 100 * cell["gap"]["lo"]
    assert f"{lo:.2f}" == "0.80" and lo > 0.8 and cell["verdict"] == "worse"
    text = " ".join(_results_text().split())
    assert f"end, {lo:.3f}%, just past its 0.8% tolerance" in text


def test_the_repeated_bpe4096_cell_moves_as_results_says():
    """d=64 with BPE-4096 at 522 steps: `w2pct_i1` is the map's own recipe there (10 warmup
    steps, the block counted once), so RESULTS reads the rerun as a repeat: the escape steps
    repeat, and the runs' NLLs move by the median and maximum it quotes, both from the files."""
    old = _json("map.json")["blocks"]["d64-bpe4096"]["cells"]
    new = _json("map-w2pct_i1.json")["blocks"]["d64-bpe4096"]["cells"]
    moved = []
    for a, b in zip(old, new, strict=True):
        assert a["schedule"] == b["schedule"] and a["seed_ids"] == b["seed_ids"]
        moved += [abs(y / x - 1) * 100 for x, y in zip(a["seed_nll"], b["seed_nll"])]
    uniform = [c["escape_steps"] for c in (old[0], new[0])]
    assert uniform[0] == uniform[1], "uniform's escape steps no longer repeat"
    moved.sort()
    median = (moved[len(moved) // 2 - 1] + moved[len(moved) // 2]) / 2
    text = " ".join(_results_text().split())
    said = f"the {len(moved)} runs moved by a median {median:.1f}% and at most {moved[-1]:.1f}%"
    assert said in text
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"NLLs moved by a median {median:.1f}%" in readme


def test_the_kernel_path_sentence_reads_its_file():
    """RESULTS' account of the repeat's divergence quotes scripts/kernel_paths.py's output: the
    first step whose loss parts under two dispatch levels, and how far apart the last step is."""
    lines = (ROOT / "results/kernel_paths.txt").read_text().splitlines()
    first = int(lines[1].rsplit(":", 1)[1])
    *_, step, a, b = lines[-1].split()
    apart = abs(float(b) / float(a) - 1) * 100
    text = " ".join(_results_text().split())
    assert f"parts at step {first} and ends {apart:.2f}% apart at step {step}" in text


def test_the_d128_sweep_sentence_reads_its_rows():
    """RESULTS' d128-20 sweep: the LR chosen and each LR's mean validation NLL over the LR
    seeds, as the block's sweep rows give them."""
    block = _json("map-w2pct_i1.json")["blocks"]["d128-20"]
    by_lr, mean = _sweep(block)
    best = min(mean, key=mean.get)
    assert best == block["shared_lr"]["1042"] == 0.001 and len(by_lr[best]) == 2
    text = " ".join(_results_text().split())
    said = f"mean validation NLL {mean[0.001]:.3f} over the two LR seeds, against "
    said += f"{mean[0.003]:.3f} at 0.003 and {mean[0.000333]:.3f} at 0.000333"
    assert said in text


def test_the_d128_bpe4096_sweep_sentence_reads_its_rows():
    """RESULTS' d128-bpe4096 sweep under w2pct_i1: the LR chosen, each LR's mean validation NLL
    over the LR seeds, and uniform's escape steps, as the block's sweep rows give them."""
    block = _json("map-w2pct_i1.json")["blocks"]["d128-bpe4096"]
    by_lr, mean = _sweep(block)
    assert min(mean, key=mean.get) == block["shared_lr"]["2084"] == 0.001
    assert all(len(v) == 2 for v in by_lr.values())
    text = " ".join(_results_text().split())
    said = f"mean validation NLL {mean[0.001]:.3f}, against {mean[0.01]:.3f} at 0.01 (which the"
    said += f" first recipe chose here), {mean[0.003]:.3f} at 0.003 and {mean[0.000333]:.3f} at"
    said += " 0.000333"
    assert said in text
    first = [e for lr in (0.001, 0.003, 0.01) for e in (r["escape_step"] for r in by_lr[lr])]
    low = {r["escape_step"] for r in by_lr[0.000333]}
    (at,) = low
    assert f"at steps {min(first)} to {max(first)} at the first three and at {at}" in text


def test_the_d64_160_sweep_sentence_reads_its_rows():
    """RESULTS' d64-160 sweep: the LR chosen, each LR's mean validation NLL over the LR seeds
    and uniform's escape steps, as the block's sweep rows give them."""
    block = _json("map-w2pct_i1.json")["blocks"]["d64-160"]
    by_lr, mean = _sweep(block)
    assert min(mean, key=mean.get) == block["shared_lr"]["2088"] == 0.003
    text = " ".join(_results_text().split())
    said = f"chose 0.003, inside the grid (mean validation NLL {mean[0.003]:.3f} over the two LR "
    said += f"seeds, against {mean[0.01]:.3f} at 0.01 and {mean[0.001]:.3f} at 0.001"
    assert said in text
    escapes = {lr: sorted(r["escape_step"] for r in v) for lr, v in by_lr.items()}
    assert escapes == {0.003: [230, 230], 0.01: [400, 580], 0.001: [400, 420]}
    assert "at 400 and 580 at 0.01, at 400 and 420 at 0.001" in text
    # its reported seeds: uniform's escape steps against the arms', and both arms behind in each
    cells = {c["schedule"]: c for c in block["cells"]}
    uni = sorted(cells[UNIFORM]["escape_steps"])
    compared = [s for s in block["meta"]["settings"]["schedules"] if s != UNIFORM]
    arms = [statistics.median(cells[s]["escape_steps"]) for s in compared]
    said = f"median step {statistics.median(uni):g}, {uni[0]} to {uni[-1]}, against the arms' "
    assert said + f"{arms[0]:g} and {arms[1]:g})" in text
    assert all(v > 0 for s in compared for v in cells[s]["gap"]["values"])
    assert "both arms end behind uniform in all four seeds" in text


def test_notebook_07s_intervals_are_the_reports_tables():
    """Every "a% [b, c]" notebook 07's prose gives (in LaTeX, "$+2.76\\%$ $[+1.83, +3.70]$") is one
    of the generated tables of README or RESULTS, which the tests above recompute from the runs."""
    nb = (ROOT / "notebooks/07_uniform_lags.py").read_text().replace("$", "").replace("\\%", "%")
    nb = re.sub(r"\n# ?", " ", nb)  # a markdown line's comment mark: one interval may span two
    generated = ""
    for doc in ("README.md", "docs/RESULTS.md", "docs/HISTORY.md"):
        text = (ROOT / doc).read_text()
        generated += " ".join(
            m[1] for m in re.findall(r"<!-- (\w+):begin -->\n(.*?)<!--", text, re.S)
        )
    said = [
        m.groups() for m in re.finditer(r"([-+]\d+\.\d+)% \[([-+]\d+\.\d+), ([-+]\d+\.\d+)\]", nb)
    ]
    assert len(said) >= 10
    missing = [f"{a}% [{b}, {c}]" for a, b, c in said if f"{a}% [{b}, {c}]" not in generated]
    assert not missing, f"notebook 07 gives intervals no table holds: {missing}"


def test_the_rerun_cells_at_single_depths_recompute_from_the_runs():
    """RESULTS' table of the chosen recipe's cells at serving depths 1, 4 and 16: each depth's
    gap recomputed from the runs' per-depth NLLs, paired by seed, with the cell's critical value;
    the rows are exactly the cells with a verdict (an arm and uniform past the bigram table)."""
    chosen = _json("recipe.json")["chosen_recipe"]["recipe"]
    rerun = _json(f"map-{chosen}.json")
    section = _section("docs/RESULTS.md", "map_depths")
    assert f"Under `{chosen}`" in section
    rows, shown = _table(section, "arm"), set()
    for row in rows:
        d, v, steps = _where(row)
        schedule = next(s for s in FIXED_FIRST if _names(s, row["arm"]))
        _, ours, ref = _paired(d, schedule, v, rerun)[steps]
        crit = _crit(rerun, d, v, len(ours))
        for depth in (None, 1, 4, 16):
            gaps = [_nll(o, depth) / _nll(u, depth) - 1 for o, u in zip(ours, ref)]
            column = next(k for k in row if k.startswith(f"at K={depth} " if depth else "mean"))
            _agrees(row[column], _interval(gaps, crit))
        shown.add((d, v, steps, schedule))
    want = {(d, v, steps, schedule) for d, v, steps, schedule, _, _ in _judged(rerun)}
    assert shown == want and len(rows) == len(want) >= 8
    prose = _results_text().split("<!-- map_depths:end -->")[1]
    prose = " ".join(prose.split("\n## ")[0].split())
    quoted = [m.group(0) for m in TRIPLE.finditer(prose)]
    assert all(q in section for q in quoted)
    # each range the paragraph gives runs from the lowest of its cells to the highest
    for arm, depth, vocab, said in (
        (
            "K=4 (80%)",
            "1",
            None,
            r"at K=1 it ends 10 to 14% behind uniform .*?, from ({T}) .*? to ({T})",
        ),
        (
            "K=2 (67%)",
            "16",
            "512",
            r"at K=16 it is behind in every BPE-512 cell, from ({T}) to ({T})",
        ),
    ):
        cells = [
            r[f"at K={depth} [95%]"]
            for r in rows
            if arm in r["arm"] and vocab in (None, str(_where(r)[1]))
        ]
        cells.sort(key=lambda c: float(TRIPLE.search(c).group(1)))
        found = re.search(said.format(T=TRIPLE.pattern), prose)
        assert found and (found[1], found[found.lastindex]) == (cells[0], cells[-1]), arm


def test_the_readmes_one_cell_ahead_is_the_only_one_and_its_delays_are_its_runs():
    """README's finding: the cells with a verdict under the chosen recipe
    whose interval lies below zero (one, named with its arm and interval), and how many steps
    after that arm uniform left its plateau in each seed, from the runs' escape steps."""
    chosen = _json("recipe.json")["chosen_recipe"]["recipe"]
    rerun = _json(f"map-{chosen}.json")
    text = " ".join((ROOT / "README.md").read_text().split())
    ahead = []
    for d, v, _, schedule, ours, ref in _judged(rerun):
        gaps = [_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)]
        mine = _interval(gaps, _crit(rerun, d, v, len(gaps)))
        if mine[2] < 0:
            delays = [u["escape_step"] - o["escape_step"] for o, u in zip(ours, ref)]
            ahead.append((d, v, schedule, mine, delays))
    (cell,) = ahead
    d, v, schedule, mine, delays = cell
    assert f"One cell with a verdict under `{chosen}` puts fixed-first ahead" in text
    said = re.search(rf"d={d} with a ([\d,]+)-token tokenizer, where (K=\d \(\d+%\)) ends ", text)
    assert said and int(said[1].replace(",", "")) == v and _names(schedule, said[2])
    _agrees(text[said.end() :], mine)
    assert f"plateau {min(delays)} to {max(delays)} steps after that arm's" in text


def test_the_readme_says_where_each_arm_pays_as_the_depth_table_reads():
    """README's bullet on single serving depths: K=4 (80%)'s gap at K=1 in every cell with a
    verdict (its range in whole percent, each interval above zero), K=2 (67%)'s intervals at K=1
    all holding zero and at K=16 all above zero with BPE-512, as RESULTS' depth table gives them
    (which the test above recomputes from the runs)."""
    rows = _table(_section("docs/RESULTS.md", "map_depths"), "arm")

    def cells(arm: str, depth: int) -> list[tuple[float, float, float]]:
        column = f"at K={depth} [95%]"
        return [
            tuple(map(float, TRIPLE.search(r[column]).groups()))
            for r in rows
            if arm in r["arm"] and (depth != 16 or _where(r)[1] == 512)
        ]

    k4 = cells("K=4 (80%)", 1)
    assert all(lo > 0 for _, lo, _ in k4)
    low, high = round(min(m for m, _, _ in k4)), round(max(m for m, _, _ in k4))
    text = " ".join((ROOT / "README.md").read_text().split())
    assert (
        f"K=4 (80%) ends {low} to {high}% behind uniform at K=1 in every cell with a verdict"
        in text
    )
    assert all(lo < 0 < hi for _, lo, hi in cells("K=2 (67%)", 1))
    assert "K=2 (67%) is undetermined at K=1 (each interval holds zero)" in text
    assert all(lo > 0 for _, lo, _ in cells("K=2 (67%)", 16))
    assert "behind at K=16 in every BPE-512 cell" in text


# -- README's first screen and the numbers it and RESULTS add ----------------------------------
def _first_screen() -> str:
    """README above its glossary: what a newcomer reads first."""
    return (ROOT / "README.md").read_text().split("## Words")[0]


def _delay(ours: list[dict], ref: list[dict]) -> list[int]:
    return [u["escape_step"] - o["escape_step"] for o, u in zip(ours, ref)]


def test_the_bottom_line_recomputes_from_the_chosen_recipes_runs():
    """At most 50 words, verdict first: each arm's gap pooled after the fact over the BPE-512
    cells with a verdict (each seed's gaps averaged over the cells it ran in, Student's t over
    seeds), the longest such cell's gap alone, how late uniform starts (the median of its escape
    step less the arms', over both arms' seeds) there and in the one cell ahead; no recipe name
    in backticks on the first screen."""
    chosen = _json("recipe.json")["chosen_recipe"]["recipe"]
    rerun = _json(f"map-{chosen}.json")
    line = " ".join(_section("README.md", "bottom_line").split())
    assert len(line.split()) <= 50 and line.startswith("**Bottom line:** fixed-first trails")
    assert "`" not in _first_screen().split("```")[0]
    judged = list(_judged(rerun))
    own = {(d, steps) for d, v, steps, *_ in judged if v == 512}
    assert len(own) >= 2
    late = {}
    for d, v, steps, _, ours, ref in judged:
        late.setdefault((d, v, steps), []).extend(_delay(ours, ref))
    most = max(statistics.median(late[(d, 512, n)]) for d, n in own)
    assert f"where uniform starts at most {most:g} steps late:" in line
    longest = max(own, key=lambda k: k[1])
    parts = line.split("; ")
    for schedule, part in zip(FIXED_FIRST, parts):
        assert _names(schedule, part)
        per_seed: dict[int, list[float]] = {}
        for d, steps in own:
            _, ours, ref = _paired(d, schedule, 512, rerun)[steps]
            for o, u in zip(ours, ref):
                per_seed.setdefault(o["seed"], []).append(_nll(o) / _nll(u) - 1)
        pooled = _interval([sum(v) / len(v) for v in per_seed.values()])
        _agrees(part, pooled)
        assert ("past its tolerance" in part) == (pooled[1] > _tolerance(schedule))
        _, ours, ref = _paired(*longest[:1], schedule, 512, rerun)[longest[1]]
        gaps = [_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)]
        alone = _interval(gaps, _crit(rerun, longest[0], 512, len(gaps)))
        _agrees(part.split("pooled", 1)[1], alone)
    assert "pooled after the fact" in parts[0]
    ahead = []
    for d, v, steps, _, ours, ref in judged:
        gaps = [_nll(o) / _nll(u) - 1 for o, u in zip(ours, ref)]
        if _interval(gaps, _crit(rerun, d, v, len(gaps)))[2] < 0:
            ahead.append(statistics.median(late[(d, v, steps)]))
    (at,) = set(ahead)
    assert line.endswith(f"Ahead only where uniform starts {at:g} steps late.")


def test_the_seed_cells_behind_uniform_are_counted_from_the_runs():
    """README and RESULTS: in the BPE-512 cells with a verdict under the chosen recipe, how many
    seed-cells of each arm end behind uniform."""
    chosen = _json("recipe.json")["chosen_recipe"]["recipe"]
    counts = {}
    for _, v, _, schedule, ours, ref in _judged(_json(f"map-{chosen}.json")):
        if v == 512:
            behind, n = counts.get(schedule, (0, 0))
            counts[schedule] = (
                behind + sum(_nll(o) > _nll(u) for o, u in zip(ours, ref)),
                n + len(ours),
            )
    k4, k2 = (counts[s] for s in FIXED_FIRST)
    said = f"K=4 (80%) ends behind uniform in {k4[0]} of {k4[1]} seed-cells and K=2 (67%) in {k2[0]} of {k2[1]}"
    assert said in " ".join((ROOT / "README.md").read_text().split())
    said = f"K=4 (80%) in {k4[0]} of {k4[1]} seed-cells with a verdict and K=2 (67%) in {k2[0]} of {k2[1]}"
    assert said in " ".join(_results_text().split())


def test_the_probes_margin_between_its_first_two_recipes_is_its_score_table():
    """README and the history: the chosen recipe's lead over the map's first recipe (`w10_i1`),
    in points of the probe's score: at each cell the probe scored, a recipe's best LR's mean
    validation NLL over the LR seeds, relative to the best recipe's there, averaged over the
    cells; `w10_i1` did not run at d64-40, where 2% of 522 steps is its own 10 warmup steps, so
    there it is the 2% warmup's runs."""
    result = _json("recipe.json")
    chosen, blocks = result["chosen_recipe"], result["blocks"]

    def best(cell: str, recipe: str) -> float:
        _, mean = _sweep(blocks[f"probe-{cell}-{recipe}"])
        return min(mean.values())

    def score(recipe: str) -> float:
        out = []
        for cell in chosen["cells"]:
            mine = recipe if f"probe-{cell}-{recipe}" in blocks else chosen["recipe"]
            assert mine == recipe or (cell == "d64-40" and round(0.02 * 522) == 10)
            top = min(best(cell, q) for q in chosen["excess"])
            out.append(best(cell, mine) / top - 1)
        return sum(out) / len(out)

    margin = 100 * (score("w10_i1") - score(chosen["recipe"]))
    assert margin > 0
    for page in ("README.md", "docs/HISTORY.md"):
        assert f"{margin:.2f} points" in " ".join((ROOT / page).read_text().split()), page


def test_results_states_the_sequential_critical_value_where_verdicts_are_defined():
    """The critical value of looks at 4 and 8 seeds (`stats.sequential_critical`), beside the t
    quantile of one look at 8, in RESULTS' words and README's glossary."""
    from looped.studies.stats import sequential_critical

    crit = sequential_critical((4, 8))
    said = f"{crit:.2f} for looks at 4 and 8 seeds, against"
    words = (ROOT / "docs/RESULTS.md").read_text().split("## The answer now")[0]
    assert said in " ".join(words.split()) and f"t(7) = {T975[7]}" in " ".join(words.split())
    assert said in " ".join((ROOT / "README.md").read_text().split())
