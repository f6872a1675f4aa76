#!/usr/bin/env bash
# Issue 19 on one H200: the FP8 variants (kernels_under_test/triton_fp8_variants.py) gated and ranked
# against triton-fp8-lean/-exact, triton-bf16 and cuDNN, then the best variant sustained and traced.
#
#   bash benchmarks/h200/fp8_variants.sh          # from the repository root; writes under $OUT (default out/h200)
#
# Rough time (BUDGET_S, default 450 s, is enforced: each step gets at most what is left, less a reserve
# for the last steps; one failing or slow step never stops the others):
#   1. d=128 gate + ranking (S=16384, H=32, causal, gaussian:0.1; 10 kernels, compile ~5 s each) ~150 s
#   2. bench sustained: best variant, triton-fp8-lean, triton-bf16, sdpa-cudnn (1 repeat, 2 s)   ~110 s
#   3. d=64 ranking (B=8, H=9, S=8192, causal; the SmolLM2 captures' shape)                       ~80 s
#   4. bench trace (ncu pipe counters) of the best variant and triton-fp8-lean from run 2         ~100 s
# Variants (kernels_under_test/triton_fp8_variants.py): triton-fp8-{lean,exact}-pipe (QK(j) with PV(j-1)),
# triton-fp8-{lean,exact}-accmma (PV accumulating in the wgmma), triton-fp8-lean-pipe-m128, triton-fp8-lean-m64.
# The best variant is the fastest gated one of step 1 (fp8_rank.py --best-variant).
# Results: $OUT/steps.log, one log per step, rank-d128.json / rank-d64.json, results-fp8.tgz (the
# results/ runs of steps 2 and 4, with traces/). Nothing here changes clocks or power settings.
set -u -o pipefail
OUT=${OUT:-out/h200}
BUDGET_S=${BUDGET_S:-450}
mkdir -p "$OUT" results
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo)}
BENCH="python3 -m harness"
T0=$(date +%s)
step() { echo "== $(date -u +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a "$OUT/steps.log"; }
# left RESERVE CAP: seconds this step may take: what the budget has left after RESERVE, at most CAP
left() { local l=$(( BUDGET_S - ($(date +%s) - T0) - $1 )); [ "$l" -gt "$2" ] && l=$2; [ "$l" -lt 1 ] && l=1; echo "$l"; }
trap 'tar czf "$OUT/results-fp8.tgz" results 2>/dev/null; step "end"' EXIT

step "environment"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log --oneline -3 2>/dev/null; echo "HARNESS_GIT_COMMIT=$HARNESS_GIT_COMMIT"; } 2>&1 | tee "$OUT/env.log"

BASE="-k triton-fp8-lean -k triton-fp8-exact -k triton-bf16 -k sdpa-cudnn --variants"
step "1. d=128 gate and ranking (do_bench after warm-up)"
timeout "$(left 270 200)" python3 benchmarks/fp8_rank.py $BASE --input gaussian:0.1 --seq-len 16384 --heads 32 \
    --head-dim 128 --causal --rounds 2 --json "$OUT/rank-d128.json" --best-variant 2>&1 | tee "$OUT/rank-d128.log"
BEST=$(sed -n 's/^best variant: \(triton-[A-Za-z0-9-]*\)$/\1/p' "$OUT/rank-d128.log" | tail -1)
[ -n "$BEST" ] || BEST=triton-fp8-lean-accmma  # ranking cut short: the variant with the fewest instructions a block
step "best variant: $BEST"

step "2. bench sustained: $BEST, triton-fp8-lean, triton-bf16, sdpa-cudnn"
timeout "$(left 170 150)" $BENCH sustained -k "$BEST" -k triton-fp8-lean -k triton-bf16 -k sdpa-cudnn -i gaussian:0.1 \
    --repeats 1 --window-s 2 --idle-s 1 --warmin-cap-s 12 --name fp8-variants 2>&1 | tee "$OUT/sustained.log"
RUN=$(ls -d results/*-fp8-variants-* 2>/dev/null | tail -1)

step "3. d=64 ranking (B=8, H=9, S=8192)"
timeout "$(left 100 90)" python3 benchmarks/fp8_rank.py -k triton-fp8-lean -k triton-bf16 -k sdpa-cudnn --variants \
    --input gaussian:0.1 --batch 8 --heads 9 --seq-len 8192 --head-dim 64 --causal --rounds 2 --warm-s 1 \
    --rep-ms 200 --json "$OUT/rank-d64.json" --best-variant 2>&1 | tee "$OUT/rank-d64.log"

step "4. bench trace (ncu pipe counters) of $BEST and triton-fp8-lean in $RUN"
if [ -n "$RUN" ]; then
    timeout "$(left 5 150)" $BENCH trace "$RUN" -k "$BEST" -k triton-fp8-lean --warm-s 2 --timeout-s 60 2>&1 \
        | tee "$OUT/trace.log"
else
    echo "no sustained run to trace" | tee "$OUT/trace.log"
fi
