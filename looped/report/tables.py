"""The markdown table every generated section is made of: the report emits numbers in tables;
the prose around them is written by hand."""

from __future__ import annotations

from typing import Any


def md_table(header: list[str], rows: list[list[Any]]) -> str:
    """A markdown table; cells are written as given."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])
