#!/usr/bin/env bash
# A GPU loan in one command: the smoke test, the benchmark, then as much of the map as the loan
# leaves, every result written under $RESULTS and nothing into the repo's results/.
#
#   bash scripts/gpu_loan.sh --prepare   # here, once, before a loan: into .gpu/ (git-ignored) the
#                                        # wheel the GPU image lacks (omegaconf), the tokenized
#                                        # torch corpus of runs/map (the GPU has another torch)
#                                        # and the smoke test's pydoc data (no `datasets` there)
#   RESULTS=$OUT bash scripts/gpu_loan.sh   # there, with .gpu carried along
#
# Then here: `looped map --collect --resume-from results/map.json,RESULTS/map_gpu.json` and
# commit RESULTS/map_gpu.json, bench.json and the two logs under results/gpu/.
# Each stage has a time limit (seconds): SMOKE_S (120), BENCH_S (150), MAP_S (270); the map
# writes map.json after each block, so a limit costs at most the block it stops, and a second
# call on the still-warm machine, STAGES=map, goes on from its checkpoints. BLOCKS picks the
# map's blocks (default d128,d256: d=128 takes sessions on the CPU, d=256 is out of its reach;
# d64 is the CPU's already).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
CORPUS_DIR=${CORPUS_DIR:-runs/map/corpus-torch_2_13_0-bpe512-split}

if [ "${1:-}" = "--prepare" ]; then
  set -e
  mkdir -p .git/info .gpu/whl .gpu/map
  grep -qxF '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
  "$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform any -d .gpu/whl "omegaconf==2.4.0" --quiet
  [ -f "$CORPUS_DIR/meta.json" ] || { echo "gpu_loan: no $CORPUS_DIR (run looped map once)"; exit 2; }
  rm -rf ".gpu/map/$(basename "$CORPUS_DIR")"
  cp -r "$CORPUS_DIR" .gpu/map/
  # the data gpu_smoke.sh would tokenize itself, so the smoke measures the same model there
  "$PY" -m looped data text --dataset pydoc --tokenizer bpe:8192 --val-frac 0.15 \
    --out .gpu/pydoc --overwrite --quiet
  du -sh .gpu
  exit 0
fi

RESULTS=${RESULTS:-/tmp/looped-gpu-loan}
mkdir -p "$RESULTS"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_loan: no CUDA GPU visible to torch; nothing to do (run it on a GPU machine)."
  exit 0
fi
if ! "$PY" -c "import omegaconf" 2>/dev/null; then  # the GPU image has every other dependency
  "$PY" -m pip install -q --no-index --no-deps --target /tmp/gpu-site .gpu/whl/*.whl || exit 2
  export PYTHONPATH=/tmp/gpu-site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHON="$PY" PYTHONUNBUFFERED=1
STAGES=${STAGES:-smoke bench map}

if [[ " $STAGES " == *" smoke "* ]]; then
  echo "== smoke: 200m, bf16, compiled block"
  SMOKE_DIR=/tmp/looped-gpu-smoke DATA=.gpu/pydoc STEPS=${STEPS:-150} \
    timeout "${SMOKE_S:-120}" bash scripts/gpu_smoke.sh 2>&1 | tee "$RESULTS/smoke.log"
fi
if [[ " $STAGES " == *" bench "* ]]; then
  echo "== bench: the looped model against its stacked peer, on the GPU"
  timeout "${BENCH_S:-150}" "$PY" -m looped bench --device cuda --out "$RESULTS" 2>&1 \
    | tee "$RESULTS/bench.log"
fi
if [[ " $STAGES " == *" map "* ]]; then
  echo "== map: blocks ${BLOCKS:-d128,d256}, at most ${MAP_S:-270} s"
  MAP_DIR=.gpu/map BLOCKS=${BLOCKS:-d128,d256} MAX_SEEDS=${MAX_SEEDS:-4} \
    RESUME_FROM=${RESUME_FROM:-results/map.json} \
    timeout "${MAP_S:-270}" bash scripts/gpu_length.sh 2>&1 | tail -40 | tee -a "$RESULTS/map.log"
  [ -f .gpu/map/map.json ] && cp .gpu/map/map.json "$RESULTS/map_gpu.json"
fi
ls -la "$RESULTS"
