#!/usr/bin/env bash
# Launch one of the paper's full-scale runs on GPUs.
#
#   bash scripts/launch.sh PRESET SCHEDULE OUT [key=value ...]
#
#   bash scripts/launch.sh 200m "fixed-first:k=2,frac=0.67,then=uniform:1-16" runs/200m-ff2
#   bash scripts/launch.sh 1b   "uniform:1-16" runs/1b-uniform budget_frac=0.45 max_steps=0
#
# GPUs: all visible ones on this node (NPROC=... to choose). Several nodes: run the same command
# on every node with NNODES, NODE_RANK and MASTER=host:port set, e.g.
#   NNODES=4 NODE_RANK=0 MASTER=node0:29500 bash scripts/launch.sh 1b "fixed:4" runs/1b-k4
# The global batch stays the preset's (global_batch); grad_accum is derived per world size.
# Resume after an interruption by running the same command with RESUME=1.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ]; then sed -n '2,15p' "$0"; exit 2; fi
PRESET=$1; SCHEDULE=$2; OUT=$3; shift 3
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
NPROC=${NPROC:-$("$PY" -c "import torch; print(max(1, torch.cuda.device_count()))")}
NNODES=${NNODES:-1}
EXTRA=()
[ "${RESUME:-0}" = 1 ] && EXTRA+=(--resume)
"$PY" -m looped flops --preset "$PRESET"
if [ "$NNODES" -gt 1 ]; then
  RDZV=(--nnodes="$NNODES" --node_rank="${NODE_RANK:?set NODE_RANK}" --rdzv_backend=c10d --rdzv_endpoint="${MASTER:?set MASTER=host:port}" --rdzv_id="${RDZV_ID:-looped}")
else
  RDZV=(--standalone)
fi
exec "$PY" -m torch.distributed.run "${RDZV[@]}" --nproc_per_node="$NPROC" -m looped train \
  --config "$PRESET" --out "$OUT" "${EXTRA[@]}" schedule="$SCHEDULE" "$@"
