#!/usr/bin/env bash
# `bench commits` with a plain attention function (issue 15, acceptance 3): cuDNN SDPA wrapped in a def,
# named as file.py:function, across two revisions of a small git repository this script makes; the later
# revision adds one elementwise pass over the output (out.mul_(1.0): a read and a write of 128 MiB, about
# 1.5 % of a 4-5 ms causal call at S=16384, H=32, d=128). Default protocol, 3 interleaved repeats.
#
#   OUT=out/h200 bash benchmarks/h200/commits_plain_function.sh          # about 3 minutes on one H200
#   OUT=/tmp/cc DEVICE=cpu QUICK=1 bash benchmarks/h200/commits_plain_function.sh   # a CPU dry run, small shapes
#
# Logs: $OUT/commits_callable.log (the table, verdict, interval, cycles x clock split), the Markdown summary
# $OUT/commits_callable.md, and the two results runs packed into $OUT/results-commits-callable.tgz.
# Never changes clocks, power limits or GPU modes; nvidia-smi is only queried.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
# shellcheck source=benchmarks/h200/sdpa_repo.sh
. "$(dirname "$0")/sdpa_repo.sh"
scratch commits-callable
if [ "${QUICK:-0}" = 1 ]; then
    SHAPE="--seq-len 256 --heads 4 --head-dim 32 --dtype fp32 --quick --repeats 2"
    BUDGET=200
else
    SHAPE="--seq-len 16384 --heads 32 --head-dim 128 --dtype bf16 --repeats 3"
    BUDGET=290
fi

step "a two-revision repository in $WORK/repo"
(
    set -e
    sdpa_repo "$WORK/repo"
    sed -i 's/^    return out$/    return out.mul_(1.0)  # one extra elementwise pass over the output/' attn.py
    grep -q "mul_(1.0)" attn.py
    git commit -q -am "one extra elementwise pass over the output"
    git log --oneline
) 2>&1 | tee "$OUT/commits_callable-repo.log"

step "nvidia-smi before"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,pci.bus_id,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/commits_callable.log"

step "bench commits -k attn.py:attn base main ($DEVICE, gaussian:0.1, $SHAPE)"
timeout "$BUDGET" $BENCH commits --repo "$WORK/repo" --kernel attn.py:attn --device "$DEVICE" -i gaussian:0.1 $SHAPE \
    --results "$RESULTS" --fail-on-slowdown 3% --summary "$OUT/commits_callable.md" base main \
    2>&1 | tee -a "$OUT/commits_callable.log"
echo "exit status of bench commits: ${PIPESTATUS[0]} (1: slower by more than 3 %, expected 0 for a ~1.5 % cost)" \
    | tee -a "$OUT/commits_callable.log"
echo "worktrees left in the repository (expected: only the main one):" | tee -a "$OUT/commits_callable.log"
git -C "$WORK/repo" worktree list 2>&1 | tee -a "$OUT/commits_callable.log"

step "nvidia-smi after"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/commits_callable.log"
step done
