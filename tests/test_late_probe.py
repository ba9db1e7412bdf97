"""The late-start probe's table in RESULTS: each finished candidate's escapes, whether it is on
time, its NLL against the reference, and the rule's winner named in words."""

from __future__ import annotations

from dataclasses import replace

from looped.studies.map import LATE, PROBE, choose_late, late_blocks
from looped.studies.report.late import candidate_words, late_section


def _rows(seeds: dict[int, tuple[float, int | None]]) -> dict:
    return {"sweep": [{"seed": s, "val_nll": v, "escape_step": e} for s, (v, e) in seeds.items()]}


def test_the_late_table_shows_each_finished_candidate_and_names_the_winner_in_words():
    settings = replace(PROBE, blocks=late_blocks(LATE[:3]))
    names = [b.name for b in settings.blocks]
    blocks = {
        names[0]: _rows({200: (3.50, 400), 201: (3.52, 410)}),
        names[1]: _rows({200: (3.55, 300)}),
        names[2]: _rows({200: (3.50, 300)}),
        names[3]: _rows({200: (3.57, 310), 201: (3.605, 290)}),
        names[4]: _rows({200: (3.60, 320)}),
        names[5]: _rows({200: (3.60, None)}),
    }
    text = late_section({"late_start": choose_late(blocks, settings)})
    lines = text.splitlines()
    assert lines[2].startswith("| 2% warmup, LR 0.001 | 400, 410 | 300, 300 | no | 3.5100 |")
    assert lines[3].startswith("| 10% warmup, LR 0.001 | 310, 290 | 320, never | yes | 3.5875 |")
    assert "+2.21% [" in lines[3] and "Chosen so far: 10% warmup, LR 0.001" in text
    assert "2 of 3 candidates finished so far" in text
    assert all(line.count("|") == 7 for line in lines[:4])  # six columns: fits the page
    assert late_section({}) == "No candidate has finished yet."


def test_a_candidate_reads_in_words():
    assert candidate_words("w10pct_i1_sn", 1e-3) == "10% warmup, state norm, LR 0.001"
    assert candidate_words("w2pct_i1", 3e-4) == "2% warmup, LR 0.0003"
    assert candidate_words("w40_i1", 1e-3) == "40 warmup steps, LR 0.001"


def test_a_candidate_that_finishes_before_the_reference_is_shown_on_time_or_not():
    """The probe trains candidates in its own order: the table reads each one as it finishes."""
    settings = replace(PROBE, blocks=late_blocks(LATE[:2]))
    names = [b.name for b in settings.blocks]
    blocks = {
        names[3]: _rows({200: (3.57, 330), 201: (3.605, 410)}),
        names[4]: _rows({200: (3.60, 320)}),
        names[5]: _rows({200: (3.60, 320)}),
    }
    late = choose_late(blocks, settings)
    assert [c["candidate"] for c in late["candidates"]] == ["w10pct_i1-lr0.001"]
    assert not late["candidates"][0]["on_time"] and late["winner"] is None  # 410 > 320 + 10
    text = late_section({"late_start": late})
    assert "| 330, 410 | 320, 320 | no | 3.5875 | reference unfinished |" in text
    assert "the reference is 2% warmup, LR 0.001" in text and "No candidate has given" in text
