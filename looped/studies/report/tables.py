"""The markdown table every generated section is made of: the report emits numbers in tables;
the prose around them is written by hand."""

from __future__ import annotations

import math
from typing import Any


def md_table(header: list[str], rows: list[list[Any]], align: list[str] | None = None) -> str:
    """A markdown table; cells are written as given; `align`: each column's `---` or `---:`
    (the benchmark's numbers right-aligned)."""
    rules = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rules) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def bounds(lo: float, hi: float, spec: str = "+.2f", scale: float = 100, unit: str = "") -> str:
    """ "[+1.40, +2.80]": an interval's ends, the one place the docs write one (`unit` after
    each end where the mean is not beside them to carry it)."""
    return f"[{scale * lo:{spec}}{unit}, {scale * hi:{spec}}{unit}]"


def gap_text(g: dict | None, digits: int = 2) -> str:
    """ "+2.10% [+1.40, +2.80]": a gap (or slope) with its 95% interval, in percent; the one
    formatter of every gap in the docs. One seed (no interval, or None with `mean` given
    elsewhere) says so."""
    if g is None:
        return "no interval from one seed"
    mean = f"{100 * g['mean']:+.{digits}f}%"
    if not (math.isfinite(g["lo"]) and math.isfinite(g["hi"])):
        return f"{mean} [no interval from one seed]"
    return f"{mean} {bounds(g['lo'], g['hi'], f'+.{digits}f')}"


def verdict_words(row: dict) -> str:
    """A row's verdict, with "behind" where it is undecided at the tolerance yet its interval
    clears zero: "undecided" alone would claim less than the interval shows."""
    lo = (row.get("gap") or {}).get("lo", 0.0)
    return row["verdict"] + (", behind" if row["verdict"] == "undecided" and lo > 0 else "")
