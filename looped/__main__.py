"""``python -m looped`` is the same as the ``looped`` console script."""

from looped.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
