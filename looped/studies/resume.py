"""An earlier map.json, read as data: the one reader of every file `looped map --resume-from`
names, which checks the file's shape before any corpus is built and refuses its first problem
in one line that names the file and the field.

    old = read_map("results/map.json", known={"d32", "d64"})

The shape a resume reads: `blocks` an object of blocks, each named as the map names one; a block
an object whose `meta` (needed where it holds scored rows) is an object with `corpus` an object;
its `rows` and `sweep` (and those of its `tuned` part) lists of objects, each with the fields a
reused row is matched by (`ROW_FIELDS`). A file that passes reads without a traceback; what it
was measured on (corpus, dtype) is checked by the study once the corpus is known.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from looped.errors import UserError
from looped.studies.results import read_results_file

FLAG = "--resume-from"
EXPECT = "a map.json that `looped map` wrote"
# what a reused row is matched and read by: its run's name, its config's fingerprint, its LR
ROW_FIELDS = {
    "run": str,
    "config_sha": str,
    "lr": (int, float),
}
SCORED = ("rows", "sweep")  # a block's lists of scored rows (its `tuned` part has both too)


def read_map(path: str, known: Collection[str]) -> dict:
    """The map.json at `path`, its shape checked; a UserError naming the file and the first
    field that is wrong. `known`: the block names the map has."""
    old = read_results_file(path, FLAG, EXPECT)
    if problem := map_problem(old, known):
        raise UserError(f"{FLAG} {path}: {problem}; give {EXPECT}")
    return old


def map_problem(old: dict, known: Collection[str]) -> str | None:
    """The first thing wrong with a map.json's shape, as "FIELD is ...", or None."""
    blocks = old.get("blocks")
    if not isinstance(blocks, dict) or not blocks:
        return f"holds no map blocks (blocks is {kind(blocks)})"
    for name, part in blocks.items():
        if name not in known:
            return f"blocks.{name} is no block of the map"
        if problem := block_problem(f"blocks.{name}", part):
            return problem
    return None


def block_problem(where: str, part: Any) -> str | None:
    """The first thing wrong with one block: not an object, a meta or tuned part that is not
    one, scored rows without their corpus, or a row that is not a row."""
    if not isinstance(part, dict):
        return f"{where} is {kind(part)}, not an object"
    for key in ("meta", "tuned"):
        if key in part and not isinstance(part[key], dict):
            return f"{where}.{key} is {kind(part[key])}, not an object"
    meta, tuned = part.get("meta", {}), part.get("tuned", {})
    for key in ("corpus", "environment"):
        if key in meta and not isinstance(meta[key], dict):
            return f"{where}.meta.{key} is {kind(meta[key])}, not an object"
    sections = [(where, part), (f"{where}.tuned", tuned)]
    for at, section in sections:
        for key in SCORED:
            if problem := rows_problem(f"{at}.{key}", section.get(key, [])):
                return problem
    scored = any(section.get(key) for _, section in sections for key in SCORED)
    if scored and "corpus" not in meta:
        return f"{where}.meta.corpus is missing (its rows name no corpus)"
    return None


def rows_problem(where: str, rows: Any) -> str | None:
    """The first thing wrong with a list of scored rows."""
    if not isinstance(rows, list):
        return f"{where} is {kind(rows)}, not a list of rows"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"{where}[{i}] is {kind(row)}, not a row object"
        for field, types in ROW_FIELDS.items():
            if field not in row:
                return f"{where}[{i}].{field} is missing"
            if not isinstance(row[field], types) or isinstance(row[field], bool):
                return f"{where}[{i}].{field} is {kind(row[field])}"
    return None


def kind(value: Any) -> str:
    """A JSON value's kind as a reader says it: "a number", "a string", "null", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    names = {int: "a number", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), "an object")
