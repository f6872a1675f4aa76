#!/usr/bin/env bash
# The bundled kernels on one H200 (issues 4 and 5): gate, error table and reproducibility at S=16384,
# H=32, d=128 on Gaussian std 0.1 and 1; the sustained benchmark of the four kernels the goals name;
# burst timing next to it, after a long warm-up (the protocol's 500) and from a cool GPU (25 launches).
#
#   OUT=out/h200 HARNESS_GIT_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200/bundled_kernels.sh
#
# Each step has its own time limit so that one slow step cannot cost the results of the others; the
# results directory is packed into $OUT/results-kernels.tgz at the end.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
trap 'tar czf "$OUT/results-kernels.tgz" results' EXIT

ALL="--kernel sdpa-cudnn --kernel sdpa-flash --kernel sdpa-efficient --kernel sdpa-math --kernel triton-bf16 --kernel triton-fp8-exact --kernel triton-fp8-lean"
FOUR="-k sdpa-cudnn -k triton-bf16 -k triton-fp8-exact -k triton-fp8-lean"

step "sustained: four kernels x two inputs, default protocol, 2 repeats"
timeout 250 $BENCH sustained $FOUR -i gaussian:0.1 -i gaussian:1 --repeats 2 --idle-s 1 --name issue4 \
    2>&1 | tee "$OUT/sustained.log"
RUN=$(ls -d results/*-issue4-* 2>/dev/null | tail -1)

step "burst into $RUN: 500 warm-up, 100 timed"
[ -n "$RUN" ] && timeout 35 $BENCH burst $FOUR -i gaussian:0.1 --repeats 1 --idle-s 2 --into "$RUN" 2>&1 | tee "$OUT/burst.log"

step "cold burst: 25 warm-up, 25 timed, after 15 s idle"
timeout 45 $BENCH burst -k sdpa-cudnn -i gaussian:0.1 --warmup 25 --timed 25 --repeats 2 --idle-s 15 --name cold-burst \
    2>&1 | tee "$OUT/cold-burst.log"
if [ "${CHECK:-1}" = 1 ]; then  # CHECK=0 skips the correctness side
step "gate and error table on std 1 (every bundled GPU kernel)"
timeout 100 python3 benchmarks/h200/kernel_check.py $ALL --input gaussian:1 --error 2>&1 | tee "$OUT/check-std1.log"

step "gate, error table and reproducibility (200 launches, with and without a GEMM between) on std 0.1"
timeout 150 python3 benchmarks/h200/kernel_check.py $ALL --input gaussian:0.1 --error --repro 200 2>&1 | tee "$OUT/check-std01.log"
fi
step done
