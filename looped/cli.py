"""The ``looped`` command line: one entry point routing to one module per subcommand.

    looped demo [--quick] [--out DIR]           # the scaled-down reproduction (figures + tables)
    looped map | diagnose | samples [--quick]    # the studies (text and bios)
    looped train --config tiny --out runs/r     # train one run (also under torchrun)
    looped eval --run runs/r --depths 1-16      # NLL / recall at serving depths
    looped downstream --run runs/r --tasks piqa # zero-shot multiple choice at serving depths
    looped data bios|text ...                   # write a corpus
    looped flops | probe | plot | report ...

Each subcommand is ``looped/commands/<name>.py`` (the library's) or
``looped/studies/commands/<name>.py`` (the harness's), with its parser and ``main(argv) -> int``;
this file only routes, by name. A ``UserError``, ``ValueError`` or ``FileNotFoundError`` becomes
one line on stderr, exit status 2; Ctrl-C exits 130.
"""

from __future__ import annotations

import importlib
import sys

from looped.errors import UserError

# subcommand -> its one-line help; its module is looped.commands.<subcommand> (the library's) or
# looped.studies.commands.<subcommand> (the reproduction's harness), found by name, not imported
# here: the library never imports the harness
HELP = {
    "demo": "train and evaluate the small schedule grid, write figures/results",
    "train": "train one run from a preset or YAML config",
    "eval": "evaluate a run at serving depths (NLL, recalled bits)",
    "flops": "modeled training compute per preset and schedule",
    "data": "write a corpus: `looped data bios` or `looped data text`",
    "downstream": "HellaSwag / PIQA / ARC-Easy accuracy at serving depths",
    "diagnose": "why uniform 1..16 lags at small scale: gradient evidence",
    "probe": "update-benefit probe: one K=4 vs one K=16 update",
    "plot": "the paper's figures from run directories",
    "map": "the gap by width, vocabulary and length, on one pass (text)",
    "samples": "continuations at serving depths 1, 2, 4, 16",
    "report": "regenerate the docs and (--figures) the figures from results/",
}
LIBRARY = ("train", "eval", "downstream", "data", "flops")
COMMANDS = {
    name: (f"looped.{'' if name in LIBRARY else 'studies.'}commands.{name}", text)
    for name, text in HELP.items()
}


def _usage() -> str:
    lines = ["usage: looped COMMAND [options]   (looped COMMAND --help for details)", ""]
    lines += [f"  {name:<11} {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        choices = ", ".join(COMMANDS)
        print(f"looped: unknown command {name!r}; choose one of {choices}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest) or 0)
    except (UserError, ValueError, FileNotFoundError) as err:
        print(f"looped {name}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"looped {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
