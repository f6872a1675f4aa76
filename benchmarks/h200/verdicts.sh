#!/usr/bin/env bash
# Issues 30 and 35 on the H200: `bench commits` with the calibrated verdict procedure (paired t over interleaved
# repeats, Stein's two-stage --until-ci) at a 0.3 % gate. A plain cuDNN SDPA function at three revisions of a
# small git repository this script makes:
#   base     cuDNN SDPA, causal, S=16384, H=32, d=128
#   quarter  + one elementwise pass over a quarter of the output (out[:, :, :S/4].mul_(1.0): ~0.4 % of a call)
#   comment  base with a comment added: the same code, so any difference is noise
# Two runs of `bench commits --fail-on-slowdown 0.3%`: base vs quarter (expected: slower, exit 1) and base vs
# comment (expected: same, exit 0). Each is capped at --max-repeats 5 interleaved pairs and 180 s.
#
#   OUT=out/h200 bash benchmarks/h200/verdicts.sh                       # about 6 minutes on one H200
#   OUT=/tmp/v DEVICE=cpu QUICK=1 bash benchmarks/h200/verdicts.sh       # a CPU dry run, small shapes
#
# Logs: $OUT/verdicts-{quarter,comment}.log (table, sentences, gate line, exit status), the Markdown and JSON
# of each, and the results runs packed into $OUT/results-verdicts.tgz. Never changes clocks, power limits or
# GPU modes; nvidia-smi is only queried.
set -u -o pipefail
OUT=${OUT:-out/h200}
DEVICE=${DEVICE:-cuda:0}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export COLUMNS=${COLUMNS:-250} PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BENCH="python3 -m harness"
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/verdicts-XXXXXX")
RESULTS="$WORK/results"
trap 'tar czf "$OUT/results-verdicts.tgz" -C "$WORK" results 2>/dev/null; rm -rf "$WORK"' EXIT
if [ "${QUICK:-0}" = 1 ]; then
    SHAPE="--seq-len 256 --heads 4 --head-dim 32 --dtype fp32 --quick --repeats 3 --until-ci 30% --max-repeats 4"
    BUDGET=240
else
    SHAPE="--seq-len 16384 --heads 32 --head-dim 128 --dtype bf16 --repeats 3 --max-repeats 5"
    BUDGET=180
fi

step "a three-revision repository in $WORK/repo"
(
    set -e
    REPO="$WORK/repo"
    mkdir -p "$REPO"
    cd "$REPO"
    git init -q -b main
    git config user.name bench && git config user.email bench@example.com
    cat > attn.py <<'PY'
"""cuDNN SDPA as a plain function: the harness finds `is_causal` and `scale` in the signature."""
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def attn(q, k, v, is_causal=True, scale=None):
    # Pinned to cuDNN on a GPU, so PyTorch's automatic choice cannot change what is measured.
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION] if q.is_cuda else [SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)
    return out
PY
    git add attn.py && git commit -q -m "cuDNN SDPA"
    git tag base
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

for REV in quarter comment; do
    LOG="$OUT/verdicts-$REV.log"
    step "bench commits -k attn.py:attn base $REV --fail-on-slowdown 0.3% ($DEVICE, gaussian:0.1, $SHAPE)"
    start=$(date +%s)
    timeout "$BUDGET" $BENCH commits --repo "$WORK/repo" --kernel attn.py:attn --device "$DEVICE" -i gaussian:0.1 \
        $SHAPE --results "$RESULTS" --fail-on-slowdown 0.3% --md "$OUT/verdicts-$REV.md" \
        --json "$OUT/verdicts-$REV.json" base "$REV" 2>&1 | tee -a "$LOG"
    status=${PIPESTATUS[0]}
    echo "exit status of bench commits base $REV: $status after $(( $(date +%s) - start )) s (quarter: 1 expected; comment: 0)" \
        | tee -a "$LOG"
done

step "nvidia-smi after"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
    --format=csv 2>&1 | tee -a "$OUT/verdicts-comment.log"
step done
