"""The count-table baselines of every committed text result, on the windows its models saw.

    looped baselines                 # runs/baselines/text_baselines.json
    looped baselines --reference     # results/text_baselines.json (read by `looped report`)

`looped fidelity` and the demo's text track score their models on fixed held-out windows. This
rebuilds each one's corpus exactly (same dataset, tokenizer and split; the token counts are
checked against the results file), fits a unigram and an add-k bigram table on its train split
and scores them on those very windows. A text row whose models do not beat the bigram is
reported as not informative at this size, never with a verdict (`looped report`).
"""

from __future__ import annotations

import json
from pathlib import Path

from looped.data.text import META, TokenShards, prepare_text, read_meta
from looped.errors import UserError
from looped.eval.baselines import corpus_baselines
from looped.experiments.command import study_parser
from looped.experiments.fidelity import FidelitySettings, corpus_dir
from looped.experiments.results import write_result

RESULTS = ("fidelity.json", "demo_text.json")  # the text results this applies to


def legacy_corpus(settings: FidelitySettings, out: Path) -> Path:
    """The corpus a committed result was measured on, rebuilt the way it was then: the older
    train/val token-count split (`prepare_text` without a test split)."""
    path = corpus_dir(settings, out).with_name(corpus_dir(settings, out).name + "-legacy")
    if not (path / META).is_file():
        prepare_text(
            path,
            dataset=settings.dataset,
            tokenizer=settings.tokenizer,
            subset=settings.subset,
            max_docs=settings.max_docs,
            overwrite=True,
        )
    return path


def for_result(result: dict, out: Path) -> dict:
    """Baselines for one text results file, on its own evaluation windows."""
    keep = FidelitySettings.__dataclass_fields__
    settings = FidelitySettings(
        **{k: v for k, v in result["meta"]["settings"].items() if k in keep}
    )
    path = legacy_corpus(settings, out)
    train, val = TokenShards(path, "train"), TokenShards(path, "val")
    want = result["meta"]["corpus"]
    if (train.n_tokens, val.n_tokens) != (want["train"], want["val"]):
        raise UserError(
            f"rebuilt corpus {path} has {train.n_tokens:,}/{val.n_tokens:,} train/val tokens, "
            f"the results say {want['train']:,}/{want['val']:,}; another Python's stdlib?"
        )
    windows = list(
        val.iter_eval_batches(settings.batch_size, settings.seq_len, settings.eval_batches)
    )
    # the runs chose their LRs on these very windows; k is chosen on them too, which can only
    # favour the baseline by a hair and never the models
    scored = corpus_baselines(path, read_meta(path)["vocab_size"], windows, windows)
    return {**scored, "tokenizer": settings.tokenizer}


def main(argv: list[str] | None = None) -> int:
    a = study_parser(
        "looped baselines",
        __doc__,
        out="where the corpora are tokenized (default runs/baselines)",
        reference="results/text_baselines.json (in --results)",
        workers=False,
        default_out="runs/baselines",
        reads=True,
    ).parse_args(argv)
    found = {
        n: json.loads((Path(a.results) / n).read_text())
        for n in RESULTS
        if (Path(a.results) / n).is_file()
    }
    if not found:
        raise UserError(f"no text results ({', '.join(RESULTS)}) in {a.results}")
    out = {name: for_result(r, Path(a.out)) for name, r in found.items()}
    for name, b in out.items():
        print(
            f"{name}: unigram {b['unigram']:.3f}, bigram {b['bigram']:.3f} nats/token "
            f"({b['tokens']:,} tokens, {b['tokenizer']})"
        )
    write_result(Path(a.results if a.reference else a.out) / "text_baselines.json", out)
    return 0
