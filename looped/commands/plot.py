"""`looped plot`: routed here; its parser still lives in `looped.report.runs` until it moves."""

from looped.report.runs import main

__all__ = ["main"]
