"""What several commands share: the parser of every command that resolves a TrainConfig, and
the flags every study has (`--quick`, `--out`, `--reference`, `--workers`), worded alike::

    parser = study_parser("looped length", __doc__, out="output directory (default runs/length)",
                          reference="results/length.json and figures/length_gap.png",
                          quick="toy size, every code path")
    parser.add_argument("--lengths", help="training lengths in steps")
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from looped.errors import UserError


class OverrideParser(argparse.ArgumentParser):
    """A parser with the `key=value` overrides and ``--print-config``, accepting flags and
    overrides in any order (intermixed parsing: plain ``parse_args`` takes positionals in one
    run only, so ``--out r max_steps=4 --quiet eval_depths=1-2`` would fail)."""

    def __init__(self, *args: Any, overrides_help: str = "config overrides", **kwargs: Any):
        kwargs.setdefault("formatter_class", _KeepLineBreaks)
        super().__init__(*args, **kwargs)
        self.add_argument(
            "overrides",
            nargs="*",
            metavar="KEY=VALUE",
            help=f"{overrides_help}, e.g. schedule=fixed:2 model.d_model=128; anywhere among the flags",
        )
        self.add_argument(
            "--print-config",
            action="store_true",
            help="print the resolved config as YAML and exit (nothing runs)",
        )

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        return self.parse_intermixed_args(args, namespace)


class _KeepLineBreaks(argparse.HelpFormatter):
    """Wraps a one-paragraph description; keeps text with line breaks (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


class _Refusals:
    """Refuses `--reference` with `--quick` (it would write a toy result over the committed one)
    and `--workers` below 1 (no process would train)."""

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed = super().parse_args(args, namespace)  # type: ignore[misc]
        if getattr(parsed, "reference", False) and getattr(parsed, "quick", False):
            raise UserError(
                "--reference writes the committed results; leave out --quick (toy size)"
            )
        if (workers := getattr(parsed, "workers", None)) is not None and workers < 1:
            raise UserError(f"--workers {workers}: give 1 or more, or leave it out (default 2)")
        return parsed


class _StudyParser(_Refusals, argparse.ArgumentParser):
    pass


class _StudyOverrideParser(_Refusals, OverrideParser):
    pass


def number_list(flag: str, text: str, kind: type = float, example: str = "") -> tuple:
    """A comma list of numbers given to `flag`, refused in one line that names the flag."""
    try:
        return tuple(kind(x) for x in text.split(","))
    except ValueError:
        noun, default = ("integers", "120,240") if kind is int else ("numbers", "1e-3,3e-3")
        example = example or default
        raise UserError(f"{flag} {text!r}: give comma-separated {noun}, e.g. {example}") from None


def described(prog: str, doc: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A parser whose description is the docstring's first paragraph (after "`looped x`: ") and
    whose epilog is the examples after it."""
    head, _, examples = doc.partition("\n\n")
    what = " ".join(head.split()).split(": ", 1)[-1]
    examples = textwrap.indent(textwrap.dedent(examples).strip(), "  ")
    examples = "examples:\n" + examples if examples else None
    kwargs.setdefault("formatter_class", _KeepLineBreaks)
    return argparse.ArgumentParser(
        prog=prog, description=what[:1].upper() + what[1:], epilog=examples, **kwargs
    )


def study_parser(
    prog: str,
    doc: str,
    *,
    out: str,
    reference: str | None,
    quick: str | None = None,
    workers: bool = True,
    overrides: bool = False,
    example: str | None = None,
    default_out: str | None = None,
    reads: bool = False,
) -> argparse.ArgumentParser:
    """A parser with the shared flags: `--out`, `--reference` (unless `reference` is None),
    `--quick` (when `quick` says what it is), `--workers`, `--results` (with `reads`) and the
    config overrides (with `overrides`). Parsing refuses `--reference` with `--quick` and
    `--workers` below 1."""
    kwargs = {"prog": prog, "description": doc.splitlines()[0]}
    if example:
        kwargs["epilog"] = f"example: {example}"
    parser = (
        _StudyOverrideParser(overrides_help="config overrides for every run", **kwargs)
        if overrides
        else _StudyParser(**kwargs)
    )
    if quick:
        parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--out", default=default_out, help=out)
    if reference is not None:
        parser.add_argument("--reference", action="store_true", help=f"write {reference}")
    if workers:
        parser.add_argument("--workers", type=int, help="worker processes (default 2)")
    if reads:
        parser.add_argument(
            "--results", default="results", help="where the results files it reads are"
        )
    return parser
