#!/usr/bin/env bash
# Issue 17: how many SmolLM2 text windows to stack along the batch so that the main job's kernels reach the
# H200's power limiter. The SmolLM2 layer shape (Hq=9, Hkv=3, S=8192, d=64, causal) on Gaussian 0.1 at
# B = 1, 3, 6, 9, 12, one short repeat per kernel: power, pwr-lim share, TF/s. Gaussian stands in for the
# captures here (they differ by < 2 % in power at B=3: fixture 20261201-225635-main-job-09c5b6).
#
#   OUT=out/stacking bash benchmarks/h200/stacking_to_power_limit.sh        # ~2.5 min on one H200
OUT=${OUT:-out/stacking}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
for B in ${BATCHES:-1 3 6 9 12}; do
  step "B=$B"
  timeout 100 $BENCH sustained -k sdpa-flash -k sdpa-cudnn -k triton-fp8-lean -i gaussian:0.1 --batch "$B" --heads 9 \
      --heads-kv 3 --seq-len 8192 --head-dim 64 --causal --repeats 1 --window-s 2 --idle-s 1 --warmin-cap-s 12 \
      --name "stack-B$B" 2>&1 | grep -v '^[┏┃┡│└]' | tee -a "$OUT/steps.log"
done
timeout 60 python3 - <<'PY' 2>&1 | tee "$OUT/table.log"
import glob
import pyarrow.parquet as pq
print(f"{'B':>3} {'kernel':16} {'ms':>8} {'W':>5} {'pwr-lim':>7} {'TF/s':>6} {'NVML':>5} {'in-band':>7}")
for run in sorted(glob.glob("results/*-stack-B*")):
    for f in sorted(glob.glob(f"{run}/measurements/*.parquet")):
        for r in pq.read_table(f).to_pylist():
            print(f"{r['batch']:>3} {r['kernel']:16} {(r['time_ns'] or 0) / 1e6:8.4f} {r['power_w'] or 0:5.0f} "
                  f"{100 * (r['power_limited_frac'] or 0):6.0f}% {r['tflops'] or 0:6.1f} {r['sm_clock_mhz'] or 0:5.0f} "
                  f"{r['inband_clock_mhz'] or 0:7.0f}  {r['status']}")
PY
tar czf "$OUT/results-stacking.tgz" results
