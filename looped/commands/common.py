"""What every command shares: one parser (with the `key=value` config overrides where a
command resolves a TrainConfig, its description and examples from the module docstring) and
`--device` read alike, a bad value refused in one line; the study commands' flags and their
refusals are in `looped.studies.commands.common`.

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
    positionals in one run only, so ``--out r max_steps=4 --quiet eval_depths=1-2`` would fail)."""

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
        return parse(args, namespace)


class _KeepLineBreaks(argparse.HelpFormatter):
    """Wraps a one-paragraph description; keeps text with line breaks (examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" not in text:
            return super()._fill_text(text, width, indent)
        return "".join(indent + line for line in text.splitlines(keepends=True))


def described(prog: str, doc: str, kind: type[Parser] = Parser, **kwargs: Any) -> Parser:
    """A parser whose description is the docstring's first paragraph (without a leading
    "`looped x`: ") and whose epilog is the examples after it; `kind` is the Parser class."""
    head, _, examples = doc.partition("\n\n")
    what = re.sub(r"^`[^`]+`: ", "", " ".join(head.split()))
    examples = textwrap.indent(textwrap.dedent(examples).strip(), "  ")
    epilog = "examples:\n" + examples if examples else None
    return kind(prog=prog, description=what[:1].upper() + what[1:], epilog=epilog, **kwargs)


def device_flag(name: str) -> str:
    """`--device NAME` as a device string (auto: a GPU when there is one), a missing GPU refused
    in one line that names the flag."""
    from looped.runtime.device import pick_device  # torch: only the commands that run a model

    try:
        return str(pick_device(name))
    except UserError:
        raise UserError(f"--device {name}: no CUDA GPU is visible; use --device cpu") from None
