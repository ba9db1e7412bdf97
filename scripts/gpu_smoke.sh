#!/usr/bin/env bash
# GPU smoke test: a few hundred steps of the 200m preset with bf16 and the compiled loop block on
# whatever GPU is present; prints tokens/s, MFU and peak memory. Offline: it trains on CPython's
# own documentation (`looped data text --dataset pydoc`), so it needs no download.
#
#   bash scripts/gpu_smoke.sh            # 300 steps
#   STEPS=100 bash scripts/gpu_smoke.sh
#   DATA=runs/map/corpus-torch_2_13_0-bpe512-split bash scripts/gpu_smoke.sh   # tokenized already
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
STEPS=${STEPS:-300}
DIR=${SMOKE_DIR:-/tmp/looped-gpu-smoke}   # emptied first
DATA=${DATA:-}                             # a `looped data text` directory; else pydoc, tokenized

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_smoke: no CUDA GPU visible to torch; nothing to do (run it on a GPU machine)."
  exit 0
fi
"$PY" -c "import torch; p = torch.cuda.get_device_properties(0); print(f'gpu_smoke: {p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}')"
rm -rf "$DIR"
if [ -z "$DATA" ]; then
  DATA="$DIR/data"
  "$PY" -m looped data text --dataset pydoc --tokenizer bpe:8192 --val-frac 0.15 --out "$DATA" --quiet
fi
# Micro-batch 8 x 1024 tokens; schedule uniform:1-16 so every depth (and its compile) is exercised.
"$PY" -m looped train --config 200m --out "$DIR/run" \
  data.path="$DATA" max_steps="$STEPS" global_batch=0 batch_size=8 grad_accum=1 \
  schedule=uniform:1-16 eval_interval=0 eval_batches=2 ckpt_interval=0 log_interval=10 \
  optim.warmup_steps=50
"$PY" - "$DIR/run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
late = rows[len(rows) // 3:]  # skip compilation and warm-up
tps = sum(r["tokens_per_s"] for r in late) / len(late)
mfu = [r["mfu"] for r in late if r["mfu"] is not None]
mem = max(r["mem_gb"] or 0 for r in rows)
mfu_text = f" MFU {sum(mfu) / len(mfu):.1%}" if mfu else " MFU n/a (unknown GPU peak)"
print(f"gpu_smoke: {rows[-1]['step']} steps, {tps:,.0f} tokens/s (mean over the last two thirds),"
      + mfu_text, end="")
print(f", peak memory {mem:.1f} GiB, final loss {rows[-1]['loss']:.3f}")
PY
