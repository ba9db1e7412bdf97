"""Studies built on the library: each plans runs, trains them on the pool, reads and judges them."""
