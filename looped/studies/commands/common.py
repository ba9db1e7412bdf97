"""What the study commands share: the flags every study has (`--quick`, `--out`, `--reference`,
`--workers`) worded alike and refused alike, number lists and counts read alike, where a study
writes and its one writer.
A study's parser, for example::

    parser = study_parser("looped map", __doc__, reference="results/map.json",
                          quick="toy size, every code path")
"""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from looped.commands.common import Parser, described
from looped.errors import UserError
from looped.runtime.lock import dir_lock


class StudyParser(Parser):
    """A study command's parser: it refuses, in one line, `--reference` with `--quick` (it would
    write a toy result over the committed one), `--workers` below 1 (no process would train)
    and `--max-seeds` below 2."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)
        if getattr(parsed, "reference", False) and getattr(parsed, "quick", False):
            raise UserError(
                "--reference writes the committed results; leave out --quick (toy size)"
            )
        if (workers := getattr(parsed, "workers", None)) is not None and workers < 1:
            raise UserError(f"--workers {workers}: give 1 or more, or leave it out (default 2)")
        if (seeds := getattr(parsed, "max_seeds", None)) is not None and seeds < 2:
            raise UserError(f"--max-seeds {seeds}: an interval needs two seeds or more")
        return parsed


def study_parser(
    prog: str,
    doc: str,
    *,
    reference: str,
    quick: str,
    out: str = "",
    workers: bool = True,
    overrides: str = "",
) -> Parser:
    """`described`, with the shared flags: `--quick` (`quick` says what it is), `--out`,
    `--reference` (writing `reference`) and `--workers` (unless `workers` is False)."""
    parser = described(prog, doc, StudyParser, overrides=overrides)
    parser.add_argument("--quick", action="store_true", help=quick)
    name = prog.split()[-1]
    parser.add_argument("--out", help=out or f"output directory (default runs/{name}[-quick])")
    parser.add_argument("--reference", action="store_true", help=f"write {reference}")
    if workers:
        parser.add_argument("--workers", type=int, help="worker processes (default 2)")
    return parser


def study_dirs(args: argparse.Namespace, name: str) -> tuple[Path, Path, Path]:
    """Where a study trains (`--out`, else runs/NAME, runs/NAME-quick with `--quick`) and where
    it writes its results file and figures: results/ and figures/ with `--reference`, else there."""
    out = Path(args.out or f"runs/{name}{'-quick' * args.quick}")
    return (out, Path("results"), Path("figures")) if args.reference else (out, out, out)


def study_lock(out: Path, collect: bool, prog: str) -> AbstractContextManager:
    """One writer per study directory: a second study into OUT is refused; `--collect` only
    reads finished runs, so it takes no lock."""
    return nullcontext() if collect else dir_lock(out, prog)


def number_list(flag: str, text: str | None, kind: type = float, example: str = "") -> tuple | None:
    """A comma list of numbers given to `flag` (None: not given), refused in one line that names
    the flag."""
    if not text:
        return None
    try:
        return tuple(kind(x) for x in text.split(","))
    except ValueError:
        noun, default = ("integers", "120,240") if kind is int else ("numbers", "1e-3,3e-3")
        example = example or default
        raise UserError(f"{flag} {text!r}: give comma-separated {noun}, e.g. {example}") from None


def positive(flag: str, value: int | None) -> int | None:
    """A count given to `flag` (None: not given), refused in one line below 1."""
    if value is not None and value < 1:
        raise UserError(f"{flag} {value} must be >= 1")
    return value
