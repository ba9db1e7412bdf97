"""Zero-shot HellaSwag, PIQA and ARC-Easy at every serving depth, scored as lm-evaluation-harness does.

    python -m looped.eval.downstream --run runs/1b-fixed-first --tasks hellaswag,piqa,arc_easy --depths 1-16

    results = evaluate_tasks(model, tokenizer, ["hellaswag", "piqa", "arc_easy"], depths=range(1, 17))
    results["piqa"][4]  # {"acc": ..., "acc_norm": ..., "acc_stderr": ..., "acc_norm_stderr": ..., "n": ...}

The numbers are meant to be comparable with published harness numbers, so every choice below
copies lm-evaluation-harness (checked against v0.4.13; file paths are in that repository):

- Prompts, from the task YAMLs. ``lm_eval/tasks/hellaswag/hellaswag.yaml`` + ``utils.py``:
  context = preprocess(activity_label + ": " + ctx_a + " " + ctx_b.capitalize()), choices =
  preprocess(ending), where preprocess strips, replaces " [title]" by ". ", deletes every
  bracketed "[...]" and then replaces double spaces by single ones.
  ``lm_eval/tasks/piqa/piqa.yaml``: "Question: {goal}\\nAnswer:", choices [sol1, sol2], gold =
  label; data from ``baber/piqa`` (the parquet copy the harness moved to in PR #2790, since
  ``ybisk/piqa`` is a loading script that current ``datasets`` refuses).
  ``lm_eval/tasks/arc/arc_easy.yaml``: "Question: {question}\\nAnswer:", choices = choices.text,
  gold = choices.label.index(answerKey) (so numeric keys "1".."4" work too), ARC-Easy test split.
- Requests (``lm_eval/api/task.py``, ``ConfigurableTask.construct_requests``): one
  (context, target_delimiter + choice) pair per choice, target_delimiter " ".
- Tokenization (``lm_eval/api/model.py``, ``TemplateLM.loglikelihood`` / ``_encode_pair``):
  trailing spaces of the context move to the continuation; encode context + continuation as one
  string and the context alone; the continuation tokens are the whole string's tokens past the
  context's. An empty context is replaced by the prefix token (our EOS).
- Truncation (``lm_eval/models/huggingface.py``, ``_loglikelihood_tokens``): the model reads
  (context + continuation)[-(max_length + 1):][:-1], i.e. the context is cut from the left.
- Metrics (``ConfigurableTask.process_results``, multiple_choice): ll_i = summed log-probability
  of choice i's continuation tokens; acc = [argmax_i ll_i == gold]; acc_norm = [argmax_i
  ll_i / len(choice_i) == gold] with len in characters of the choice *without* the delimiter;
  ties go to the first index (``np.argmax``). Stderr = sample std / sqrt(n)
  (``lm_eval/api/metrics.py``, ``mean_stderr``).

Every depth comes from one pass: ``model.forward_depths(idx, depths, targets, reduction="none")``
runs max(depths) loops and applies the head after each requested one.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from looped.data.text import load_tokenizer, local_data_files
from looped.errors import UserError, first_line
from looped.runtime.checkpoint import load_model
from looped.runtime.device import model_device
from looped.schedules import parse_depths


@dataclass(frozen=True)
class MCItem:
    context: str  # the prompt, without the space that starts each continuation
    choices: list[str]  # answer texts, without the delimiter (acc_norm divides by their length)
    gold: int  # index of the right answer


# -- task formats (lm-evaluation-harness YAMLs) --------------------------------------------------
def hellaswag_preprocess(text: str) -> str:
    """WikiHow rows carry "[title]", "[header]", "[step]" markers; the harness cleans them so."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_item(doc: dict) -> MCItem:
    ctx = doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    return MCItem(
        context=hellaswag_preprocess(doc["activity_label"] + ": " + ctx),
        choices=[hellaswag_preprocess(e) for e in doc["endings"]],
        gold=int(doc["label"]),
    )


def piqa_item(doc: dict) -> MCItem:
    return MCItem(
        f"Question: {doc['goal']}\nAnswer:", [doc["sol1"], doc["sol2"]], int(doc["label"])
    )


def arc_item(doc: dict) -> MCItem:
    labels = list(doc["choices"]["label"])
    if doc["answerKey"] not in labels:
        raise UserError(
            f"ARC row {doc.get('id')}: answerKey {doc['answerKey']!r} not in choice labels {labels}"
        )
    return MCItem(
        f"Question: {doc['question']}\nAnswer:",
        list(doc["choices"]["text"]),
        labels.index(doc["answerKey"]),
    )


@dataclass(frozen=True)
class TaskSpec:
    hub: str  # dataset name on the Hugging Face hub
    subset: str | None  # hub config name
    split: str  # the split the harness reports
    to_item: Callable[[dict], MCItem]  # one row of the hub schema -> prompt, choices, gold


