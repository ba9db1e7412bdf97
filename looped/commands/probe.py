"""`looped probe`: routed here; its parser still lives in `looped.experiments.probes` until it moves."""

from looped.experiments.probes import main

__all__ = ["main"]
