#!/usr/bin/env bash
# Profiling and commits on one H200 (issues 4, 6 and 7): the gate and error table on SmolLM2 captures,
# ncu pipe counters and Proton timelines of five kernels after a sustained run, the empirical peaks
# stored into that run (its report draws the roofline), and `bench commits` across a triton-bf16 tuning.
#
#   OUT=out/h200 HARNESS_GIT_COMMIT=$(git rev-parse HEAD) BUNDLE=out/repo.bundle BASE=7e7d700 \
#       bash benchmarks/h200/profile.sh
#
# Needs captures/smollm2-135m/pydoc-S8192 (`bench capture --model smollm2-135m --layers 3,15 --seq-len 8192`)
# and a git bundle of this repository for `bench commits` (the device's copy of .git may be stale).
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
trap 'tar czf "$OUT/results-profile.tgz" results' EXIT
FIVE="-k sdpa-cudnn -k sdpa-flash -k triton-bf16 -k triton-fp8-exact -k triton-fp8-lean"

step "SmolLM2-135M captures: gate (quick timing) and error table"
timeout 100 $BENCH sustained --model smollm2-135m --layer 3 --layer 15 $FIVE --quick --name smollm2-gate 2>&1 \
    | tee "$OUT/smollm2.log"
timeout 40 $BENCH error --model smollm2-135m --layer 3 --layer 15 --control gaussian:0.1 $FIVE \
    --json "$OUT/error-smollm2.json" 2>&1 | tee "$OUT/error-smollm2.log"

step "sustained run of five kernels for the trace"
timeout 110 $BENCH sustained $FIVE -i gaussian:0.1 --repeats 1 --idle-s 1 --name trace 2>&1 | tee "$OUT/trace-run.log"
RUN=$(ls -d results/*-trace-* 2>/dev/null | tail -1)

step "ncu pipe counters and Proton timelines on $RUN"
[ -n "$RUN" ] && timeout 170 $BENCH trace "$RUN" --warm-s 4 --timeline --timeout-s 60 2>&1 | tee "$OUT/trace.log"

step "empirical peaks into $RUN"
[ -n "$RUN" ] && timeout 130 $BENCH peaks --into "$RUN" --repeats 1 --window-s 3 --idle-s 1 2>&1 | tee "$OUT/peaks.log"

step "bench commits: triton-bf16 at $BASE vs HEAD"
if [ -n "${BUNDLE:-}" ]; then
    rm -rf /tmp/r && git clone -q "$BUNDLE" /tmp/r && git -C /tmp/r checkout -q "${HEAD_REV:-HEAD}"
    timeout 120 $BENCH commits --repo /tmp/r -k triton-bf16 -i gaussian:0.1 --repeats 2 --window-s 3 \
        --summary "$OUT/commits.md" "$BASE" "${HEAD_REV:-HEAD}" 2>&1 | tee "$OUT/commits.log"
fi
step done
