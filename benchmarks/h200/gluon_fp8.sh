#!/usr/bin/env bash
# Issue 19 on one H200: gluon-fp8-lean / gluon-fp8-lean-summma (kernels_under_test/gluon_fp8.py) checked,
# gated and burst-ranked against triton-fp8-lean-accmma, triton-bf16 and sdpa-cudnn, then the faster Gluon
# kernel sustained beside them and traced (ncu pipe counters).
#
#   bash benchmarks/h200/gluon_fp8.sh        # from the repository root; writes under $OUT (default out/h200)
#
# Rough time: 1. small-shape checks + gate + ranking ~45 s; 2. bench sustained, 4 kernels ~110 s;
# 3. bench trace of the Gluon kernel and accmma ~100 s. Nothing here changes clocks or power settings.
set -u -o pipefail
OUT=${OUT:-out/h200}
mkdir -p "$OUT" results
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo)}
trap 'tar czf "$OUT/results-gluon.tgz" results 2>/dev/null' EXIT
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$OUT/env.log" 2>&1

timeout 120 python3 benchmarks/gluon_tune.py --configs 64x4x3s,64x4x3,64x4x2s --small-configs 2 \
    -k triton-fp8-lean-accmma -k triton-bf16 -k sdpa-cudnn --rounds 2 --warm-s 1 --rep-ms 200 \
    --json "$OUT/gluon-tune.json" 2>&1 | tee "$OUT/gluon-tune.log"
BEST=gluon-fp8-lean-summma
python3 - "$OUT/gluon-tune.json" <<'PY' && BEST=$(cat "$OUT/best") || true
import json, sys
k = json.load(open(sys.argv[1]))["kernels"]
a, b = k.get("gluon-fp8-lean[64x4x3s]", {}).get("ms"), k.get("gluon-fp8-lean[64x4x3]", {}).get("ms")
pick = "gluon-fp8-lean" if a is None or (b is not None and b < a) else "gluon-fp8-lean-summma"
open(sys.argv[1].rsplit("/", 1)[0] + "/best", "w").write(pick)
PY
echo "sustained: $BEST" | tee -a "$OUT/gluon-tune.log"
timeout 170 python3 -m harness sustained -k "$BEST" -k triton-fp8-lean-accmma -k triton-bf16 -k sdpa-cudnn \
    -i gaussian:0.1 --repeats 1 --window-s 2 --idle-s 1 --warmin-cap-s 12 --name gluon-fp8 2>&1 | tee "$OUT/sustained.log"
RUN=$(ls -d results/*-gluon-fp8-* 2>/dev/null | tail -1)
[ -n "$RUN" ] && timeout 150 python3 -m harness trace "$RUN" -k "$BEST" -k triton-fp8-lean-accmma --warm-s 2 \
    --timeout-s 60 2>&1 | tee "$OUT/trace.log"
