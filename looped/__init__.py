"""looped: looped (weight-tied) transformers trained with fixed-first depth schedules.

The paper's concepts sit at the top level, one module each:

- ``looped.model``       LoopedConfig, LoopedTransformer (P, block A applied K times, H)
- ``looped.schedules``   depth schedules: depth(step) -> K (``schedule_spec`` parses their specs)
- ``looped.flops``       modeled training FLOPs per token, schedule totals, savings, MFU
- ``looped.paper``       the paper's schedules, labels, colours and reported numbers

and everything built on them in one subpackage per layer, lowest first: ``runtime`` (disk and
device), ``data``, ``eval``, ``training``, then ``plotting`` and the library's ``commands``. The
reproduction's harness (studies, statistics, reports, their commands) is
``looped.studies``, which the library never imports; ``looped.cli`` routes every ``looped``
subcommand to either. docs/ARCHITECTURE.md draws the layers.
"""

__version__ = "0.1.0"
