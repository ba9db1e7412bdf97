"""`looped samples`: the same prompts continued at serving depths 1, 2, 4 and 16.

looped samples                      # runs/map/samples.json: the map's d64 block, longest length
looped samples --block d128         # another block's models
looped samples --reference          # results/samples.json (docs/RESULTS.md shows it again
                                    # once the map's models are sampled)
looped samples --quick              # runs/map-quick/samples.json, after `looped map --quick`
"""

from __future__ import annotations

import json
from pathlib import Path

from looped.errors import UserError
from looped.studies.commands.common import study_dirs, study_parser
from looped.studies.map import QUICK, MapSettings, block_settings
from looped.studies.report.samples import section
from looped.studies.results import write_result
from looped.studies.samples import sample_all
from looped.studies.textsetup import ensure_corpus


def main(argv: list[str] | None = None) -> int:
    p = study_parser(
        "looped samples",
        __doc__,
        out="the map's output directory, whose runs are sampled (default runs/map, or "
        "runs/map-quick with --quick)",
        reference="results/samples.json",
        quick="the models of `looped map --quick` (read from OUT/map.json)",
        workers=False,
    )
    p.add_argument("--block", help="the map block whose models continue (default d64; d16 quick)")
    p.add_argument("--results", default="results", help="where the map.json it reads is")
    a = p.parse_args(argv)
    settings = QUICK if a.quick else MapSettings()
    known = {b.name: b for b in settings.blocks}
    name = a.block or ("d16" if a.quick else "d64")
    if name not in known:
        raise UserError(f"--block {name}: name a block among {','.join(known)}")
    out = study_dirs(a, "map")[0]
    path = out / "map.json" if a.quick else Path(a.results) / "map.json"
    if not path.is_file():
        raise UserError(f"{path} not found; run `looped map{' --quick' * a.quick}` first")
    found = json.loads(path.read_text()).get("blocks", {}).get(name)
    if not found:
        raise UserError(f"{path} has no block {name}; train it with `looped map --blocks {name}`")
    block = known[name]
    bs = block_settings(block, settings)
    corpus = ensure_corpus(bs.setup, out, bs.corpus)
    result = sample_all(found, out / block.home, bs, corpus)
    print(section(result))
    write_result(Path(a.results if a.reference else out) / "samples.json", result)
    return 0
