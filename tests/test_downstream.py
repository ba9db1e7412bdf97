"""Downstream multiple choice: harness prompts, exact acc/acc_norm, one depth sweep = per-depth runs,
and (when lm-eval is installed) the harness itself scoring a looped model through the adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from looped.commands import downstream as downstream_cli
from looped.data.text import HFTokenizer
from looped.errors import UserError
from looped.eval.downstream import MCItem, encode_pair, evaluate_tasks, load_items, score_items
from looped.model import LoopedConfig, LoopedTransformer

FIXTURES = Path(__file__).parent / "fixtures"
DATA = {
    "hellaswag": str(FIXTURES / "hellaswag.jsonl"),
    "piqa": str(FIXTURES / "piqa.parquet"),
    "arc_easy": str(FIXTURES / "arc_easy.jsonl"),
}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and the test machines have few cores)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tok() -> HFTokenizer:
    return HFTokenizer.from_spec(str(FIXTURES / "tokenizer.json"))  # byte-level BPE, 512 tokens


@pytest.fixture(scope="module")
def model() -> LoopedTransformer:
    torch.manual_seed(0)
    cfg = LoopedConfig(vocab_size=512, seq_len=128, d_model=32, n_head=2, max_depth=4, init_std=0.2)
    return LoopedTransformer(cfg).eval()


class CharTokenizer:
    """One token per character (ord), EOS = 0: token counts are character counts."""

    eos_id, vocab_size = 0, 128

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids)


class CostModel:
    """Per-token loss from a table: 'x' costs 3/depth nats, anything else 0.5, whatever the context."""

    config = LoopedConfig(vocab_size=128, seq_len=64)

    def forward_depths(self, idx, depths, targets, reduction="mean", return_logits=True):
        assert reduction == "none"
        out = {}
        for d in depths:
            loss = torch.where(targets == ord("x"), 3.0 / d, 0.5)
            out[d] = (None, torch.where(targets == -100, 0.0, loss))
        return out


class NextCharModel(torch.nn.Module):
    """A consistent tiny LM: from token t it predicts t + 1 with high probability."""

    config = LoopedConfig(vocab_size=128, seq_len=16)

    def forward(self, idx, depth, targets=None, reduction="mean"):
        logits = 5.0 * F.one_hot((idx + 1) % 128, 128).float()
        if targets is None:
            return logits, None
        loss = F.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction=reduction
        )
        return logits, loss.view_as(targets) if reduction == "none" else loss

    def forward_depths(self, idx, depths, targets=None, reduction="mean", return_logits=True):
        out = {}
        for d in depths:
            logits, loss = self(idx, d, targets, reduction)
            out[d] = (logits if return_logits else None, loss)
        return out


# -- prompts ----------------------------------------------------------------------------------
def test_hellaswag_prompts_match_the_harness() -> None:
    items = load_items("hellaswag", DATA["hellaswag"])
    assert items[0] == MCItem(
        "Making a sandwich: A woman lays two slices of bread on a cutting board. She",
        [
            "spreads peanut butter on one slice with a knife.",
            "throws the bread into a lake.",
            "sings to the bread for a while.",
            "walks away and never comes back.",
        ],
        0,
    )
    # str.capitalize() lowercases the rest of ctx_b ("Strings" -> "strings")
    assert items[1].context == (
        "Playing guitar: A man sits on a stool holding a guitar. The man then tunes the strings and"
    )
    assert items[1].gold == 2
    # WikiHow markup: " [title]" -> ". ", brackets dropped, double spaces halved (once)
    assert items[2] == MCItem(
        "Home and Garden: How to water a cactus. Check the soil first. Push a finger into the soil.",
        [
            " If it feels dry, water the plant slowly.",
            "Cacti need water every hour. of the day.",
            " Paint the pot blue. Cacti like blue.",
            "Sing  to it.",
        ],
        0,
    )


def test_piqa_and_arc_prompts_match_the_harness() -> None:
    piqa = load_items("piqa", DATA["piqa"])
    assert piqa[1] == MCItem(
        "Question: To open a stuck jar lid,\nAnswer:",
        [
            "put the jar in the freezer for a week.",
            "tap the lid with a spoon and twist it while holding a towel.",
        ],
        1,
    )
    arc = load_items("arc_easy", DATA["arc_easy"], limit=2)
    assert len(arc) == 2
    assert arc[0] == MCItem(
        "Question: Which of these is a source of light?\nAnswer:",
        ["a mirror", "the Sun", "the Moon", "a window"],
        1,
    )
    assert arc[1].gold == 1  # answerKey "2" among labels "1".."4"
    assert [len(i.choices) for i in load_items("arc_easy", DATA["arc_easy"])] == [4, 4, 3]


def test_encode_pair_splits_the_whole_string(tok: HFTokenizer) -> None:
    ctx, cont = encode_pair(tok, "Question: Which tool?\nAnswer:", " a ruler")
    assert ctx == tok.encode("Question: Which tool?\nAnswer:")
    assert ctx + cont == tok.encode("Question: Which tool?\nAnswer: a ruler")
    # a trailing space of the context belongs to the continuation
    assert encode_pair(tok, "Answer: ", "a ruler") == encode_pair(tok, "Answer:", " a ruler")
    # an empty context becomes the EOS token
    assert encode_pair(tok, "", "a ruler") == ([tok.eos_id], tok.encode("a ruler"))


# -- metrics ----------------------------------------------------------------------------------
def test_exact_acc_and_acc_norm_from_known_loglikelihoods(tmp_path: Path) -> None:
    rows = [
        {"goal": "g", "sol1": "xy", "sol2": "yyyyyyyy", "label": 1},
        {"goal": "h", "sol1": "xy", "sol2": "yyyyyyyy", "label": 1},
        {"goal": "i", "sol1": "zzz", "sol2": "x", "label": 0},
    ]
    path = tmp_path / "piqa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = load_items("piqa", str(path))
    lls = score_items(CostModel(), CharTokenizer(), items, depths=[1, 4])
    # depth 1: " xy" = 0.5 + 3 + 0.5 nats, " yyyyyyyy" = 9 * 0.5, " zzz" = 4 * 0.5, " x" = 0.5 + 3
    assert lls[1] == [[-4.0, -4.5], [-4.0, -4.5], [-2.0, -3.5]]
    assert lls[4] == [[-1.75, -4.5], [-1.75, -4.5], [-2.0, -1.25]]
    res = evaluate_tasks(
        CostModel(), CharTokenizer(), ["piqa"], [1, 4], data_files={"piqa": str(path)}
    )
    # acc takes the largest sum; acc_norm divides by the choice's characters (without the space):
    # depth 1: -4.0/2 = -2 < -4.5/8 = -0.5625, so acc picks "xy" and acc_norm "yyyyyyyy"
    assert res["piqa"][1] == pytest.approx(
        {"acc": 1 / 3, "acc_norm": 1.0, "acc_stderr": 1 / 3, "acc_norm_stderr": 0.0, "n": 3}
    )
    # depth 4: " x" (-1.25) now beats " zzz" (-2.0) on the sum, not per character (-1.25 < -2/3)
    assert res["piqa"][4] == pytest.approx(
        {"acc": 0.0, "acc_norm": 1.0, "acc_stderr": 0.0, "acc_norm_stderr": 0.0, "n": 3}
    )


def flat(xss: list[list[float]]) -> list[float]:
    return [x for xs in xss for x in xs]


def _reference_ll(
    model: LoopedTransformer, ctx: list[int], cont: list[int], depth: int, max_len: int
) -> float:
    """Sum of log p(cont | ctx) from one unbatched, unpadded forward at one depth."""
    full = (ctx + cont)[-(max_len + 1) :]
    logits, _ = model(torch.tensor([full[:-1]]), depth=depth)
    logp = torch.log_softmax(logits[0].double(), -1)
    n = len(cont)
    return sum(logp[len(full) - 1 - n + i, full[len(full) - n + i]].item() for i in range(n))


@pytest.fixture(scope="module")
def items() -> list[MCItem]:
    return [i for task, path in DATA.items() for i in load_items(task, path)]


@pytest.mark.parametrize("max_length", [None, 32])  # 32 tokens: contexts are cut from the left
def test_one_sweep_equals_each_depth_alone(model, tok, items, max_length) -> None:
    """One batched, padded forward_depths pass over depths 1, 2, 4 gives the log-likelihoods of
    separate unbatched forwards at each depth."""
    sweep = score_items(model, tok, items, depths=[1, 2, 4], batch_size=5, max_length=max_length)
    max_len = max_length or model.config.seq_len
    for d in (1, 2, 4):
        ref = [
            _reference_ll(model, *encode_pair(tok, item.context, " " + c), d, max_len)
            for item in items
            for c in item.choices
        ]
        assert flat(sweep[d]) == pytest.approx(ref, abs=1e-4)
    assert flat(sweep[1]) != pytest.approx(flat(sweep[4]), abs=1e-3)  # depths really differ


def test_evaluate_tasks_sweep_equals_single_depths(model, tok) -> None:
    both = evaluate_tasks(model, tok, list(DATA), [1, 4], data_files=DATA)
    for d in (1, 4):
        alone = evaluate_tasks(model, tok, list(DATA), [d], data_files=DATA)
        assert {task: both[task][d] for task in DATA} == {task: alone[task][d] for task in DATA}
        assert all(both[task][d]["n"] == 3 for task in DATA)


def test_unknown_task_and_bad_schema(tmp_path: Path) -> None:
    with pytest.raises(
        UserError, match="unknown task 'mmlu'; choose from hellaswag, piqa, arc_easy"
    ):
        load_items("mmlu")
    (tmp_path / "p.jsonl").write_text('{"question": "q", "sol1": "a", "sol2": "b", "label": 0}\n')
    with pytest.raises(UserError, match="lack field 'goal'.*baber/piqa schema"):
        load_items("piqa", str(tmp_path / "p.jsonl"))


# -- lm-evaluation-harness adapter ------------------------------------------------------------
def _harness_fixture_tasks(directory: Path) -> list[str]:
    """Task YAMLs that include the harness's own hellaswag/piqa/arc_easy configs and only swap
    the hub dataset for the local fixture (so prompts and metrics are the harness's)."""
    import lm_eval

    root = Path(lm_eval.__file__).parent / "tasks"
    specs = {
        "hellaswag": ("hellaswag/hellaswag.yaml", "json", "validation"),
        "piqa": ("piqa/piqa.yaml", "parquet", "validation"),
        "arc_easy": ("arc/arc_easy.yaml", "json", "test"),
    }
    for name, (yaml, builder, split) in specs.items():
        cfg = {
            "include": str(root / yaml),
            "task": f"fixture_{name}",
            "tag": [],
            "dataset_path": builder,
            "dataset_name": None,
            "dataset_kwargs": {
                "data_files": {split: DATA[name]},
                "cache_dir": str(directory / "cache"),
            },
            "training_split": None,
            **({"validation_split": None} if split == "test" else {}),
        }
        (directory / f"fixture_{name}.yaml").write_text(json.dumps(cfg))
    return [f"fixture_{name}" for name in specs]


def test_harness_scores_match_downstream(
    model: LoopedTransformer, tok: HFTokenizer, tmp_path: Path
) -> None:
    lm_eval = pytest.importorskip("lm_eval")
    from lm_eval.tasks import TaskManager

    from looped.eval.lm_eval_adapter import LoopedLM

    names = _harness_fixture_tasks(tmp_path)
    manager = TaskManager(include_path=str(tmp_path), include_defaults=False)
    lm = LoopedLM(model, tok, depth=2, batch_size=4)
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=names,
        task_manager=manager,
        bootstrap_iters=10,
        log_samples=True,
        verbosity="ERROR",
    )
    ours = evaluate_tasks(model, tok, list(DATA), [2], data_files=DATA)
    for task, name in zip(DATA, names):
        items = load_items(task, DATA[task])
        samples = sorted(out["samples"][name], key=lambda s: s["doc_id"])
        lls = score_items(model, tok, items, [2])[2]
        for item, sample, item_lls in zip(items, samples, lls):
            assert [tuple(a) for a in sample["arguments"]] == [
                (item.context, " " + c) for c in item.choices
            ]
            assert [r[0] for r in sample["filtered_resps"]] == pytest.approx(item_lls, abs=1e-4)
        got = out["results"][name]
        assert (got["acc,none"], got["acc_norm,none"]) == (
            ours[task][2]["acc"],
            ours[task][2]["acc_norm"],
        )
        assert got["acc_stderr,none"] == pytest.approx(ours[task][2]["acc_stderr"])


