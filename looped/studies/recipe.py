"""A training recipe's name and its config overrides, both ways: the start-of-training knobs the
map's probes tune for uniform (the LR warmup, the residual init's count of block applications,
the state norm), named as the map's `--recipe` and its results files name them.

    parse_recipe("w2pct_i16")  -> Recipe(warmup=0.02, init_loops=16, state_norm=False)
    recipe_overrides("w10_i1") -> ["optim.warmup_frac=0", "optim.warmup_steps=10", ...]
    recipe_of(cfg)             -> "w2pct_i1"

A study's vocabulary, not the library's: a learner sets `optim.warmup_frac` and
`model.init_loops` directly; the studies and the report name the combinations.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from looped.config import TrainConfig
from looped.errors import UserError

# A recipe names the start-of-training knobs the map's probes tune for uniform: the LR warmup
# (steps, or a share of the run), how many block applications the residual init counts, and
# whether the recurrent state is normed between loops (`model.state_norm`, the "_sn" suffix).
RECIPE_NAME = re.compile(r"w(\d+)(pct)?_i(\d+)(_sn)?")


class Recipe(NamedTuple):
    warmup: float  # LR warmup: steps if 1 or more, else a share of the run
    init_loops: int  # block applications the residual init counts
    state_norm: bool = False  # an RMSNorm on the state between loops


def parse_recipe(name: str) -> Recipe:
    """ "w2pct_i16" -> (0.02, 16, False), "w10_i1_sn" -> (10, 1, True): the warmup (steps if 1
    or more, else a share of the run), the block applications the residual init counts and the
    state norm."""
    m = RECIPE_NAME.fullmatch(name)
    if not m or int(m[3]) < 1 or (m[2] and not 0 < int(m[1]) < 100):
        raise UserError(
            f"--recipe {name}: name it w<steps>_i<loops> or w<N>pct_i<loops>, e.g. w2pct_i16, "
            "with _sn for a normed state (w10pct_i1_sn)"
        )
    return Recipe(int(m[1]) / 100 if m[2] else int(m[1]), int(m[3]), bool(m[4]))


def recipe_name(warmup: float, init_loops: int, state_norm: bool = False) -> str:
    """The inverse of `parse_recipe`: (0.02, 16) -> "w2pct_i16", (10, 1, True) -> "w10_i1_sn"."""
    w = f"{round(warmup * 100)}pct" if warmup < 1 else f"{int(warmup)}"
    return f"w{w}_i{init_loops}" + "_sn" * state_norm


def recipe_overrides(name: str) -> list[str]:
    """A recipe as `key=value` overrides of a run's config (a fixed warmup clears the share)."""
    warmup, loops, normed = parse_recipe(name)
    warm = [f"optim.warmup_frac={warmup}"] if warmup < 1 else []
    warm = warm or ["optim.warmup_frac=0", f"optim.warmup_steps={int(warmup)}"]
    return [*warm, f"model.init_loops={loops}"] + ["model.state_norm=true"] * normed


def recipe_of(cfg: TrainConfig) -> str:
    """The recipe a run's config trains with, named as `parse_recipe` reads it."""
    m = cfg.model
    return recipe_name(cfg.optim.warmup_frac or cfg.optim.warmup_steps, m.init_loops, m.state_norm)
