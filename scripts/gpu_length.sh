#!/usr/bin/env bash
# The length study's longest cells on a GPU: the same study as `looped length` (committed CPU
# results: 30-480 steps), at 16x the CPU's longest run (7,680 steps, ~31M tokens, ~360 tokens per
# parameter at d=64), where the trend of the gap can be read much further along. Resumable: run
# it again after an interruption and finished runs are reused.
#
#   bash scripts/gpu_length.sh                      # 5 lengths, 480 .. 7680 steps, d=64
#   LENGTHS=960,1920,3840,7680,15360 D_MODEL=128 bash scripts/gpu_length.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LENGTHS=${LENGTHS:-480,960,1920,3840,7680}
D_MODEL=${D_MODEL:-64}
WORKERS=${WORKERS:-6}   # one small model per worker process; a GPU holds many at once
OUT=${OUT:-runs/length-gpu}

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_length: no CUDA GPU visible to torch; nothing to do (run it on a GPU machine)."
  exit 0
fi
"$PY" -m looped length --out "$OUT" --lengths "$LENGTHS" --d-model "$D_MODEL" --workers "$WORKERS"
echo "gpu_length: $OUT/length.json and $OUT/length_gap.png (commit them as results/length_gpu.json)"
