"""What the study commands share: the flags every study has (`--quick`, `--out`, `--reference`,
`--workers`) worded alike, where a study writes and its one writer.
A study's parser, for example::

    parser = study_parser("looped map", __doc__, reference="results/map.json",
                          quick="toy size, every code path")
"""

from __future__ import annotations

import argparse
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from looped.commands.common import Parser, described
from looped.runtime.lock import dir_lock


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
    parser = described(prog, doc, overrides=overrides)
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
