"""The paper's headline in its own terms: held-out text NLL across serving depths, equal tokens.

    looped fidelity                        # stdlib corpus, d=128, 400 steps of 16x128 tokens,
                                           # LR sweep + 3 seeds: runs/fidelity/ (json, figures)
    looped fidelity --quick                # the same code path at toy size: runs/fidelity-quick/
    looped fidelity --dataset roneneldan/TinyStories --max-docs 200000      # a hub corpus
    looped fidelity --dataset HuggingFaceFW/fineweb-edu --subset sample-10BT --max-docs 50000
    looped fidelity --dataset ~/my_texts/ --tokenizer bpe:2048              # local .txt/.jsonl
    looped fidelity --lrs 1e-3,3e-3,1e-2 --seeds 3 --steps 800 model.n_head=8   # any override

It writes to --out only, tokenizing the corpus once into OUT/corpus-<name> (`looped length` is
the text study of record). What it measures: `looped.experiments.fidelity`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from looped.commands.common import OverrideParser, number_list, study_parser
from looped.config import to_yaml
from looped.errors import UserError
from looped.experiments.fidelity import (
    QUICK,
    FidelitySettings,
    corpus_dir,
    first_config,
    run_fidelity,
)

SETUP_FLAGS = ("tokenizer", "d_model", "batch_size")  # flags that set the TextSetup
OWN_FLAGS = ("dataset", "subset", "max_docs", "steps", "seeds", "workers")  # and the settings


def _parser() -> OverrideParser:
    parser = study_parser(
        "looped fidelity",
        __doc__,
        out="corpus, runs, fidelity.json, figures (default runs/fidelity)",
        reference=None,  # no committed result: `looped length` is the text study of record
        quick="toy size, under a minute (pydoc corpus)",
        overrides=True,
        example="looped fidelity --quick --out runs/fq",
    )
    add = parser.add_argument
    add("--dataset", help="stdlib (default) | pydoc | hub name | local file or directory")
    add("--subset", help="hub config name, e.g. sample-10BT")
    add("--max-docs", type=int, help="tokenize at most this many documents")
    add("--tokenizer", help="tokenizer spec (default bpe:4096)")
    add("--steps", type=int, help="steps of the sweep and the equal-token comparison")
    add("--d-model", type=int, help="width of the main comparison")
    add("--batch-size", type=int, help="sequences per step")
    add("--seeds", type=int, help="seeds of the comparison (default 3)")
    add("--lrs", help="the sweep's learning rates, e.g. 1e-3,3e-3,1e-2")
    add("--held-out", type=float, help="share of documents in each of val and test (default 0.05)")
    add("--fresh", action="store_true", help="retrain every run instead of reusing finished ones")
    add("--quiet", action="store_true", help="no progress bars")
    return parser


def _settings(args: Any) -> FidelitySettings:
    """The track's settings from the command line (bad values refused, one line each)."""
    base = QUICK if args.quick else FidelitySettings()
    given = {k: getattr(args, k) for k in SETUP_FLAGS + OWN_FLAGS if getattr(args, k) is not None}
    setup = replace(base.setup, **{k: v for k, v in given.items() if k in SETUP_FLAGS})
    if args.held_out is not None:
        setup = replace(setup, val_frac=args.held_out, test_frac=args.held_out)
    own = {k: v for k, v in given.items() if k in OWN_FLAGS}
    settings = replace(base, setup=setup, overrides=base.overrides + args.overrides, **own)
    if args.max_docs is not None and args.max_docs < 1:
        raise UserError(f"--max-docs {args.max_docs} must be >= 1")
    if args.lrs:
        settings.lrs = number_list("--lrs", args.lrs)
    return settings


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = _settings(args)
    out = Path(args.out or ("runs/fidelity-quick" if args.quick else "runs/fidelity"))
    if args.print_config:  # the config every run starts from; schedule, LR and seed vary
        corpus = {"path": str(corpus_dir(settings, out)), "vocab_size": 0}
        print(to_yaml(first_config(settings, corpus)), end="")
        return 0
    run_fidelity(settings, out, out / "fidelity.json", out / "figures", args.fresh, args.quiet)
    return 0
