#!/usr/bin/env bash
# Issue 19, d=64 on real activations: SmolLM2-135M layer 15 captured on the CPU here (3 pydoc windows of
# S=8192 stacked along the batch: B3 H9/3 d64 causal, 47 MB, small enough to carry), timed sustained with
# its Gaussian 0.1 control: gluon-fp8-lean-summma beside triton-fp8-lean-accmma, triton-bf16 and cuDNN,
# then the pipe counters (ncu) of summma and cuDNN on both inputs.
#
#   .venv/bin/bench capture --model smollm2-135m --layers 15 --seq-len 8192 --windows 3 --device cpu
#   HARNESS_GIT_COMMIT=$(git rev-parse HEAD) OUT=out/d64 bash benchmarks/h200/fp8_on_captured_d64.sh
#   (device call: carry captures/smollm2-135m/pydoc-S8192-B3)
#
# Rough time on one H200: sustained, 4 kernels x 2 inputs x 2 repeats, ~4 min; trace ~1.5 min.
OUT=${OUT:-out/d64}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
trap 'tar czf "$OUT/results-d64.tgz" results 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/env.log" 2>&1

step "bench sustained --model smollm2-135m (captured L15 + control)"
timeout 400 $BENCH sustained --model smollm2-135m --layer 15 --seq-len 8192 --windows 3 \
    -k gluon-fp8-lean-summma -k triton-fp8-lean-accmma -k triton-bf16 -k sdpa-cudnn \
    --repeats 2 --window-s 2 --idle-s 1 --warmin-cap-s 12 --name smollm2-d64 2>&1 | tee "$OUT/sustained.log"
RUN=$(ls -d results/*-smollm2-d64-* 2>/dev/null | tail -1)
step "bench trace $RUN"
[ -n "$RUN" ] && timeout 180 $BENCH trace "$RUN" -k gluon-fp8-lean-summma -k sdpa-cudnn --warm-s 2 --timeout-s 60 \
    2>&1 | tee "$OUT/trace.log"
step done
