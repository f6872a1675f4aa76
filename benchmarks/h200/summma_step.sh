#!/usr/bin/env bash
# Issue 19, one step measured as a step: gluon-fp8-lean-summma's TMA ring at d=128 from 3 slots to 2,
# `bench commits` of the commit before and the commit after (kernels_under_test from each revision's
# tree, the measuring harness this checkout's), then the 2-slot kernel sustained beside the references
# and traced (ncu pipe counters).
#
#   BEFORE=<rev> AFTER=<rev> BUNDLE=.gb/main.bundle bash benchmarks/h200/summma_step.sh
#
# BUNDLE: `git bundle create .gb/main.bundle main` of this repository (the device gets no .git). Rough
# time on one H200: burst ranking ~60 s; bench commits, 2 revisions x 3 repeats ~110 s; sustained,
# 4 kernels x 2 repeats ~130 s; trace ~70 s. Nothing here changes clocks or power settings.
set -u -o pipefail
OUT=${OUT:-out/h200}
mkdir -p "$OUT" results
OUT=$(cd "$OUT" && pwd)
export COLUMNS=${COLUMNS:-250} PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-${AFTER:?AFTER=<revision> is needed}}
BENCH="python3 -m harness"
SHAPE="--seq-len 16384 --heads 32 --head-dim 128 --dtype bf16 -i gaussian:0.1"
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/summma-step-XXXXXX")
trap 'tar czf "$OUT/results-summma-step.tgz" results -C "$WORK" commits-results 2>/dev/null; rm -rf "$WORK"' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    > "$OUT/env.log" 2>&1

step "burst ranking of the ring depth"
timeout 150 python3 benchmarks/gluon_tune.py --configs 64x4x2s,64x4x3s,64x4x4s --small-configs 1 \
    -k triton-bf16 -k sdpa-cudnn --rounds 2 --warm-s 1 --rep-ms 200 --json "$OUT/tune.json" 2>&1 \
    | tee "$OUT/tune.log"

step "bench commits ${BEFORE:?BEFORE=<revision> is needed} $AFTER"
git clone -q "${BUNDLE:-.gb/main.bundle}" "$WORK/repo" && git -C "$WORK/repo" checkout -q "$AFTER"
timeout 260 $BENCH commits --repo "$WORK/repo" --kernel gluon-fp8-lean-summma $SHAPE --repeats 3 --window-s 2 \
    --results "$WORK/commits-results" --md "$OUT/commits.md" --json "$OUT/commits.json" "$BEFORE" "$AFTER" 2>&1 \
    | tee "$OUT/commits.log"

step "bench sustained: the 2-slot kernel beside the references"
timeout 220 $BENCH sustained -k gluon-fp8-lean-summma -k triton-fp8-lean-accmma -k triton-bf16 -k sdpa-cudnn \
    $SHAPE --repeats 2 --window-s 2 --idle-s 1 --warmin-cap-s 12 --name summma-2s 2>&1 | tee "$OUT/sustained.log"
RUN=$(ls -d results/*-summma-2s-* 2>/dev/null | tail -1)
step "bench trace $RUN"
[ -n "$RUN" ] && timeout 150 $BENCH trace "$RUN" -k gluon-fp8-lean-summma --warm-s 2 --timeout-s 60 2>&1 \
    | tee "$OUT/trace.log"
step done
