#!/usr/bin/env bash
# Issue 31, acceptance 3, on one H200 in one device call (about 4 minutes):
#  1. one `bench sustained` run of sdpa-cudnn beside two user kernels that each run in a process of their own
#     (benchmarks/h200/isolation_kernels.py): `exits` calls os._exit(0), `spins_on_gpu` queues a CUDA kernel
#     that never finishes. cuDNN's rows must be timed, `exits` recorded as `error` and `spins_on_gpu` as
#     `timeout`, each with its cause; the exit status 0 (README: 4 only when nothing was timed); the GPU idle
#     afterwards (nvidia-smi --query-compute-apps and NVML's process list; how long it took is printed);
#  2. sdpa-cudnn in the run's own process (--isolation none) and in a process of its own (--isolation
#     process), interleaved none/process/none/process, 2 repeats each (a short protocol): the ratio of the
#     medians, child / in-process, is printed (issue 31: within 0.3 %).
# A summary of PASS/FAIL lines ends $OUT/isolation-checks.log; the script's status is 1 if a check failed.
#
#   OUT=out/h200 HARNESS_GIT_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200/isolation.sh
#   OUT=/tmp/iso DEVICE=cpu bash benchmarks/h200/isolation.sh      # the CPU dry run: sdpa-cpu, small shapes
#
# Each step has its own time limit so one failure cannot cost the others; logs go to $OUT, the runs are packed
# into $OUT/results-isolation.tgz. Never changes clocks, power limits or GPU modes; nvidia-smi is only queried.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
RESULTS=$(mktemp -d "${TMPDIR:-/tmp}/isolation-XXXXXX")
trap 'tar czf "$OUT/results-isolation.tgz" -C "$RESULTS" . 2>/dev/null; rm -rf "$RESULTS"' EXIT
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/isolation-steps.log"; }
K=benchmarks/h200/isolation_kernels.py
if [ "${DEVICE%%:*}" = cpu ]; then
    KERNEL=sdpa-cpu
    SHAPE="--device cpu --seq-len 256 --heads 4 --head-dim 32 --dtype fp32 --telemetry host"
    PROTO="--repeats 2 --idle-s 0.2 --window-s 0.5 --warmin-cap-s 2 --quick"
    TIMEOUT_S=5
else
    KERNEL=sdpa-cudnn
    # S=8192: cuDNN takes ~1 ms a call here, long enough for the card to reach its power limiter (h200-measurements).
    SHAPE="--device $DEVICE --seq-len 8192 --heads 32 --head-dim 128 --dtype bf16"
    PROTO="--repeats 2 --idle-s 1 --window-s 2 --warmin-cap-s 8"
    TIMEOUT_S=15
fi
smi() {
    command -v nvidia-smi >/dev/null || { echo "(no nvidia-smi on this machine)"; return 0; }
    nvidia-smi --query-gpu=index,utilization.gpu,memory.used,clocks.sm,power.draw --format=csv 2>&1
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
}

step "GPU before"
smi 2>&1 | tee "$OUT/isolation-smi-before.log"

step "1. $KERNEL beside a kernel that calls os._exit and one that spins on the GPU forever (launch timeout ${TIMEOUT_S} s)"
T0=$(date +%s)
timeout 150 $BENCH sustained -k "$KERNEL" -k "$K:exits" -k "$K:spins_on_gpu" -i gaussian:0.1 $SHAPE $PROTO \
    --launch-timeout-s "$TIMEOUT_S" --name isolation --results "$RESULTS" > "$OUT/isolation-run.log" 2>&1
echo "$?" > "$OUT/isolation-run.exit"
echo "exit status $(cat "$OUT/isolation-run.exit") after $(( $(date +%s) - T0 )) s" | tee -a "$OUT/isolation-run.log"
tail -n 40 "$OUT/isolation-run.log"

step "GPU right after run 1 (the killed child's context must be gone; polled up to 30 s)"
timeout 60 python3 - "$DEVICE" <<'PY' 2>&1 | tee "$OUT/isolation-gpu-after.log"
import sys
import time
if not sys.argv[1].startswith("cuda"):
    print("gpu idle after: not a GPU run (CPU dry run)")
    sys.exit(0)
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1].partition(":")[2] or 0))
t0 = time.monotonic()
while True:
    procs = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
    util = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
    if not procs and util == 0 or time.monotonic() - t0 > 30:
        break
    time.sleep(0.5)
print(f"gpu idle after: {'yes' if not procs else 'NO'} after {time.monotonic() - t0:.1f} s: "
      f"{len(procs)} compute process(es) {[p.pid for p in procs]}, utilization {util} %")
PY
smi 2>&1 | tee "$OUT/isolation-smi-after.log"

