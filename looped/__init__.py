"""looped: looped (weight-tied) transformers trained with fixed-first depth schedules.

The package map (one concept per module):

- ``looped.model``      LoopedConfig, LoopedTransformer (P, block A applied K times, H)
- ``looped.schedules``  depth schedules: depth(step) -> K, parsed from short specs
- ``looped.flops``      modeled training FLOPs per token, schedule totals, savings, MFU
- ``looped.data``       synthetic biographies, text corpora, batching
- ``looped.training.trainer``      the training loop; ``looped.runtime.distributed`` what torchrun changes
- ``looped.runtime.device``     device choice, CPU name, GPU peak FLOP/s
- ``looped.eval.evaluate``   serving-depth sweeps: token NLL and recalled bits (fact NLL, bits)
- ``looped.eval.downstream`` multiple-choice benchmarks (HellaSwag, PIQA, ARC-Easy) per depth
- ``looped.paper``      the paper's schedules, labels, colours and reported numbers
- ``looped.report.plots``      the paper's figures from results files
- ``looped.cli``        ``looped demo | train | eval | flops | data ...``
"""

__version__ = "0.1.0"
