"""The late-start probe's table (`looped map --probe`, results/recipe.json's "late_start"): at
d=128 with BPE-4096, each candidate recipe's uniform escape against its arms', and its
validation NLL against the reference candidate, paired by seed (`studies.map.choose_late`)."""

from __future__ import annotations

from looped.studies.report.tables import gap_text, md_table

HEADER = [
    "candidate",
    "uniform's escape (seeds 200, 201)",
    "arms' escape (K=4 (80%), K=2 (67%))",
    "on time",
    "val. NLL",
    "vs the reference [95%]",
]


def candidate_words(recipe: str, lr: float) -> str:
    """ "w10pct_i1_sn", 0.001 -> "10% warmup, state norm, LR 0.001"."""
    warmup = recipe.split("_")[0].removeprefix("w").replace("pct", "%")
    warmup = f"{warmup} warmup" if warmup.endswith("%") else f"{warmup} warmup steps"
    return ", ".join([warmup, *(["state norm"] if recipe.endswith("_sn") else []), f"LR {lr:g}"])


def _steps(steps: list[int | None]) -> str:
    return ", ".join("never" if s is None else str(s) for s in steps)


def _versus(gap: dict, reference: bool) -> str:
    if reference:
        return "the reference"
    if gap["mean"] is None:
        return "reference unfinished"
    if gap.get("lo") is None:
        return f"{100 * gap['mean']:+.2f}% (one seed)"
    return gap_text(gap)


def late_section(result: dict) -> str:
    """The candidates that have finished (uniform and both arms), then the rule and its winner."""
    late = result.get("late_start")
    if not late:
        return "No candidate has finished yet."
    rows = []
    ref = late["reference"]
    for c in late["candidates"]:
        words = candidate_words(c["recipe"], c["lr"])
        escapes = [_steps(c["escapes"]), _steps(c["arm_escapes"]), "yes" if c["on_time"] else "no"]
        is_ref = c["candidate"] == ref["candidate"]
        rows.append([words, *escapes, f"{c['val_nll']:.4f}", _versus(c["vs_reference"], is_ref)])
    said = f"Rule, fixed before the runs: {late['rule']}; "
    said += f"the reference is {candidate_words(ref['recipe'], ref['lr'])}. "
    if late["winner"]:
        won = next(c for c in late["candidates"] if c["candidate"] == late["winner"])
        said += f"Chosen so far: {candidate_words(won['recipe'], won['lr'])}"
        edge = " (at the grid's edge: the grid extends one step that way before the choice)"
        said += (edge if late["at_edge"] else "") + "."
    else:
        said += "No candidate has given uniform an on-time start so far."
    if not late["whole"]:
        said += f" {len(late['candidates'])} of {late['planned']} candidates finished so far."
    return md_table(HEADER, rows) + "\n\n" + said
