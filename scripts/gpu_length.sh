#!/usr/bin/env bash
# The length study on a GPU: the same recipe as `looped length` (one shared LR chosen on
# uniform by LR seeds that are never reported, seeds in rounds until each cell's group-sequential
# interval decides), at 16x the CPU study's longest run: 1,920 .. 30,720 steps (~126M tokens,
# ~1,460 tokens per parameter at d=64), the LR chosen at every length. Then the same at d=128,
# so the report can say how the gap moves with width. Resumable: run it again after an
# interruption and finished runs are reused.
#
#   bash scripts/gpu_length.sh                                  # d=64, then d=128
#   LENGTHS=960,1920,3840,7680 WIDTHS=64 bash scripts/gpu_length.sh
#   MAX_SEEDS=8 WORKERS=12 bash scripts/gpu_length.sh            # a smaller budget, more at once
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
LENGTHS=${LENGTHS:-1920,3840,7680,15360,30720}
WIDTHS=${WIDTHS:-64 128}
WORKERS=${WORKERS:-8}     # one small model per worker process; a GPU holds many at once
MAX_SEEDS=${MAX_SEEDS:-16}
OUT=${OUT:-runs/length-gpu}

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_length: no CUDA GPU visible to torch; nothing to do (run it on a GPU machine)."
  exit 0
fi
for D in $WIDTHS; do
  "$PY" -m looped length --out "$OUT-d$D" --lengths "$LENGTHS" --lr-lengths "$LENGTHS" \
    --d-model "$D" --workers "$WORKERS" --max-seeds "$MAX_SEEDS"
  echo "gpu_length: $OUT-d$D/ holds length*.json and the gap figure (commit as results/length_gpu_d$D.json)"
done
