"""The command line: one module per `looped` subcommand, each holding its argparse parser and a
``main(argv) -> int`` that parses, then calls the library. No module below this layer parses
arguments (tests/test_layers.py checks it)."""