def test_adapter_rolling_and_greedy_generation() -> None:
    pytest.importorskip("lm_eval")
    from lm_eval.api.instance import Instance

    from looped.eval.lm_eval_adapter import LoopedLM

    lm = LoopedLM(NextCharModel(), CharTokenizer(), depth=1, batch_size=2)

    def req(kind: str, args: tuple) -> Instance:
        return Instance(request_type=kind, doc={}, arguments=args, idx=0)

    # every token scored once, from its true predecessor (the first from EOS), even when the
    # 40-character text needs several windows of max_length = 16
    text = "abcdefghij klmnopqrs abcdeXYZ tuvwxyz!?"
    logp = torch.log_softmax(5.0 * F.one_hot(torch.arange(1, 129) % 128, 128).double(), -1)
    prev = [0, *CharTokenizer().encode(text)[:-1]]
    expected = sum(logp[p, t].item() for p, t in zip(prev, CharTokenizer().encode(text)))
    (got,) = lm.loglikelihood_rolling([req("loglikelihood_rolling", (text,))])
    assert got == pytest.approx(expected, abs=1e-4)

    (a, greedy), (b, not_greedy) = lm.loglikelihood(
        [req("loglikelihood", ("abc", "de")), req("loglikelihood", ("abc", "dx"))]
    )
    assert (greedy, not_greedy) == (True, False) and a > b
    gen = lm.generate_until(
        [
            req("generate_until", ("abc", {"until": ["h"]})),
            req("generate_until", ("k", {"max_gen_toks": 3})),
        ]
    )
    assert gen == ["defg", "lmn"]


