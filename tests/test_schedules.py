"""Depth schedules: determinism, exact distributions, the fixed-first switch, the spec grammar.

.venv/bin/pytest tests/test_schedules.py
"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from looped.errors import UserError
from looped.schedule_spec import parse_depths, parse_schedule
from looped.schedules import Fixed, FixedFirst, Uniform
from looped.schedules_more import Curriculum, LogNormalPoisson

REPO = Path(__file__).resolve().parents[1]
SPECS = [
    "fixed:4",
    "uniform:1-16",
    "fixed-first:k=4,frac=0.8,then=uniform:1-16",
    "fixed-first:k=2,frac=0.67,then=lognormal-poisson:mean=8,sigma=0.5,max=16",
    "fixed-first:k=4,frac=0.8,then=curriculum:start=4,end=16,frac=1",
    "lognormal-poisson:mean=8,sigma=0.5,max=16",
    "lognormal-poisson:mean=32.5,sigma=0.25,max=64",
    "curriculum:start=1,end=16,frac=0.5",
]
# chi-square 0.999 quantile with 15 degrees of freedom (16 bins - 1): a correct sampler fails
# this test with probability 0.001, fixed once and for all by the seed
CHI2_15_DOF_P999 = 37.697


def chi_square(samples: list[int], probs: dict[int, float]) -> float:
    n, seen = len(samples), Counter(samples)
    assert set(seen) <= set(probs), "sampled a depth outside the distribution's support"
    return sum((seen[k] - n * p) ** 2 / (n * p) for k, p in probs.items())


# ------------------------------------------------------------------ determinism


def test_depths_identical_in_a_fresh_process():
    """A second process (another rank, a resumed run) computes the same K for every step."""
    specs = ["uniform:1-16", "fixed-first:k=4,frac=0.8,then=uniform:1-16", SPECS[5]]
    code = (
        "import json, sys; from looped.schedule_spec import parse_schedule\n"
        "specs = json.loads(sys.argv[1])\n"
        "print(json.dumps([[parse_schedule(s, seed=7).depth(i, 200) for i in range(200)]"
        " for s in specs]))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(specs)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    here = [[parse_schedule(s, seed=7).depth(i, 200) for i in range(200)] for s in specs]
    assert json.loads(out.stdout) == here
    assert len(set(here[0])) > 8  # the uniform run really varies


def test_depth_sequence_is_pinned():
    """The K sequence is part of the run format: old checkpoints resume onto the same depths."""
    s = parse_schedule("uniform:1-16", seed=0)
    assert [s.depth(i, 100) for i in range(16)] == [
        14,
        15,
        2,
        10,
        14,
        11,
        3,
        1,
        16,
        16,
        12,
        4,
        4,
        14,
        10,
        10,
    ]


def test_depth_ignores_and_preserves_global_rng():
    s = parse_schedule("lognormal-poisson:mean=8,sigma=0.5,max=16", seed=3)
    random.seed(0)
    first = [s.depth(i, 50) for i in range(50)]
    after = random.random()
    random.seed(0)
    assert random.random() == after  # depth() consumed nothing from the global generator
    random.seed(99)
    assert [s.depth(i, 50) for i in reversed(range(50))][::-1] == first  # order-free, state-free


def test_seed_changes_the_sequence_and_steps_are_independent_of_total_for_stationary():
    a, b = parse_schedule("uniform:1-16", seed=0), parse_schedule("uniform:1-16", seed=1)
    assert [a.depth(i, 100) for i in range(100)] != [b.depth(i, 100) for i in range(100)]
    assert [a.depth(i, 100) for i in range(100)] == [a.depth(i, 10**6) for i in range(100)]


# ------------------------------------------------------------------ distributions


@pytest.mark.parametrize("spec", ["uniform:1-16", "lognormal-poisson:mean=8,sigma=0.5,max=16"])
def test_empirical_frequencies_match_probs(spec):
    s = parse_schedule(spec, seed=0)
    n = 40_000
    probs = s.probs(0, n)
    assert len(probs) == 16 and min(probs.values()) * n >= 5  # chi-square validity, 15 dof
    samples = [s.depth(i, n) for i in range(n)]
    assert chi_square(samples, probs) < CHI2_15_DOF_P999


def test_chi_square_has_power():
    """The frequency test would catch a sampler off by a modest change in sigma."""
    n = 40_000
    s = parse_schedule("lognormal-poisson:mean=8,sigma=0.5,max=16", seed=0)
    wrong = parse_schedule("lognormal-poisson:mean=8,sigma=0.6,max=16").probs(0, 1)
    assert chi_square([s.depth(i, n) for i in range(n)], wrong) > CHI2_15_DOF_P999


# ------------------------------------------------------------------ per-micro-batch draws


@pytest.mark.parametrize("spec", SPECS)
def test_micro_batch_zero_is_the_step_draw_and_draws_are_pure(spec):
    """Sampling per micro-batch keeps every existing K sequence: micro 0 is the step's draw, and
    every (seed, step, micro) draw is the same whenever and in whatever order it is asked."""
    s = parse_schedule(spec, seed=3)
    assert [s.depth(i, 60, micro=0) for i in range(60)] == [s.depth(i, 60) for i in range(60)]
    grid = [[s.depth(i, 60, micro=m) for m in range(4)] for i in range(60)]
    again = [[s.depth(i, 60, micro=m) for m in reversed(range(4))][::-1] for i in range(60)]
    assert grid == again


def test_micro_batch_draws_are_independent_and_uniform():
    """Micro-batches 1.. draw fresh K from the step's distribution: the per-micro frequencies pass
    the same chi-square test as the per-step ones, and the draws within a step are not copies."""
    s = parse_schedule("uniform:1-16", seed=0)
    n = 10_000
    samples = [s.depth(i, n, micro=m) for i in range(n) for m in (1, 2, 3, 4)]
    assert chi_square(samples, s.probs(0, n)) < CHI2_15_DOF_P999
    same = sum(s.depth(i, n, micro=0) == s.depth(i, n, micro=1) for i in range(n))
    assert abs(same / n - 1 / 16) < 0.015  # independent draws agree with probability 1/16


def test_fixed_first_micro_batches_share_the_fixed_phase():
    s = parse_schedule("fixed-first:k=4,frac=0.8,then=uniform:1-16", seed=1)
    switch = s.switch_step(100)
    assert {s.depth(i, 100, micro=m) for i in range(switch) for m in range(8)} == {4}
    after = {s.depth(i, 100, micro=m) for i in range(switch, 100) for m in range(8)}
    assert len(after) > 8 and after <= set(range(1, 17))


def test_negative_micro_batch_is_refused():
    with pytest.raises(UserError, match="micro=-1"):
        Uniform(1, 16).depth(0, 10, micro=-1)


@pytest.mark.parametrize("spec", SPECS)
def test_probs_sum_to_one_and_match_expected_depth(spec):
    s = parse_schedule(spec)
    for step in (0, 57, 99):
        p = s.probs(step, 100)
        assert abs(sum(p.values()) - 1) < 1e-9
        assert all(v >= 0 and 1 <= k <= s.max_depth() for k, v in p.items())
        assert s.expected_depth(step, 100) == pytest.approx(sum(k * v for k, v in p.items()))
        assert s.depth(step, 100) in p


def test_run_expectation_equals_sum_of_per_step_expectations():
    """The segment-wise run totals agree with a step-by-step sum, for every kind."""
    f = lambda k: 3.0 * k * k + 1  # noqa: E731
    for spec in SPECS:
        s = parse_schedule(spec)
        for total in (1, 7, 101):
            by_step = sum(sum(p * f(k) for k, p in s.probs(i, total).items()) for i in range(total))
            assert s.run_expectation(f, total) == pytest.approx(by_step, rel=1e-12), (spec, total)


def test_lognormal_poisson_moments_match_closed_form():
    """With the cap far away, E[K] = mean + 1 and Var K = mean + mean^2 (e^{sigma^2} - 1)."""
    for mean, sigma in [(8.0, 0.5), (2.0, 0.7)]:  # cap 400: tail mass below 1e-12
        p = LogNormalPoisson(mean, sigma, 400).probs(0, 1)
        m1 = sum(k * v for k, v in p.items())
        m2 = sum(k * k * v for k, v in p.items())
        assert abs(sum(p.values()) - 1) < 1e-12
        assert m1 == pytest.approx(mean + 1, abs=1e-9)
        assert m2 - m1 * m1 == pytest.approx(mean + mean**2 * math.expm1(sigma**2), abs=1e-7)


def test_lognormal_poisson_with_zero_sigma_is_poisson_plus_one():
    p = LogNormalPoisson(5.0, 0.0, 30).probs(0, 1)
    for k in range(1, 30):
        assert p[k] == pytest.approx(math.exp(-5) * 5 ** (k - 1) / math.factorial(k - 1), abs=1e-12)


# ------------------------------------------------------------------ exact small cases


def test_fixed_first_switches_exactly_at_round_frac_total():
    total = 101
    s = parse_schedule("fixed-first:k=4,frac=0.8,then=uniform:1-16", seed=5)
    then = parse_schedule("uniform:1-16", seed=5)
    switch = round(0.8 * total)
    assert s.switch_step(total) == switch == 81
    assert all(s.depth(i, total) == 4 for i in range(switch))
    assert all(s.probs(i, total) == {4: 1.0} for i in range(switch))
    # the finishing phase draws from `then`: with the same seed, the very same K at each step
    assert [s.depth(i, total) for i in range(switch, total)] == [
        then.depth(i, total) for i in range(switch, total)
    ]
    assert s.probs(switch, total) == then.probs(0, 1)
    assert {s.depth(i, total) for i in range(switch, total)} != {4}


def test_fixed_first_round_half_to_even_and_edges():
    s = FixedFirst(3, 0.5, Uniform(1, 2))
    assert s.switch_step(5) == 2  # round(2.5) == 2: Python rounds halves to even
    assert s.switch_step(7) == 4  # round(3.5) == 4
    assert Fixed(4).switch_step(10) is None and Uniform(1, 16).switch_step(10) is None
    short = FixedFirst(3, 0.9, Uniform(1, 2))
    assert short.switch_step(1) == 1 and short.mean_depth(1) == 3  # no finishing step fits


def test_fixed_first_paper_schedule_by_hand():
    """k=2 for 67 of 100 steps, then uniform 1..16 (mean 8.5, mean of K^2 = 93.5)."""
    s = parse_schedule("fixed-first:k=2,frac=0.67,then=uniform:1-16")
    assert s.mean_depth(100) == pytest.approx((67 * 2 + 33 * 8.5) / 100, abs=1e-12)
    assert s.run_expectation(lambda k: k, 100) == pytest.approx(67 * 2 + 33 * 8.5, abs=1e-9)
    assert s.run_expectation(lambda k: k * k, 100) == pytest.approx(67 * 4 + 33 * 93.5, abs=1e-9)
    assert s.run_expectation(lambda k: 1, 100) == pytest.approx(100, abs=1e-9)
    assert s.expected_depth(66, 100) == 2 and s.expected_depth(67, 100) == pytest.approx(8.5)
    assert s.max_depth() == 16


def test_run_expectation_fast_for_a_million_steps():
    s = parse_schedule("fixed-first:k=4,frac=0.8,then=lognormal-poisson:mean=8,sigma=0.5,max=16")
    m = s.run_expectation(lambda k: k, 10**6) / 10**6
    tail = LogNormalPoisson(8, 0.5, 16).expected_depth(0, 1)
    assert m == pytest.approx(0.8 * 4 + 0.2 * tail, rel=1e-12)


def test_curriculum_by_hand():
    s = parse_schedule("curriculum:start=1,end=4,frac=0.5")
    # R = round(0.5 * 16) = 8 ramp steps, 4 values: two steps each, then end
    assert [s.depth(i, 16) for i in range(16)] == [1, 1, 2, 2, 3, 3, 4, 4] + [4] * 8
    assert s.mean_depth(16) == pytest.approx(52 / 16)
    assert s.step_counts(16) == {1: 2, 2: 2, 3: 2, 4: 10}
    uneven = Curriculum(1, 3, 1.0)  # R = 10, n = 3: floor(3 s / 10) -> 1,1,1,1,2,2,2,3,3,3
    assert [uneven.depth(i, 10) for i in range(10)] == [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert uneven.step_counts(10) == {1: 4, 2: 3, 3: 3}


def test_fixed_and_uniform_by_hand():
    assert parse_schedule("fixed:4").mean_depth(10) == 4
    assert parse_schedule("uniform:1-16").expected_depth(3, 10) == pytest.approx(8.5)
    assert parse_schedule("uniform:3-3").probs(0, 1) == {3: 1.0}


# ------------------------------------------------------------------ grammar


@pytest.mark.parametrize("spec", SPECS)
def test_str_parse_round_trip(spec):
    s = parse_schedule(spec, seed=11)
    assert str(s) == spec
    assert parse_schedule(str(s), seed=11) == s
    assert parse_schedule(str(s)) == parse_schedule(spec)  # default seed 0 on both sides


def test_objects_round_trip_and_compare():
    objs = [
        Fixed(4),
        Uniform(1, 16),
        FixedFirst(4, 0.8, Uniform(1, 16)),
        LogNormalPoisson(8, 0.5, 16),
        LogNormalPoisson(2 / 3, 1 / 3, 16),
        Curriculum(1, 16, 0.5),
    ]
    for s in objs:
        assert parse_schedule(str(s)) == s
    assert Uniform(1, 16) != Uniform(1, 16, seed=1) and Uniform(1, 16) != Uniform(1, 15)
    assert FixedFirst(4, 0.8, Uniform(1, 16), seed=3).then.seed == 3  # one seed for the run
    assert parse_schedule(" fixed-first: frac=0.8, k=4, then=uniform:1-16 ") == objs[2]


def test_parse_depths():
    assert parse_depths("1-16") == list(range(1, 17))
    assert parse_depths("1,2,4,8") == [1, 2, 4, 8]
    assert parse_depths("4") == [4]
    assert parse_depths("8, 1-3") == [1, 2, 3, 8]


@pytest.mark.parametrize(
    ("spec", "token"),
    [
        ("5-2", "5-2"),
        ("0-4", "below 1"),
        ("1,x", "x"),
        ("2.5", "2.5"),
        ("1-3,3", "listed twice"),
        ("", "empty"),
    ],
)
def test_parse_depths_rejects(spec, token):
    with pytest.raises(UserError) as err:
        parse_depths(spec)
    assert token in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("spec", "token"),
    [
        ("linear:4", "linear"),  # unknown kind
        ("fixed", "fixed"),  # no arguments
        ("fixed:0", "k=0"),  # K < 1
        ("fixed:-3", "-3"),
        ("fixed:2.5", "2.5"),  # non-integer
        ("uniform:5-2", "5-2"),  # lo > hi
        ("uniform:0-16", "lo=0"),
        ("uniform:1..16", "1..16"),
        ("fixed-first:k=4,frac=1.5,then=uniform:1-16", "frac=1.5"),  # frac outside (0, 1)
        ("fixed-first:k=4,frac=0,then=uniform:1-16", "frac=0"),
        ("fixed-first:k=4,frac=1,then=uniform:1-16", "frac=1"),
        ("fixed-first:k=0,frac=0.8,then=uniform:1-16", "k=0"),
        ("fixed-first:k=4,then=uniform:1-16", "frac"),  # missing key
        ("fixed-first:k=4,frac=0.8", "then"),
        ("fixed-first:k=4,frac=0.8,seed=1,then=uniform:1-16", "seed"),  # unknown key
        ("fixed-first:k=4,k=5,frac=0.8,then=uniform:1-16", "'k'"),  # duplicate key
        ("fixed-first:k=four,frac=0.8,then=uniform:1-16", "four"),
        ("fixed-first:k=4,frac=0.8,then=uniform:9-3", "9-3"),  # bad inner spec
        ("fixed-first:k=4,frac=0.8,then=fixed-first:k=2,frac=0.5,then=fixed:1", "fixed-first"),
        ("fixed-first:then=uniform:1-16,k=4,frac=0.8", "last"),  # then= must come last
        ("lognormal-poisson:mean=8,sigma=0.5", "max"),
        ("lognormal-poisson:mean=-8,sigma=0.5,max=16", "mean=-8"),
        ("lognormal-poisson:mean=8,sigma=-1,max=16", "sigma=-1"),
        ("lognormal-poisson:mean=8,sigma=0.5,max=0", "max=0"),
        ("lognormal-poisson:mean=8,sigma=nan,max=16", "nan"),
        ("lognormal-poisson:mean=8,sigma=0.5,max=16.5", "16.5"),
        ("curriculum:start=4,end=2,frac=0.5", "start=4"),
        ("curriculum:start=1,end=16,frac=1.2", "frac=1.2"),
        ("curriculum:start=1,end=16", "frac"),
        ("curriculum:start=1,end=16,frac=0.5,extra=3", "extra"),
    ],
)
def test_bad_specs_name_the_bad_part(spec, token):
    with pytest.raises(UserError) as err:
        parse_schedule(spec)
    msg = str(err.value)
    problem = msg.replace(repr(spec.strip()), "")  # the message echoes the spec; look past it
    assert token in problem, msg
    assert "\n" not in msg


def test_bad_constructor_and_call_arguments():
    with pytest.raises(UserError, match="lo > hi"):
        Uniform(5, 2)
    with pytest.raises(UserError, match="total_steps=0"):
        Fixed(4).depth(0, 0)
    with pytest.raises(UserError, match="step=-1"):
        Uniform(1, 16).probs(-1, 10)
    with pytest.raises(TypeError):
        Uniform(1, 16).depth(1.5, 10)
