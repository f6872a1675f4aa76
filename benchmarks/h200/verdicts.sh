#!/usr/bin/env bash
# Issues 30 and 35 on the H200: `bench commits` with the calibrated verdict procedure (paired t over interleaved
# repeats, Stein's two-stage --until-ci) at a 0.3 % gate. A plain cuDNN SDPA function at three revisions of a
# small git repository this script makes:
#   base     cuDNN SDPA, causal, S=16384, H=32, d=128
#   quarter  + one elementwise pass over a quarter of the output (out[:, :, :S/4].mul_(1.0): ~0.4 % of a call)
#   comment  base with a comment added: the same code, so any difference is noise
# Two runs of `bench commits --fail-on-slowdown 0.3%`: base vs quarter (expected: slower, exit 1) and base vs
# comment (expected: same, exit 0). Each takes a pilot of 5 pairs, then Stein's second stage for a +-0.3 %
# interval, up to --max-repeats (default 40) pairs and --max-time-s (default 150) seconds of timing; with 1 s
# windows and no idle between repeats (the card stays warm: the other revision just ran the same work), so a pair
# costs ~2 x (warm-in ~4 s + window 1 s). The cuDNN base takes one of two states 0.6 % apart from repeat to
# repeat (fixture 20261203-131342-commits-0-*; benchmarks/h200/cudnn_states.py looks for why): the per-repeat
# noise is the state, not the window's length, so short windows lose nothing and buy pairs.
#
#   OUT=out/h200 bash benchmarks/h200/verdicts.sh                       # about 6 minutes on one H200
#   OUT=/tmp/v DEVICE=cpu QUICK=1 bash benchmarks/h200/verdicts.sh       # a CPU dry run, small shapes
#   OUT=out/h200 TOGETHER=1 MAXTIME=300 BUDGET=420 bash benchmarks/h200/verdicts.sh
#       # all three revisions in one interleaved run (both comparisons share the base's repeats), warm card
#
# Logs: $OUT/verdicts-{quarter,comment}.log (table, sentences, gate line, exit status), the Markdown and JSON
# of each, and the results runs packed into $OUT/results-verdicts.tgz. Never changes clocks, power limits or
# GPU modes; nvidia-smi is only queried.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
# shellcheck source=benchmarks/h200/sdpa_repo.sh
. "$(dirname "$0")/sdpa_repo.sh"
scratch verdicts
if [ "${QUICK:-0}" = 1 ]; then
    SHAPE="--seq-len 256 --heads 4 --head-dim 32 --dtype fp32 --quick --repeats 3 --until-ci 30% --max-repeats 4 --max-time-s 60"
    BUDGET=240
else
    SHAPE="--seq-len 16384 --heads 32 --head-dim 128 --dtype bf16 --repeats 5 --max-repeats ${MAXREP:-40}"
    SHAPE="$SHAPE --max-time-s ${MAXTIME:-150} --window-s ${WINDOW:-1} --idle-s 0"
    BUDGET=${BUDGET:-240}  # a hard stop well past --max-time-s: startup, the pilot and the last pair
fi
SHAPE="$SHAPE ${EXTRA:-}"

step "a three-revision repository in $WORK/repo"
(
    set -e
    sdpa_repo "$WORK/repo"
    git checkout -q -b quarter
    sed -i 's/^    return out$/    out[:, :, : out.shape[2] \/\/ 4].mul_(1.0)  # one more pass over a quarter of the output\n    return out/' attn.py
    grep -q "mul_(1.0)" attn.py
    git commit -q -am "one extra elementwise pass over a quarter of the output"
    git checkout -q base -b comment
    sed -i 's/^    return out$/    # a comment, and nothing else\n    return out/' attn.py
    git commit -q -am "a comment only"
    git log --oneline --all
) 2>&1 | tee "$OUT/verdicts-repo.log"

step "nvidia-smi before"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,pci.bus_id,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/verdicts-quarter.log"

if [ "${TOGETHER:-0}" = 1 ]; then RUNS=("quarter comment"); else RUNS=(quarter comment); fi
for REVS in "${RUNS[@]}"; do
    NAME=${REVS// /-}
    LOG="$OUT/verdicts-$NAME.log"
    step "bench commits -k attn.py:attn base $REVS --fail-on-slowdown 0.3% ($DEVICE, gaussian:0.1, $SHAPE)"
    start=$(date +%s)
    # shellcheck disable=SC2086  # $SHAPE and $REVS are word lists
    timeout "$BUDGET" $BENCH commits --repo "$WORK/repo" --kernel attn.py:attn --device "$DEVICE" -i gaussian:0.1 \
        $SHAPE --results "$RESULTS" --fail-on-slowdown 0.3% --md "$OUT/verdicts-$NAME.md" \
        --json "$OUT/verdicts-$NAME.json" base $REVS 2>&1 | tee -a "$LOG"
    status=${PIPESTATUS[0]}
    echo "exit status of bench commits base $REVS: $status after $(( $(date +%s) - start )) s (quarter: 1 expected; comment: 0)" \
        | tee -a "$LOG"
done

step "nvidia-smi after"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/steps.log"
step done
