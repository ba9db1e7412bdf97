"""The paper's comparison in one place: its schedules, how figures and tables name and colour
them, and the numbers it reports.

*Adaptive-Depth Is a Finishing Stage* (arXiv 2610.14252) compares a looped transformer trained
at a fixed loop count, one trained with a uniformly drawn count from the start, and fixed-first
schedules that switch to the uniform draw for a short finish. The demo, the figures, the README
report and the notebooks import these names, so a schedule's label or colour is typed once and
a sentence such as "K=4 for 80%" is computed from the spec it describes.

This module imports nothing from the rest of the package but `schedules`, so every layer above
it (demo, plots, report) can use it without importing each other.
"""

from __future__ import annotations

from looped.schedules import FixedFirst, parse_schedule

# -- schedules -------------------------------------------------------------------------------
# the adaptive-from-the-start baseline every saving and every NLL is measured against
UNIFORM = "uniform:1-16"
# fixed K=4: the fixed-depth comparison of the paper's figures (and the demo's)
FIXED = "fixed:4"
# the demo's fixed-first schedule: K=4 for 80% of the steps, then uniform 1..16 (paper Fig. 7)
FIXED_FIRST = "fixed-first:k=4,frac=0.8,then=uniform:1-16"
# the 200M recipe: K=2 for the first 67% of the run (45% modeled saving in the abstract)
RECIPE_200M = "fixed-first:k=2,frac=0.67,then=uniform:1-16"
# the 1B recipes: K=4 for the first 67% or 80% (31% and 37% modeled saving)
RECIPES_1B = (
    "fixed-first:k=4,frac=0.67,then=uniform:1-16",
    "fixed-first:k=4,frac=0.8,then=uniform:1-16",
)
# uniform 1..16 with its own K for each of a step's micro-batches: not the paper's, the variant
# the diagnosis and the length study set beside uniform (a name, run as uniform:1-16 with
# depth_per_micro=true)
UNIFORM_PER_MICRO = "uniform:1-16 per micro-batch"
# the three schedules of the demo's main grid, in the order tables and legends list them
MAIN_SCHEDULES = (FIXED, FIXED_FIRST, UNIFORM)

# -- names and colours -----------------------------------------------------------------------
# legend and table label of each main schedule
LABELS = {FIXED: "fixed K=4", FIXED_FIRST: "fixed-first (80%)", UNIFORM: "uniform 1..16"}
# plot colour of each main schedule (ColorBrewer Dark2), keyed by its spec
COLORS = {FIXED: "#d95f02", FIXED_FIRST: "#1b9e77", UNIFORM: "#7570b3"}

# -- the paper's reported numbers ------------------------------------------------------------
# modeled training compute saved against uniform 1..16, as the abstract states it
SAVINGS = {RECIPE_200M: 0.45, RECIPES_1B[0]: 0.31, RECIPES_1B[1]: 0.37}
# how close fixed-first's mean NLL across serving depths ends to uniform's (fraction, worst case)
NLL_GAP = (0.005, 0.008)


def label(schedule: str) -> str:
    """The name a figure or table gives a schedule: the paper's label for the main three, the
    spec with `fixed:8` written as `fixed K=8` otherwise."""
    return LABELS.get(schedule, schedule.replace("fixed:", "fixed K="))


def recipe_label(schedule: str) -> str:
    """Like `label`, but a fixed-first schedule says its K and fraction: the text track compares
    several recipes, which the demo's one "fixed-first (80%)" label would not tell apart."""
    if schedule.startswith("fixed-first"):
        k, frac = fixed_phase(schedule)
        return f"fixed-first K={k} ({frac:.0%})"
    return label(schedule)


def color_of(label_or_schedule: str) -> str | None:
    """The paper colour of a main schedule, given its spec or its label (None for others)."""
    by_label = {LABELS[s]: c for s, c in COLORS.items()}
    return COLORS.get(label_or_schedule) or by_label.get(label_or_schedule)


def fixed_phase(schedule: str = FIXED_FIRST) -> tuple[int, float]:
    """(K, fraction of the steps) of a fixed-first schedule's fixed phase."""
    s = parse_schedule(schedule)
    if not isinstance(s, FixedFirst):
        raise ValueError(f"{schedule} is not a fixed-first schedule")
    return s.k, s.frac


def fixed_depth(schedule: str = FIXED) -> int:
    """K of a fixed schedule (`fixed:4` -> 4)."""
    return int(schedule.split(":")[1])
