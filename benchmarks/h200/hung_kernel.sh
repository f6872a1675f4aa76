#!/usr/bin/env bash
# A hung kernel next to sdpa-cudnn on one H200 (issue 14, acceptance 3): one `bench sustained` run at
# S=16384 H=32 d=128 where `tests.runner.ending_kernels:hangs` sleeps in Python inside its launch. The
# cuDNN rows must be timed, the hung kernel recorded as `timeout` (launch watchdog, 10 s here), and the
# GPU idle afterwards (nvidia-smi before and after). About 1.5 minutes.
#
#   OUT=out/h200 HARNESS_GIT_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200/hung_kernel.sh
#
# Each step has its own time limit so one failure cannot cost the others; logs go to $OUT.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
smi() {
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>&1
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
}

step "GPU before the run"
smi 2>&1 | tee "$OUT/endings-smi-before.log"

step "sustained: sdpa-cudnn next to a kernel that hangs in its launch (10 s watchdog)"
timeout 240 $BENCH sustained -k sdpa-cudnn -k tests.runner.ending_kernels:hangs -i gaussian:0.1 \
    --seq-len 16384 --heads 32 --head-dim 128 --repeats 2 --idle-s 1 --window-s 2 --warmin-cap-s 8 \
    --launch-timeout-s 10 --name endings 2>&1 | tee "$OUT/endings-sustained.log"
echo "exit code: $?" | tee -a "$OUT/endings-sustained.log"
RUN=$(ls -d results/*-endings-* 2>/dev/null | tail -1)

step "status and rows on disk: $RUN"
[ -n "$RUN" ] && timeout 60 python3 - "$RUN" <<'EOF' 2>&1 | tee "$OUT/endings-rows.log"
import sys
import pyarrow.parquet as pq
from pathlib import Path
from harness.results import part_files
run = Path(sys.argv[1])
info = pq.read_table(run / "runs.parquet").to_pylist()[0]
print("run status:", info["status"], "|", info["status_detail"])
for f in part_files(run / "measurements"):
    for r in pq.read_table(f).to_pylist():
        t = f"{r['time_ns'] / 1e6:.4f} ms" if r["time_ns"] else "-"
        print(f"{r['kernel']:12} {r['input_label']:14} repeat {r['repeat']:2}  {r['status']:10} {t:>12}  {(r['error'] or '')[:200]}")
EOF

step "GPU after the run (should be idle: 0 % and no compute process)"
sleep 2
smi 2>&1 | tee "$OUT/endings-smi-after.log"
[ -n "$RUN" ] && tar czf "$OUT/results-endings.tgz" "$RUN"
step done
