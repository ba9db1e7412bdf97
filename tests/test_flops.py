"""The FLOP model against PyTorch's own counter, its exact algebra, and the paper's numbers.

.venv/bin/pytest tests/test_flops.py
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from looped import cli
from looped.config import load_config
from looped.errors import UserError
from looped.flops import (
    count_params,
    fixed_and_loop_cost,
    flops_per_token,
    mfu,
    saving,
    saving_at_ratio,
    schedule_flops,
    steps_for_budget,
    tokens_per_step,
)
from looped.model import LoopedConfig, LoopedTransformer
from looped.runtime.device import peak_flops
from looped.schedule_spec import parse_schedule

T = 32  # sequence length of the counter checks
SMALL = dict(vocab_size=96, seq_len=T, d_model=64, n_head=4)
CONFIGS = {
    "plain": LoopedConfig(**SMALL),
    "prelude-coda-concat-untied": LoopedConfig(
        **SMALL, n_prelude=1, n_block=2, n_coda=1, injection="concat", tie_embeddings=False
    ),
    "prelude-none": LoopedConfig(**SMALL, n_prelude=2, n_block=1, injection="none", d_ff=96),
}
UNIFORM = parse_schedule("uniform:1-16")


def counted_flops_per_token(cfg: LoopedConfig, depth: int, bptt: int = 0) -> float:
    """FlopCounterMode's count for forward + backward of the loss, per token.

    SDPA runs through the math backend: on CPU the fused flash kernel has no formula in the
    counter (it would count 0 for attention), while the math path's bmm calls are counted.
    """
    torch.manual_seed(0)
    model = LoopedTransformer(LoopedConfig(**{**cfg.__dict__, "bptt": bptt}))
    idx = torch.randint(0, cfg.vocab_size, (2, T))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        _, loss = model(idx, depth=depth, targets=idx)
        loss.backward()
    return counter.get_total_flops() / idx.numel()


# The issue asks for 5%; the model and the counter agree exactly, so the tests hold them to
# that: 5% would let a missing concat-injection term (about 5% at depth 8) slip through.
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("depth", [1, 3, 8])
def test_flops_per_token_matches_flop_counter(name: str, depth: int) -> None:
    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    counted = counted_flops_per_token(cfg, depth)
    assert flops_per_token(cfg, depth, T) == pytest.approx(counted, rel=1e-9)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize(("depth", "bptt"), [(5, 2), (3, 1), (2, 4)])
def test_truncated_backprop_matches_flop_counter(name: str, depth: int, bptt: int) -> None:
    torch.set_num_threads(1)
    cfg = CONFIGS[name]
    counted = counted_flops_per_token(cfg, depth, bptt)
    assert flops_per_token(cfg, depth, T, bptt=bptt) == pytest.approx(counted, rel=1e-9)
    if bptt < depth:  # frozen loops are cheaper than full backprop, never free
        full, forward = (
            flops_per_token(cfg, depth, T, bptt=0),
            flops_per_token(cfg, depth, T, backward=False),
        )
        assert forward * 3 == full and full > counted > forward


@pytest.mark.parametrize("name", list(CONFIGS))
def test_cost_is_affine_in_depth(name: str) -> None:
    cfg = CONFIGS[name]
    fixed, loop = fixed_and_loop_cost(cfg, T)
    assert fixed > 0 and loop > 0
    for k in range(1, 17):
        assert flops_per_token(cfg, k, T) == fixed + k * loop


def test_schedule_total_small_exact_case() -> None:
    cfg = CONFIGS["prelude-coda-concat-untied"]
    fixed, loop = fixed_and_loop_cost(cfg, T)
    sched = parse_schedule("fixed-first:k=2,frac=0.5,then=uniform:1-4")
    # 10 steps: 5 at K=2, then 5 with K uniform on 1..4 (mean 2.5); 7 tokens per step
    expected = 7 * (5 * (fixed + 2 * loop) + 5 * (fixed + 2.5 * loop))
    assert schedule_flops(cfg, sched, 10, 7, T) == pytest.approx(expected, rel=1e-12)
    # saving against uniform 1..16 at equal steps, in closed form from F and R
    got = saving(cfg, parse_schedule("fixed:4"), UNIFORM, 10, T)
    assert got == pytest.approx(1 - (fixed + 4 * loop) / (fixed + 8.5 * loop), rel=1e-12)


@pytest.mark.parametrize(
    "spec",
    [
        "uniform:1-16",
        "fixed:3",
        "fixed-first:k=2,frac=0.67,then=uniform:1-16",
        "curriculum:start=1,end=16,frac=0.5",
        "lognormal-poisson:mean=8,sigma=0.5,max=16",
    ],
)
@pytest.mark.parametrize("budget_steps", [2.0, 7.3, 101.5])
def test_steps_for_budget_is_the_largest_that_fits(spec: str, budget_steps: float) -> None:
    cfg, tps = CONFIGS["plain"], 64
    sched = parse_schedule(spec)
    budget = budget_steps * schedule_flops(cfg, UNIFORM, 1, tps, T)  # some steps of uniform
    n = steps_for_budget(cfg, sched, budget, tps, T)
    assert (
        schedule_flops(cfg, sched, n, tps, T) <= budget < schedule_flops(cfg, sched, n + 1, tps, T)
    )
    # a budget of exactly one run's cost buys exactly that run
    exact = schedule_flops(cfg, sched, 37, tps, T)
    assert steps_for_budget(cfg, sched, exact, tps, T) == 37


def test_bad_budget_and_depth_are_user_errors() -> None:
    cfg = CONFIGS["plain"]
    with pytest.raises(UserError, match="below one step"):
        steps_for_budget(cfg, UNIFORM, 1.0, 64, T)
    with pytest.raises(UserError, match="max_depth"):
        schedule_flops(LoopedConfig(**SMALL, max_depth=8), UNIFORM, 10, 64, T)


PAPER = [  # (preset, schedule, saving in the abstract)
    ("200m", "fixed-first:k=2,frac=0.67,then=uniform:1-16", 0.45),
    ("1b", "fixed-first:k=4,frac=0.67,then=uniform:1-16", 0.31),
    ("1b", "fixed-first:k=4,frac=0.8,then=uniform:1-16", 0.37),
]


@pytest.mark.parametrize(("preset", "spec", "paper"), PAPER)
def test_saving_from_the_fixed_cost_alone_is_the_models_saving(
    preset: str, spec: str, paper: float
) -> None:
    """C(K) = F + K R: a preset's saving is fixed by its F/R and the schedules' mean depths."""
    cfg = load_config(preset)
    fixed, loop = fixed_and_loop_cost(cfg.model, cfg.seq_len)
    full = saving(cfg.model, parse_schedule(spec), UNIFORM, cfg.max_steps, cfg.seq_len)
    ratio = saving_at_ratio(fixed / loop, parse_schedule(spec), UNIFORM, cfg.max_steps)
    assert ratio == pytest.approx(full, rel=1e-9)
    assert saving_at_ratio(0.0, parse_schedule("fixed:4"), UNIFORM, 100) == pytest.approx(
        1 - 4 / 8.5
    )
    with pytest.raises(UserError, match="F/R"):
        saving_at_ratio(-1.0, parse_schedule(spec), UNIFORM, 100)


@pytest.mark.parametrize(("preset", "spec", "paper"), PAPER)
def test_presets_reproduce_the_abstracts_savings(preset: str, spec: str, paper: float) -> None:
    cfg = load_config(preset)
    assert spec in cfg.paper_schedules and "uniform:1-16" in cfg.paper_schedules
    got = saving(cfg.model, parse_schedule(spec), UNIFORM, cfg.max_steps, cfg.seq_len)
    assert abs(got - paper) <= 0.02


@pytest.mark.parametrize(("preset", "size"), [("200m", 200e6), ("1b", 1e9)])
def test_presets_have_the_stated_size_and_budget(preset: str, size: float) -> None:
    cfg = load_config(preset)
    n_params, _ = count_params(cfg.model)
    assert abs(n_params / size - 1) < 0.1
    fixed, loop = fixed_and_loop_cost(cfg.model, cfg.seq_len)
    assert 1.0 < fixed / loop < 1.4
    # the 100% budget is the uniform run at the preset's length: it buys exactly max_steps
    tps = tokens_per_step(cfg)
    assert (
        steps_for_budget(cfg.model, UNIFORM, cfg.full_budget_flops, tps, cfg.seq_len)
        == cfg.max_steps
    )
    assert cfg.dtype == "bf16" and cfg.compile and cfg.data.kind == "text"
    assert cfg.fsdp == (preset == "1b")


def test_looped_flops_cli_shows_the_three_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["flops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {(r["preset"], r["schedule"]): r["saving_vs_uniform"] for r in rows}
    for preset, spec, paper in PAPER:
        assert abs(got[preset, spec] - paper) <= 0.02
    assert all(r["saving_vs_uniform"] == 0 for r in rows if r["schedule"] == "uniform:1-16")
    assert cli.main(["flops", "--preset", "200m"]) == 0
    text = capsys.readouterr().out
    assert "45.0%" in text and "1b" not in text
    assert cli.main(["flops", "--preset", "nope"]) == 2
    assert "unknown preset" in capsys.readouterr().err


def test_peak_flops_and_mfu() -> None:
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756e12  # the longer name wins over "H100"
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "fp32") == 19.5e12
    assert peak_flops("cpu", "bf16") is None and peak_flops("Tesla V100-SXM2-16GB", "bf16") is None
    assert mfu(tokens_per_s=1e4, flops_per_token=3e9, peak_flops=1e14) == pytest.approx(0.3)


def test_flops_tflops_adds_expected_wall_time(capsys) -> None:
    from looped.cli import main as cli

    assert cli(["flops", "--preset", "200m", "--tflops", "100", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    for row in rows:
        assert row["hours_at_tflops"] == pytest.approx(row["total_flops"] / 100e12 / 3600)
    assert cli(["flops", "--tflops", "0"]) == 2
