#!/usr/bin/env bash
# Proton timelines of the FP8 Triton kernels (issue 6) at S=16384, d=128, 8 heads: one recorded launch after
# a warm-in, drawn per warp. The Chrome trace of 32 heads is ~130 MB, so fewer heads keep it quick to parse.
#
#   OUT=out/tl RUN=results/<a run> bash benchmarks/h200/proton_timelines.sh
OUT=${OUT:-out/tl}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p "$RUN/traces"
SPEC='{"dtype": "bf16", "name": null, "scale": null, "seed": 0, "shape": {"batch": 1, "causal": true, "head_dim_qk": 128, "head_dim_v": 128, "heads_kv": 8, "heads_q": 8, "seq_len": 16384}, "source": "gaussian:0.1"}'
for k in ${KERNELS:-triton-fp8-lean triton-fp8-exact}; do
    step "$k"
    timeout 200 python3 -m harness.profiling._child proton --kernel "$k" --spec "$SPEC" --warm-s 3 \
        --out "$RUN/traces/timeline-$k-H8.chrome_trace" 2>&1 | grep -v "^Warning (cta" | tee -a "$OUT/proton.log"
    cp "$RUN/traces/timeline-$k-H8.png" "$OUT/" 2>/dev/null
done
tar czf "$OUT/timelines.tgz" "$RUN"/traces/timeline-*H8*
