"""The reproduction's harness, built on the library: the studies (each plans runs, trains them
on the pool, reads and judges them), their statistics, the reports that write every figure and
generated table, and their commands (the benchmark is `scripts/bench.py`)."""
