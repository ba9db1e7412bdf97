"""The speed benchmark: looped against a stacked-layer peer and the matmul ceiling; results/bench.md."""
