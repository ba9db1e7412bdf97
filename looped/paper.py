"""The paper's comparison in one place: its schedules, how figures and tables name and colour
them, and the numbers it reports.

*Adaptive-Depth Is a Finishing Stage* (arXiv 2610.14252) compares a looped transformer trained
at a fixed loop count, one trained with a uniformly drawn count from the start, and fixed-first
schedules that switch to the uniform draw for a short finish. The demo, the figures, the README
report and the notebooks import these names, so a schedule's label, colour and marker are typed once and
a sentence such as "K=4 for 80%" is computed from the spec it describes.

This module imports nothing from the rest of the package but `schedules`, so every layer above
it (demo, plots, report) can use it without importing each other.
"""

from __future__ import annotations

from looped.schedule_spec import parse_schedule
from looped.schedules import FixedFirst

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

# uniform 2..16: uniform without K=1, the diagnosis's second intervention (not the paper's)
NO_K1 = "uniform:2-16"

# -- how figures and tables show a schedule --------------------------------------------------
# The one home of every schedule's label, colour (ColorBrewer Dark2) and marker, keyed by spec;
# tests/test_layers.py fails on a label, colour or marker table defined anywhere else. A marker
# of its own keeps two schedules whose curves coincide (fixed-first and fixed K=4 share a run
# until the switch) both visible.
SHOWN: dict[str, tuple[str, str, str]] = {
    FIXED: ("fixed K=4", "#d95f02", "s"),
    FIXED_FIRST: ("fixed-first K=4 (80%)", "#1b9e77", "^"),
    RECIPES_1B[0]: ("fixed-first K=4 (67%)", "#66a61e", "P"),
    RECIPE_200M: ("fixed-first K=2 (67%)", "#e7298a", "X"),
    UNIFORM: ("uniform 1..16", "#7570b3", "o"),
    UNIFORM_PER_MICRO: ("uniform 1..16, K per micro-batch", "#666666", "D"),
    NO_K1: ("uniform 2..16", "#a6761d", "v"),
}
# label -> spec, so that a figure given either finds the same entry
_BY_LABEL = {label: spec for spec, (label, _, _) in SHOWN.items()}

# -- the paper's reported numbers ------------------------------------------------------------
# modeled training compute saved against uniform 1..16, as the abstract states it
SAVINGS = {RECIPE_200M: 0.45, RECIPES_1B[0]: 0.31, RECIPES_1B[1]: 0.37}
WALL_SAVING = "32-39%"  # the paper's measured wall-clock saving of its 1B recipes
# Each recipe's tolerance: how far its mean held-out NLL over serving depths 1..16 may end above
# uniform 1..16's (a fraction of uniform's, paired by seed) and still count as level, as the
# paper states it per recipe. Every verdict reads its tolerance here, through `tolerance`. The
# per-micro-batch arm is not the paper's; it is held to the tighter of the two.
TOLERANCE = {
    RECIPE_200M: 0.005,
    RECIPES_1B[0]: 0.008,
    RECIPES_1B[1]: 0.008,
    UNIFORM_PER_MICRO: 0.005,
}


def _entry(label_or_spec: str) -> tuple[str, str, str] | None:
    return SHOWN.get(label_or_spec) or SHOWN.get(_BY_LABEL.get(label_or_spec, ""))


def label(schedule: str) -> str:
    """The name a figure or table gives a schedule: its entry in SHOWN, else the spec with
    `fixed:8` written as `fixed K=8` and a fixed-first spec as its K and fraction."""
    if entry := _entry(schedule):
        return entry[0]
    if schedule.startswith("fixed-first"):
        k, frac = fixed_phase(schedule)
        return f"fixed-first K={k} ({frac:.0%})"
    return schedule.replace("fixed:", "fixed K=")


def color_of(label_or_schedule: str) -> str | None:
    """A schedule's colour, given its spec or its label (None for one SHOWN leaves out)."""
    entry = _entry(label_or_schedule)
    return entry[1] if entry else None


def marker_of(label_or_schedule: str) -> str | None:
    """A schedule's marker, given its spec or its label (None for one SHOWN leaves out)."""
    entry = _entry(label_or_schedule)
    return entry[2] if entry else None


def fixed_phase(schedule: str = FIXED_FIRST) -> tuple[int, float]:
    """(K, fraction of the steps) of a fixed-first schedule's fixed phase."""
    s = parse_schedule(schedule)
    if not isinstance(s, FixedFirst):
        raise ValueError(f"{schedule} is not a fixed-first schedule")
    return s.k, s.frac


def fixed_depth(schedule: str = FIXED) -> int:
    """K of a fixed schedule (`fixed:4` -> 4)."""
    return int(schedule.split(":")[1])


def tolerance(schedule: str) -> float:
    """The tolerance a schedule's gap to uniform is judged at (its spec or its label); a
    fixed-first schedule at another switch fraction (the frontier) is judged at its fixed K's:
    0.5% for K=2, 0.8% for K=4."""
    spec = schedule if schedule in TOLERANCE else _BY_LABEL.get(schedule, schedule)
    if spec not in TOLERANCE and spec.startswith("fixed-first:"):
        spec = RECIPE_200M if fixed_phase(spec)[0] == 2 else FIXED_FIRST
    if spec not in TOLERANCE:
        raise KeyError(f"{schedule}: the paper states no tolerance for it")
    return TOLERANCE[spec]
