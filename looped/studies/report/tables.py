"""The markdown table every generated section is made of: the report emits numbers in tables;
the prose around them is written by hand."""

from __future__ import annotations

from typing import Any


def md_table(header: list[str], rows: list[list[Any]], align: list[str] | None = None) -> str:
    """A markdown table; cells are written as given; `align`: each column's `---` or `---:`."""
    rules = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(rules) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])