TASKS: dict[str, TaskSpec] = {
    "hellaswag": TaskSpec("Rowan/hellaswag", None, "validation", hellaswag_item),
    "piqa": TaskSpec("baber/piqa", None, "validation", piqa_item),
    "arc_easy": TaskSpec("allenai/ai2_arc", "ARC-Easy", "test", arc_item),
}


def load_items(task: str, data_file: str | None = None, limit: int | None = None) -> list[MCItem]:
    """The first ``limit`` items of a task (all when None), from the hub split the harness
    uses or from a local .jsonl/.json/.parquet file (or directory) in the same schema."""
    import datasets  # ~2 s to import; only loading task items needs it

    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    spec = TASKS[task]
    if data_file is not None:
        path = Path(data_file)
        if not path.exists():
            raise UserError(
                f"{task} data file {data_file} not found; pass an existing .jsonl/.parquet path"
            )
        builder, files = local_data_files(path)
        if builder == "text":
            raise UserError(
                f"{task} data must be .jsonl/.json/.parquet rows in the hub schema, not .txt"
            )
        # streamed: a local file needs no Arrow cache copy
        ds = datasets.load_dataset(builder, data_files=files, split="train", streaming=True)
        if limit is not None:
            ds = ds.take(limit)
    else:
        try:  # downloaded once into the datasets cache, so later runs work offline
            ds = datasets.load_dataset(spec.hub, spec.subset, split=spec.split)
        except Exception as err:  # the hub raises many types; one line for the user
            first = first_line(err)
            raise UserError(
                f"could not load {task} from {spec.hub} ({first}); pass a local copy via data_files"
            ) from None
        if limit is not None:
            ds = ds.select(range(min(limit, len(ds))))
    try:
        return [spec.to_item(doc) for doc in ds]
    except KeyError as err:
        raise UserError(
            f"{task} rows lack field {err}; the data must follow the {spec.hub} schema"
        ) from None


# -- scoring ----------------------------------------------------------------------------------
def encode_pair(tokenizer: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) exactly as the harness's causal-LM path makes them."""
    if context == "":
        cont = list(tokenizer.encode(continuation))
        if cont and cont[0] == tokenizer.eos_id:
            return cont[:1], cont[1:]
        return [tokenizer.eos_id], cont
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    whole = list(tokenizer.encode(context + continuation))
    ctx = list(tokenizer.encode(context))
    return ctx, whole[len(ctx) :]


@torch.no_grad()
def loglikelihoods(
    model: Any,
    pairs: Sequence[tuple[list[int], list[int]]],
    depths: Iterable[int],
    batch_size: int = 16,
    device: str | torch.device | None = None,
    max_length: int | None = None,
    greedy: bool = False,
    pad_id: int = 0,
) -> dict[int, list[tuple[float, bool | None]]]:
    """{depth: [(summed log p(continuation | context), is_greedy)]} for token-id pairs.

    Each pair is scored alone (right padding under a causal mask changes nothing), its input
    cut from the left to ``max_length`` (default ``model.config.seq_len``). ``is_greedy``
    (whether argmax decoding would produce the continuation) needs the logits; it is None
    unless ``greedy``.
    """
    depths = sorted(set(depths))
    max_length = max_length or model.config.seq_len
    device = torch.device(device) if device is not None else model_device(model)
    rows = []
    for ctx, cont in pairs:
        full = (list(ctx) + list(cont))[-(max_length + 1) :]
        inp, nxt = full[:-1], full[1:]
        n_cont = min(len(cont), len(inp))
        rows.append((inp, [-100] * (len(inp) - n_cont) + nxt[len(inp) - n_cont :]))
    out: dict[int, list[tuple[float, bool | None]]] = {d: [(0.0, None)] * len(rows) for d in depths}
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i][0]))  # similar lengths together
    for b in range(0, len(order), batch_size):
        idx = order[b : b + batch_size]
        width = max(len(rows[i][0]) for i in idx)
        x = torch.full((len(idx), width), pad_id, dtype=torch.long)
        y = torch.full((len(idx), width), -100, dtype=torch.long)
        for j, i in enumerate(idx):
            inp, tgt = rows[i]
            x[j, : len(inp)] = torch.tensor(inp)
            y[j, : len(tgt)] = torch.tensor(tgt)
        x, y = x.to(device), y.to(device)
        res = model.forward_depths(x, depths, targets=y, reduction="none", return_logits=greedy)
        scored = y != -100
        for d in depths:
            logits, loss = res[d]
            ll = (-loss.double().sum(dim=1)).tolist()
            hit = (
                ((logits.argmax(-1) == y) | ~scored).all(dim=1).tolist()
                if greedy
                else [None] * len(idx)
            )
            for j, i in enumerate(idx):
                out[d][i] = (ll[j], hit[j])
    return out


