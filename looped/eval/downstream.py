"""Zero-shot HellaSwag, PIQA and ARC-Easy at every serving depth, scored as lm-evaluation-harness
(v0.4.13) does, so the numbers compare with published harness numbers.

    results = evaluate_tasks(model, tokenizer, ["hellaswag", "piqa", "arc_easy"], depths=range(1, 17))
    results["piqa"][4]  # {"acc", "acc_norm", "acc_stderr", "acc_norm_stderr", "n"}

Copied from the harness: the task YAMLs' prompts (``piqa`` from ``baber/piqa``, PR #2790's parquet
copy), ``_encode_pair``'s tokenization, the left truncation, and the metrics (acc_norm divides by
the choice's length in characters). Every depth comes from one ``forward_depths`` pass.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from looped.data.text import load_tokenizer, local_data_files
from looped.errors import UserError, first_line
from looped.eval.evaluate import load_model
from looped.runtime.device import model_device


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
    context = doc["activity_label"] + ": " + doc["ctx_a"] + " " + doc["ctx_b"].capitalize()
    choices = [hellaswag_preprocess(e) for e in doc["endings"]]
    return MCItem(hellaswag_preprocess(context), choices, int(doc["label"]))


def piqa_item(doc: dict) -> MCItem:
    return MCItem(_question(doc["goal"]), [doc["sol1"], doc["sol2"]], int(doc["label"]))


def arc_item(doc: dict) -> MCItem:
    labels, key = list(doc["choices"]["label"]), doc["answerKey"]
    if key not in labels:
        raise UserError(f"ARC row {doc.get('id')}: answerKey {key!r} not in choice labels {labels}")
    return MCItem(_question(doc["question"]), list(doc["choices"]["text"]), labels.index(key))


def _question(text: str) -> str:
    return f"Question: {text}\nAnswer:"


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
    """The first ``limit`` items of a task (all when None), from the harness's hub split or a
    local .jsonl/.json/.parquet file (or directory) in the same schema."""
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    spec = TASKS[task]
    rows = _rows(task, spec, data_file, limit)
    try:
        return [spec.to_item(doc) for doc in rows]
    except KeyError as err:
        msg = f"{task} rows lack field {err}; the data must follow the {spec.hub} schema"
        raise UserError(msg) from None


def _rows(task: str, spec: TaskSpec, data_file: str | None, limit: int | None) -> Any:
    import datasets  # ~2 s to import; only loading task items needs it

    if data_file is None:
        try:  # downloaded once into the datasets cache, so later runs work offline
            rows = datasets.load_dataset(spec.hub, spec.subset, split=spec.split)
        except Exception as err:  # the hub raises many types; one line for the user
            why = first_line(err)
            msg = f"could not load {task} from {spec.hub} ({why}); pass a local copy via data_files"
            raise UserError(msg) from None
        return rows if limit is None else rows.select(range(min(limit, len(rows))))
    if not Path(data_file).exists():
        msg = f"{task} data file {data_file} not found; pass an existing .jsonl/.parquet path"
        raise UserError(msg)
    builder, files = local_data_files(Path(data_file))
    if builder == "text":
        msg = f"{task} data must be .jsonl/.json/.parquet rows in the hub schema, not .txt"
        raise UserError(msg)
    # streamed: a local file needs no Arrow cache copy
    rows = datasets.load_dataset(builder, data_files=files, split="train", streaming=True)
    return rows if limit is None else rows.take(limit)


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
    """{depth: [(summed log p(continuation | context), is_greedy)]} for token-id pairs, each
    input cut from the left to ``max_length`` (default ``model.config.seq_len``); ``is_greedy``
    is None unless ``greedy`` (it needs the logits)."""
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
        batch = [rows[i] for i in idx]  # right-padded to the longest: with pad_id and -100
        x = pad_sequence([torch.tensor(inp, dtype=torch.long) for inp, _ in batch], True, pad_id)
        y = pad_sequence([torch.tensor(tgt, dtype=torch.long) for _, tgt in batch], True, -100)
        x, y = x.to(device), y.to(device)
        res = model.forward_depths(x, depths, targets=y, reduction="none", return_logits=greedy)
        for d in depths:  # the summed log-likelihood of the scored targets, all argmax-correct
            logits, loss = res[d]
            ll = (-loss.double().sum(dim=1)).tolist()
            hit = ((logits.argmax(-1) == y) | (y == -100)).all(dim=1).tolist() if greedy else None
            for j, i in enumerate(idx):
                out[d][i] = (ll[j], hit[j] if greedy else None)
    return out


def mc_scores(lls: Sequence[float], item: MCItem) -> tuple[float, float]:
    """(acc, acc_norm) of one item from its choices' summed log-likelihoods."""
    lls = np.asarray(lls, dtype=np.float64)
    lengths = np.array([float(len(c)) for c in item.choices])
    return float(np.argmax(lls) == item.gold), float(np.argmax(lls / lengths) == item.gold)


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
    pairs = [[encode_pair(tokenizer, it.context, " " + c) for c in it.choices] for it in items]
    flat, pad_id = [p for group in pairs for p in group], getattr(tokenizer, "eos_id", 0)
    lls = loglikelihoods(model, flat, depths, batch_size, device, max_length, pad_id=pad_id)
    return {d: [[ll for ll, _ in g] for g in regroup(scored, pairs)] for d, scored in lls.items()}


def regroup(flat: Sequence, groups: Sequence[Sequence]) -> list[list]:
    """`flat` cut into consecutive pieces as long as each of `groups` (scores back to items)."""
    ends = list(itertools.accumulate(map(len, groups)))
    return [list(flat[end - len(g) : end]) for g, end in zip(groups, ends)]


def evaluate_tasks(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[str] = ("hellaswag", "piqa", "arc_easy"),
    depths: Iterable[int] = (1,),
    limit: int | None = None,
    batch_size: int = 16,
    device: str | torch.device | None = None,
    data_files: dict[str, str] | None = None,
) -> dict[str, dict[int, dict[str, float]]]:
    """{task: {depth: {acc, acc_norm, acc_stderr, acc_norm_stderr, n}}}, zero-shot; ``data_files``
    maps a task to a local file in its hub schema (others load from the hub)."""
    depths = sorted(set(depths))
    results: dict[str, dict[int, dict[str, float]]] = {}
    for task in tasks:
        items = load_items(task, (data_files or {}).get(task), limit)
        if not items:
            raise UserError(f"{task}: no items to score; check the data file or --limit")
        lls = score_items(model, tokenizer, items, depths, batch_size, device)
        results[task] = {}
        for d in depths:
            scores = np.array([mc_scores(ll, item) for ll, item in zip(lls[d], items)])
            n, names = len(items), ("acc", "acc_norm", "acc_stderr", "acc_norm_stderr")
            se = scores.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else [math.nan] * 2
            values = [*scores.mean(axis=0), *se]
            results[task][d] = {k: float(v) for k, v in zip(names, values)} | {"n": n}
    return results


# -- runs -----------------------------------------------------------------------------
def load_run(run_dir: str | Path, device: str = "cpu") -> tuple[Any, Any]:
    """(model, tokenizer) of a run trained on a text corpus."""
    model, cfg = load_model(run_dir, device=device)
    if cfg.data.kind != "text" or not cfg.data.path:
        raise UserError(
            f"run {run_dir} trained on data.kind={cfg.data.kind!r}; downstream tasks need a run "
            "trained on a text corpus (data.kind=text)"
        )
    return model, load_tokenizer(cfg.data.path)
