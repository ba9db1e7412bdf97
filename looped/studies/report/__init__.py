"""The generated docs: README, docs/RESULTS.md, docs/USAGE.md and notebooks/README.md from results/*.json."""
