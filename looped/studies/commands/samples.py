"""`looped samples`: the same prompts continued at serving depths 1, 2, 4 and 16.

looped samples                      # runs/length/samples.json, from the length study's runs
looped samples --reference          # results/samples.json (rendered in docs/RESULTS.md)
looped samples --quick              # runs/length-quick/samples.json, after `looped length --quick`
"""

from __future__ import annotations

import json
from pathlib import Path

from looped.errors import UserError
from looped.studies.commands.common import study_dirs, study_parser
from looped.studies.length import QUICK, LengthSettings
from looped.studies.report.samples import section
from looped.studies.results import write_result
from looped.studies.samples import sample_all


def main(argv: list[str] | None = None) -> int:
    p = study_parser(
        "looped samples",
        __doc__,
        out="the length study's output directory, whose runs are sampled (default runs/length, "
        "or runs/length-quick with --quick)",
        reference="results/samples.json",
        quick="the models of `looped length --quick` (read from OUT/length.json)",
        workers=False,
    )
    p.add_argument("--results", default="results", help="where the results files it reads are")
    a = p.parse_args(argv)
    out = study_dirs(a, "length")[0]  # the length study's runs
    study = out / "length.json" if a.quick else Path(a.results) / "length.json"
    if not study.is_file():
        raise UserError(f"{study} not found; run `looped length{' --quick' * a.quick}` first")
    result = sample_all(json.loads(study.read_text()), out, QUICK if a.quick else LengthSettings())
    print(section(result))
    write_result(Path(a.results if a.reference else out) / "samples.json", result)
    return 0
