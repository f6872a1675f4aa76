#!/usr/bin/env bash
# Issue 19, "tune for d=128 and d=64, causal and not": burst ranking (benchmarks/gluon_tune.py: gate, then
# do_bench medians of 2 alternating rounds) of gluon-fp8-lean-summma's ring depth beside the references
# at the shapes the sustained runs did not cover: d=64 (S=8192, H=32, causal, the SmolLM2 head size) and
# d=128 not causal (S=16384, H=32). A burst figure, the filter before `bench sustained`.
#
#   OUT=out/h200 bash benchmarks/h200/gluon_shapes.sh      # ~3 minutes on one H200
set -u -o pipefail
OUT=${OUT:-out/h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
REFS="-k triton-fp8-lean-accmma -k triton-bf16 -k sdpa-cudnn"
TUNE="python3 benchmarks/gluon_tune.py --configs 64x4x2s,64x4x3s --rounds 2 --warm-s 1 --rep-ms 200 --skip-small"
echo "== $(date -u +%T) d=64 causal" | tee "$OUT/steps.log"
timeout 200 $TUNE --head-dim 64 --seq-len 8192 $REFS --json "$OUT/tune-d64-causal.json" 2>&1 | tee "$OUT/tune-d64-causal.log"
echo "== $(date -u +%T) d=64 not causal" | tee -a "$OUT/steps.log"
timeout 200 $TUNE --head-dim 64 --seq-len 8192 --no-causal $REFS --json "$OUT/tune-d64-full.json" 2>&1 \
    | tee "$OUT/tune-d64-full.log"
echo "== $(date -u +%T) d=128 not causal" | tee -a "$OUT/steps.log"
timeout 200 $TUNE --head-dim 128 --seq-len 16384 --no-causal $REFS --json "$OUT/tune-d128-full.json" 2>&1 \
    | tee "$OUT/tune-d128-full.log"
echo "== $(date -u +%T) done" | tee -a "$OUT/steps.log"
