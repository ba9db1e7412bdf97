"""What every command shares: one parser (with the `key=value` config overrides where a
command resolves a TrainConfig), number lists and `--device` read alike, each bad value refused
in one line, the study flags' refusals too (`--reference` with `--quick`, `--workers` below 1,
`--max-seeds` below 2); the study commands' shared flags are in `looped.studies.commands.common`.

    parser = described("looped eval", __doc__)
"""

from __future__ import annotations

import argparse
import re
import textwrap
from typing import Any

from looped.errors import UserError


class Parser(argparse.ArgumentParser):
    """Every command's parser. With `overrides` (what they configure) it takes `key=value` config
    overrides and ``--print-config``, intermixed with the flags (plain ``parse_args`` takes
    positionals in one run only, so ``--out r max_steps=4 --quiet eval_depths=1-2`` would fail).
    Parsing refuses, in one line, `--reference` with `--quick` (it would write a toy result over
    the committed one), `--workers` below 1 (no process would train) and `--max-seeds` below 2."""

    def __init__(self, *args: Any, overrides: str = "", **kwargs: Any):
        kwargs.setdefault("formatter_class", _KeepLineBreaks)
        super().__init__(*args, **kwargs)
        self.overrides = overrides
        if overrides:
            example = "e.g. schedule=fixed:2 model.d_model=128; anywhere among the flags"
            self.add_argument(
                "overrides", nargs="*", metavar="KEY=VALUE", help=f"{overrides}, {example}"
            )
            shown = "print the resolved config as YAML and exit (nothing runs)"
            self.add_argument("--print-config", action="store_true", help=shown)

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parse = self.parse_intermixed_args if self.overrides else super().parse_args
        parsed = parse(args, namespace)
        if getattr(parsed, "reference", False) and getattr(parsed, "quick", False):
            raise UserError(
                "--reference writes the committed results; leave out --quick (toy size)"
            )
        if (workers := getattr(parsed, "workers", None)) is not None and workers < 1:
            raise UserError(f"--workers {workers}: give 1 or more, or leave it out (default 2)")
        if (seeds := getattr(parsed, "max_seeds", None)) is not None and seeds < 2:
            raise UserError(f"--max-seeds {seeds}: an interval needs two seeds or more")
        return parsed


class _KeepLineBreaks(argparse.HelpFormatter):
    """Wraps a one-paragraph description; keeps text with line breaks (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


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


def described(prog: str, doc: str, **kwargs: Any) -> Parser:
    """A parser whose description is the docstring's first paragraph (without a leading
    "`looped x`: ") and whose epilog is the examples after it."""
    head, _, examples = doc.partition("\n\n")
    what = re.sub(r"^`[^`]+`: ", "", " ".join(head.split()))
    examples = textwrap.indent(textwrap.dedent(examples).strip(), "  ")
    epilog = "examples:\n" + examples if examples else None
    return Parser(prog=prog, description=what[:1].upper() + what[1:], epilog=epilog, **kwargs)


def device_flag(name: str) -> str:
    """`--device NAME` as a device string (auto: a GPU when there is one), a missing GPU refused
    in one line that names the flag."""
    from looped.runtime.device import pick_device  # torch: only the commands that run a model

    try:
        return str(pick_device(name))
    except UserError:
        raise UserError(f"--device {name}: no CUDA GPU is visible; use --device cpu") from None
