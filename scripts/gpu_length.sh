#!/usr/bin/env bash
# The map on a GPU: the same recipe as `looped map` (the LR chosen on seed 100 at every length,
# seeds in rounds up to 8, paired gaps, one pass over the data) at widths 64 to 512 and lengths
# from 20 to 2,000 training tokens per non-embedding parameter (100x). Blocks run in order, the
# narrow widths first, so a short loan ends with whole widths. Resumable: run it again and
# finished runs are reused; --resume-from a committed map.json skips what that file scored.
#
#   bash scripts/gpu_length.sh                                   # every GPU block
#   BLOCKS=d64,d128 bash scripts/gpu_length.sh                   # some widths now
#   CORPUS=/data/code-text bash scripts/gpu_length.sh            # a corpus past 20M tokens
#                                 # (`looped data text` output): the torch sources repeat there
#   RESUME_FROM=results/map.json bash scripts/gpu_length.sh      # train only what it lacks
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
WORKERS=${WORKERS:-8}     # one small model per worker process; a GPU holds many at once
DIR=${MAP_DIR:-runs/map-gpu}
ARGS=(--gpu --out "$DIR" --workers "$WORKERS")
[ -n "${BLOCKS:-}" ] && ARGS+=(--blocks "$BLOCKS")
[ -n "${CORPUS:-}" ] && ARGS+=(--corpus "$CORPUS")
[ -n "${MAX_SEEDS:-}" ] && ARGS+=(--max-seeds "$MAX_SEEDS")
[ -n "${RESUME_FROM:-}" ] && ARGS+=(--resume-from "$RESUME_FROM")

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_length: no CUDA GPU visible to torch; nothing to do (run it on a GPU machine)."
  exit 0
fi
"$PY" -m looped map "${ARGS[@]}"
echo "gpu_length: $DIR/map.json and map_gap.png (commit as results/map_gpu.json)"
