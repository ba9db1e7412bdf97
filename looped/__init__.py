"""looped: looped (weight-tied) transformers trained with fixed-first depth schedules.

The paper's concepts sit at the top level, one module each:

- ``looped.model``       LoopedConfig, LoopedTransformer (P, block A applied K times, H)
- ``looped.schedules``   depth schedules: depth(step) -> K, parsed from short specs
- ``looped.flops``       modeled training FLOPs per token, schedule totals, savings, MFU
- ``looped.paper``       the paper's schedules, labels, colours and reported numbers

and everything built on them in one subpackage per layer, lowest first: ``runtime`` (disk and
device), ``data``, ``eval``, ``training``, ``report``, ``experiments``, ``bench``; ``looped.cli``
routes ``looped demo | train | eval | flops | data ...``. docs/ARCHITECTURE.md maps every module.
"""

__version__ = "0.1.0"
