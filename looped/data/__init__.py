"""Data: synthetic biographies (``bios``), text corpora (``text``), batching."""
