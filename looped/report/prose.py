"""Small pieces of generated prose that several tracks' sections share."""

from __future__ import annotations

from collections.abc import Iterable


def aside(items: Iterable[str], before: str = " (", after: str = ")") -> str:
    """The items listed with commas between `before` and `after`, or nothing at all when there
    are none: an optional parenthesis of a generated sentence ("... (bios 4.2 min, text 4.7
    min)")."""
    items = list(items)
    return f"{before}{', '.join(items)}{after}" if items else ""
