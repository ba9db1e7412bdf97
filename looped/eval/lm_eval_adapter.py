"""lm-evaluation-harness adapter: any harness task on a looped model at one serving depth.

    from looped.eval.lm_eval_adapter import LoopedLM   # pip install 'looped[eval]'
    lm_eval.simple_evaluate(model=LoopedLM.from_run("runs/1b-ff", depth=4), tasks=["piqa"])
    lm_eval.simple_evaluate(model="looped", model_args="run=runs/1b-ff,depth=4", tasks=[...])

Scoring goes through ``looped.eval.downstream`` (the harness's tokenization, left truncation and
summed log-likelihoods), so both agree on every task they share; for a sweep over depths
``downstream`` is cheaper (one pass serves every depth). Generation is greedy without a KV cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
    from lm_eval.utils import (
        get_rolling_token_windows,
        make_disjoint_window,
        simple_parse_args_string,
    )
except ImportError as err:  # the harness is an optional extra
    raise ImportError(
        "looped.eval.lm_eval_adapter needs lm-evaluation-harness; install it with `pip install 'looped[eval]'`"
    ) from err

from looped.eval.downstream import encode_pair, load_run, loglikelihoods, regroup
from looped.model import check_depth
from looped.runtime.device import model_device


@register_model("looped")
class LoopedLM(LM):
    """A looped transformer served at a fixed loop count ``depth``, as an lm-eval ``LM``."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        depth: int,
        batch_size: int = 16,
        device: str | torch.device | None = None,
        max_length: int | None = None,
        max_gen_toks: int = 256,
    ) -> None:
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.depth = check_depth(int(depth), model.config.max_depth)
        self.batch_size = int(batch_size)
        self._device = torch.device(device) if device is not None else model_device(model)
        self.max_length = int(max_length or model.config.seq_len)  # tokens the model reads at once
        self.max_gen_toks = int(max_gen_toks)

    @classmethod
    def from_run(
        cls, run_dir: str | Path, depth: int, device: str = "cpu", **kwargs: Any
    ) -> LoopedLM:
        """The checkpoint in ``run_dir`` with the tokenizer of the corpus it trained on."""
        model, tokenizer = load_run(run_dir, device)
        return cls(model, tokenizer, depth, device=device, **kwargs)

    @classmethod
    def create_from_arg_obj(
        cls, arg_dict: dict[str, Any], additional_config: dict | None = None
    ) -> LoopedLM:
        """``model_args`` {run, depth, batch_size?, device?, max_length?, max_gen_toks?}."""
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None}
        args = extra | dict(arg_dict)
        if "run" not in args or "depth" not in args:
            msg = "model_args for 'looped' need run=RUN_DIR and depth=K, e.g. run=runs/r,depth=4"
            raise ValueError(msg)
        if str(args.get("batch_size", "")).startswith("auto"):
            args.pop("batch_size")  # no automatic batch-size search here; keep the default
        args.pop("max_batch_size", None)
        run, depth = args.pop("run"), int(args.pop("depth"))
        return cls.from_run(run, depth, device=str(args.pop("device", None) or "cpu"), **args)

    @classmethod
    def create_from_arg_string(
        cls, arg_string: str, additional_config: dict | None = None
    ) -> LoopedLM:
        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    # -- the three request types ----------------------------------------------------------------
    def _score(self, pairs: list[tuple[list[int], list[int]]], greedy: bool) -> list[tuple]:
        args = (self.batch_size, self._device, self.max_length, greedy, self.tokenizer.eos_id)
        return loglikelihoods(self.model, pairs, [self.depth], *args)[self.depth]

    def loglikelihood(self, requests: list, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        pairs = [encode_pair(self.tokenizer, *req.args) for req in requests]
        results = [(ll, bool(g)) for ll, g in self._score(pairs, greedy=True)]
        for req, res in zip(requests, results):
            self.cache_hook.add_partial("loglikelihood", req.args, res)
        return results

    def loglikelihood_rolling(self, requests: list, disable_tqdm: bool = False) -> list[float]:
        """Whole-document log-likelihood in the harness's disjoint rolling windows."""
        eos, docs = self.tokenizer.eos_id, [self.tokenizer.encode(r.args[0]) for r in requests]
        rolling = (
            get_rolling_token_windows(ids, eos, self.max_length, context_len=1) for ids in docs
        )
        pairs = [[make_disjoint_window(w) for w in windows] for windows in rolling]
        scored = self._score([p for group in pairs for p in group], greedy=False)
        totals = [sum((ll for ll, _ in g), 0.0) for g in regroup(scored, pairs)]
        for req, total in zip(requests, totals):
            self.cache_hook.add_partial("loglikelihood_rolling", req.args, total)
        return totals

    @torch.no_grad()
    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        """Greedy decoding until a stop string, EOS, or ``max_gen_toks`` new tokens."""
        outputs = []
        for req in requests:
            context, kwargs = req.args[0], req.args[1] or {}
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else [u for u in until if u]
            max_new = int(kwargs.get("max_gen_toks", self.max_gen_toks))
            ids = self.tokenizer.encode(context) if context else [self.tokenizer.eos_id]
            new: list[int] = []
            while len(new) < max_new:
                x = torch.tensor([(ids + new)[-self.max_length :]], device=self._device)
                logits, _ = self.model(x, depth=self.depth)
                token = int(logits[0, -1].argmax())
                if token == self.tokenizer.eos_id:
                    break
                new.append(token)
                if until and any(u in self.tokenizer.decode(new) for u in until):
                    break
            text = self.tokenizer.decode(new)
            for u in until:
                text = text.split(u)[0]
            self.cache_hook.add_partial("generate_until", req.args, text)
            outputs.append(text)
        return outputs

    def get_model_info(self) -> dict[str, Any]:
        """Recorded by ``simple_evaluate`` in results["config"]."""
        return {"model": "looped", "depth": self.depth, "max_length": self.max_length}