def test_run_directory_cli_and_adapter(model: LoopedTransformer, tmp_path: Path) -> None:
    """A checkpoint trained on a text corpus evaluates by run directory: the tokenizer comes
    from the corpus the run names."""
    from looped.config import TrainConfig, to_yaml
    from looped.data.text import prepare_text
    from looped.runtime.checkpoint import save_checkpoint, unique_state_dict

    prepare_text(tmp_path / "corpus", tokenizer=f"hf:{FIXTURES / 'tokenizer.json'}", max_docs=2)
    cfg = TrainConfig(model=model.config)
    cfg.data.kind, cfg.data.path = "text", str(tmp_path / "corpus")
    run = tmp_path / "run"
    save_checkpoint(run, 1, unique_state_dict(model), {}, to_yaml(cfg))
    out = tmp_path / "res.json"
    args = ["--run", str(run), "--tasks", "piqa,arc_easy", "--depths", "1,3", "--device", "cpu"]
    args += [
        "--data",
        f"piqa={DATA['piqa']}",
        "--data",
        f"arc_easy={DATA['arc_easy']}",
        "--out",
        str(out),
    ]
    assert downstream_cli.main(args) == 0
    tok = HFTokenizer.from_spec(str(FIXTURES / "tokenizer.json"))
    expected = evaluate_tasks(model, tok, ["piqa", "arc_easy"], [1, 3], data_files=DATA)
    assert json.loads(out.read_text()) == json.loads(json.dumps(expected))
    if _has_lm_eval():  # the adapter too, when installed
        from looped.eval.lm_eval_adapter import LoopedLM

        lm = LoopedLM.create_from_arg_string(
            f"run={run},depth=3", {"batch_size": "auto", "device": None}
        )
        assert (lm.depth, lm.max_length) == (3, model.config.seq_len)
        ((ll, _),) = lm.loglikelihood([_instance(("Question: x\nAnswer:", " a ruler"))])
        item = MCItem("Question: x\nAnswer:", ["a ruler"], 0)
        ref = score_items(model, tok, [item], [3])[3][0][0]
        assert ll == pytest.approx(ref, abs=1e-5)


def _has_lm_eval() -> bool:
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        return False
    return True


def _instance(args: tuple):
    from lm_eval.api.instance import Instance

    return Instance(request_type="loglikelihood", doc={}, arguments=args, idx=0)