step "2. $KERNEL in-process (--isolation none) and in its own process (--isolation process), interleaved"
for i in 1 2; do
    for mode in none process; do
        timeout 75 $BENCH sustained -k "$KERNEL" -i gaussian:0.1 $SHAPE $PROTO --isolation "$mode" \
            --name "timing-$mode-$i" --results "$RESULTS" > "$OUT/isolation-timing-$mode-$i.log" 2>&1
        echo "timing-$mode-$i: exit status $?" | tee -a "$OUT/isolation-steps.log"
        grep -E "ms/launch" "$OUT/isolation-timing-$mode-$i.log" | grep -v "┃" | tail -n 2
    done
done

step "checks"
timeout 60 python3 - "$RESULTS" "$OUT" "$KERNEL" "$TIMEOUT_S" <<'PY' 2>&1 | tee "$OUT/isolation-checks.log"
import statistics
import sys
from pathlib import Path

import pyarrow.parquet as pq

from harness.results import part_files

results, out, kernel, timeout_s = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
checks = []


def check(name, ok, detail=""):
    checks.append((name, bool(ok)))
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f": {detail}" if detail else ""))


def run(name):
    dirs = sorted(results.glob(f"*-{name}-*"))
    if not dirs:
        return None, []
    info = pq.read_table(dirs[-1] / "runs.parquet").to_pylist()[0]
    rows = [r for f in part_files(dirs[-1] / "measurements") for r in pq.read_table(f).to_pylist()]
    return info, rows


info, rows = run("isolation")
code = (out / "isolation-run.exit").read_text().strip()
check("run 1 exit status 0 (a kernel was timed; README: 4 only when nothing was)", code == "0", f"exit {code}")
check("run 1 status complete", info and info["status"] == "complete",
      info and f"{info['status']} {info['status_detail']}" or "no run directory")
by = {}
for r in rows:
    by.setdefault(r["kernel"].rpartition(":")[2], []).append(r)
    t = f"{r['time_ns'] / 1e6:.4f} ms" if r["time_ns"] else "-"
    print(f"   {r['kernel'][-40:]:40} repeat {r['repeat']:2} {r['status']:9} {t:>11}  {(r['error'] or '')[:400]}")
timed = [r for r in by.get(kernel, []) if r["status"] in ("ok", "unsettled") and r["time_ns"]]
check(f"{kernel} timed in every repeat", len(timed) == 2, f"{len(timed)} of 2")
ex = (by.get("exits") or [{}])[0]
check("exits recorded as error, os._exit named", ex.get("status") == "error" and "os._exit(0)" in (ex.get("error") or ""),
      (ex.get("error") or "no row")[:300])
sp = (by.get("spins_on_gpu") or [{}])[0]
check("spins_on_gpu recorded as timeout, killed", sp.get("status") == "timeout"
      and f"within the {timeout_s} s launch timeout" in (sp.get("error") or "") and "SIGKILL" in (sp.get("error") or ""),
      (sp.get("error") or "no row")[:300])
after = (out / "isolation-gpu-after.log").read_text() if (out / "isolation-gpu-after.log").exists() else ""
check("GPU idle after run 1 (NVML: no compute process)", "gpu idle after: yes" in after or "not a GPU run" in after,
      after.strip().splitlines()[-1] if after.strip() else "no reading")

times = {"none": [], "process": []}
for i in (1, 2):
    for mode in times:
        info_m, rows_m = run(f"timing-{mode}-{i}")
        ok = [r["time_ns"] for r in rows_m if r["status"] in ("ok", "unsettled") and r["time_ns"]]
        clocks = [r["inband_clock_mhz"] or r["sm_clock_mhz"] for r in rows_m if r["time_ns"]]
        print(f"   timing-{mode}-{i}: {info_m and info_m['status']}: " + ", ".join(f"{t / 1e6:.4f} ms" for t in ok)
              + (f" at {', '.join(f'{c:.0f}' for c in clocks if c)} MHz" if any(clocks) else ""))
        times[mode] += ok
if times["none"] and times["process"]:
    a, b = statistics.median(times["none"]), statistics.median(times["process"])
    ratio = b / a
    print(f"{kernel}: in-process median {a / 1e6:.4f} ms ({len(times['none'])} repeats), own process median "
          f"{b / 1e6:.4f} ms ({len(times['process'])} repeats): child / in-process = {ratio:.4f} ({ratio - 1:+.2%})")
    spread = max(times["none"]) / min(times["none"]) - 1
    print(f"   spread of the in-process repeats themselves: {spread:.2%} (max / min - 1)")
    check("child path within 0.3 % of in-process", abs(ratio - 1) <= 0.003, f"{ratio - 1:+.3%}")
else:
    check("child path within 0.3 % of in-process", False, "a timing run timed nothing")
failed = [n for n, ok in checks if not ok]
print(f"\n{len(checks) - len(failed)} of {len(checks)} checks passed" + (f"; FAILED: {'; '.join(failed)}" if failed else ""))
sys.exit(1 if failed else 0)
PY
STATUS=$?
step "done (checks exit status $STATUS)"
exit $STATUS