def mc_scores(lls: Sequence[float], item: MCItem) -> tuple[float, float]:
    """(acc, acc_norm) of one item from its choices' summed log-likelihoods."""
    lls = np.asarray(lls, dtype=np.float64)
    lengths = np.array([float(len(c)) for c in item.choices])
    acc = float(np.argmax(lls) == item.gold)
    acc_norm = float(np.argmax(lls / lengths) == item.gold)
    return acc, acc_norm


def _mean_stderr(xs: Sequence[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1)) / math.sqrt(len(xs))


def score_items(
    model: Any,
    tokenizer: Any,
    items: Sequence[MCItem],
    depths: Iterable[int],
    batch_size: int = 16,
    device: str | torch.device | None = None,
    max_length: int | None = None,
) -> dict[int, list[list[float]]]:
    """{depth: per item, the summed log-likelihood of each choice}."""
    pairs, owner = [], []
    for n, item in enumerate(items):
        for choice in item.choices:
            pairs.append(encode_pair(tokenizer, item.context, " " + choice))
            owner.append(n)
    lls = loglikelihoods(
        model, pairs, depths, batch_size, device, max_length, pad_id=getattr(tokenizer, "eos_id", 0)
    )
    out: dict[int, list[list[float]]] = {}
    for d, scored in lls.items():
        per_item: list[list[float]] = [[] for _ in items]
        for n, (ll, _) in zip(owner, scored):
            per_item[n].append(ll)
        out[d] = per_item
    return out


def evaluate_tasks(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[str] = ("hellaswag", "piqa", "arc_easy"),
    depths: Iterable[int] = (1,),
    limit: int | None = None,
    batch_size: int = 16,
    device: str | torch.device | None = None,
    data_files: dict[str, str] | None = None,
    max_length: int | None = None,
) -> dict[str, dict[int, dict[str, float]]]:
    """{task: {depth: {acc, acc_norm, acc_stderr, acc_norm_stderr, n}}}, zero-shot.

    ``data_files`` maps a task name to a local file in its hub schema (offline use, tests);
    other tasks load from the hub. ``limit`` keeps the first N items, like the harness's.
    """
    depths = sorted(set(depths))
    data_files = data_files or {}
    results: dict[str, dict[int, dict[str, float]]] = {}
    for task in tasks:
        items = load_items(task, data_files.get(task), limit)
        if not items:
            raise UserError(f"{task}: no items to score; check the data file or --limit")
        lls = score_items(model, tokenizer, items, depths, batch_size, device, max_length)
        results[task] = {}
        for d in depths:
            accs, norms = zip(*(mc_scores(ll, item) for ll, item in zip(lls[d], items)))
            results[task][d] = {
                "acc": sum(accs) / len(accs),
                "acc_norm": sum(norms) / len(norms),
                "acc_stderr": _mean_stderr(accs),
                "acc_norm_stderr": _mean_stderr(norms),
                "n": len(items),
            }
    return results


# -- command line -----------------------------------------------------------------------------
def load_run(run_dir: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of a trained run on web text: the checkpoint, and the tokenizer of
    the token directory it trained on."""
    model, cfg = load_model(run_dir, device=device)
    if cfg.data.kind != "text" or not cfg.data.path:
        raise UserError(
            f"run {run_dir} trained on data.kind={cfg.data.kind!r}; downstream tasks need a run "
            "trained on a text corpus (data.kind=text)"
        )
    return model, load_tokenizer(cfg.data.path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="looped downstream",
        description="Zero-shot HellaSwag / PIQA / ARC-Easy accuracy of a run at each serving depth.",
    )
    p.add_argument("--run", required=True, help="run directory (checkpoint + config)")
    p.add_argument("--tasks", default="hellaswag,piqa,arc_easy", help="comma-separated task names")
    p.add_argument("--depths", default="1-16", help="serving depths, e.g. 1-16 or 1,2,4,8")
    p.add_argument("--limit", type=int, default=None, help="first N items per task")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per forward pass")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument(
        "--data", action="append", default=[], metavar="TASK=PATH", help="local data for a task"
    )
    p.add_argument("--out", default=None, help="write the results as JSON here")
    a = p.parse_args(argv)
    files = dict(kv.split("=", 1) for kv in a.data if "=" in kv)
    model, tokenizer = load_run(a.run, a.device)
    res = evaluate_tasks(
        model,
        tokenizer,
        a.tasks.split(","),
        parse_depths(a.depths),
        a.limit,
        a.batch_size,
        a.device,
        files,
    )
    for task, by_depth in res.items():
        for d, m in by_depth.items():
            print(f"{task:<10} K={d:<3} acc={m['acc']:.4f} acc_norm={m['acc_norm']:.4f} n={m['n']}")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except UserError as err:
        print(f"looped downstream: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
