"""Evaluation beyond the trainer's own: baselines a model must beat."""
