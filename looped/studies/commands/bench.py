"""`looped bench`: speed against a stacked-layer peer, the matmul ceiling and the modeled savings.

looped bench                        # default sizes: about 7 minutes on 2 idle CPU cores
looped bench --widths 0             # skip the width scan (half the time)
looped bench --quick --no-peer      # toy sizes in seconds, no `transformers` needed
looped bench --threads 1 --clock process   # on a shared machine: CPU time, one thread
"""

from __future__ import annotations

import json
from dataclasses import fields, replace

from looped.commands.common import described, device_flag, number_list
from looped.studies.bench.run import CLOCKS, QUICK, BenchConfig, run
from looped.studies.bench.tables import markdown, write


def main(argv: list[str] | None = None) -> int:
    p = described("looped bench", __doc__)
    p.add_argument("--quick", action="store_true", help="toy sizes (seconds)")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.add_argument("--out", default="results", help="directory for bench.json and bench.md")
    p.add_argument("--no-peer", action="store_true", help="skip the Hugging Face peer")
    p.add_argument("--compile", action="store_true", help="compile the repeated layer")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    p.add_argument("--device", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--clock", choices=tuple(CLOCKS), help="wall (default) or process CPU time")
    p.add_argument("--precisions", help="comma list of fp32, bf16")
    p.add_argument("--depths", help="K to compare, e.g. 1,4,8,16")
    p.add_argument("--d-model", type=int, help="width")
    p.add_argument("--n-head", type=int, help="attention heads")
    p.add_argument("--seq-len", type=int, help="sequence length")
    p.add_argument("--batch-size", type=int, help="sequences per step")
    p.add_argument("--vocab-size", type=int, help="vocabulary")
    p.add_argument("--reps", type=int, help="timed steps per measurement")
    p.add_argument("--real-steps", type=int, help="steps of the real schedule run (0 = skip)")
    p.add_argument("--widths", help="width scan, e.g. 256,512 (0 = skip it)")
    args = p.parse_args(argv)
    known = {f.name for f in fields(BenchConfig)}  # a flag given overrides its field
    overrides = {k: v for k, v in vars(args).items() if k in known and v is not None}
    if args.device:
        device_flag(args.device)  # a missing GPU refused naming the flag, before any timing
    for flag, example in (("depths", "1,4,8,16"), ("widths", "256,512")):  # comma lists
        if flag in overrides:
            overrides[flag] = number_list(f"--{flag}", overrides[flag], int, example)
    if overrides.get("widths") == (0,):
        overrides["widths"] = ()
    if args.precisions:
        overrides["precisions"] = tuple(p.strip() for p in args.precisions.split(","))
    base = QUICK if args.quick else BenchConfig()
    record = run(replace(base, peer=not args.no_peer, **overrides))
    js, md = write(record, args.out)
    print(json.dumps(record, indent=2) if args.json else markdown(record))
    if not args.json:
        print(f"wrote {js} and {md}")
    return 0
