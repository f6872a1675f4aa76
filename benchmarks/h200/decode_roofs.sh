#!/usr/bin/env bash
# Issue 42 on one H200 (acceptance 1), about 5 minutes:
#   1. bench peaks: the read stream (the roof decode is set against), the write stream, the copy (an SM kernel, timed
#      beside the runtime's eager copy_ in the same run: within 3 %), MUFU exp2 and the random-operand bf16 GEMM,
#      each also timed by its second method; short windows (memory streams settle in a chunk or two);
#   2a. triton-splitkv's setup candidates (it picks its split count, block and grid order per input by timing them)
#      on the dense cache and on three page orders of the paged one: whether the paged rate follows the page order
#      (the tuned configuration ran 497 us in one allocation, 604 us in the first acceptance run);
#   2. the decode point of the issue, B16 Hq 32 / Hkv 8 d 128 S_q 1 S_kv 32768, dense and in pages of 16 (one run,
#      --page-size none,16): triton-splitkv, sdpa-kvcache-cudnn (cuDNN SDPA: the yardstick on the dense cache) and
#      sdpa-kvcache, with the peaks of step 1 (--peaks): the terminal table shows GB/s and the % of the read roof,
#      the report the roofline;
#   3. MLA decode (--mla, absorbed form), B16 S_kv 16384 pages of 64: triton-mla at Hq 128 (DeepSeek's 128 heads)
#      and Hq 16 (a TP-8 slice), with the same peaks;
#   4. the figures acceptance 1 asks for, recomputed from the stored runs ($OUT/summary.txt): copy vs eager copy_,
#      the read roof, triton-splitkv / cuDNN on the dense cache (dense and paged), triton-mla's share of the read
#      roof (bytes: the latent cache once) and of the roof that governs it;
#   5. bench report (HTML + Markdown) of both runs where polars is installed; else render them from
#      $OUT/results-round2.tgz (`bench report RUN --html ...`).
# Protocol of steps 2-3: 2 repeats, 0.5 s windows, 0.1 s chunks, warm-in capped at 4 s (decode_sweep.sh's; the
# power-capped points may end `unsettled` there and say so).
#
#   OUT=$OUT bash benchmarks/h200/decode_roofs.sh                         # the H200
#   OUT=/tmp/round2 DEVICE=cpu QUICK=1 PYTHON=.venv/bin/python bash benchmarks/h200/decode_roofs.sh
#       the CPU dry run: tiny shapes, --quick, the Triton kernels interpreted, torch-only peaks (no exp2, no cuDNN)
# On the device $OUT gets 7 files (steps, peaks, candidates, decode, mla logs, summary.txt, results-round2.tgz),
# within the device tool's 8; the reports (step 5) are rendered where polars is installed.
# Never changes clocks, power limits or GPU modes; nvidia-smi is only queried.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
QUICK=${QUICK:-0}
PY=${PYTHON:-python3}
BENCH="$PY -m harness"
scratch round2
[ "$QUICK" = 1 ] && export TRITON_INTERPRET=${TRITON_INTERPRET:-1}  # the Triton kernels in the CPU interpreter

PEAKS_K=$(pick "peak-read-stream,peak-write-stream,peak-copy-d2d,peak-gemm-bf16-random" \
               "peak-read-stream,peak-write-stream,peak-copy-d2d,peak-exp2-mufu,peak-gemm-bf16-random")
PEAKS_SIZE=$(pick "--gemm-size 128 --read-mib 4 --write-mib 4 --copy-mib 4" "")
PEAKS_PROTO=$(pick "--quick --repeats 1" "--repeats 2 --window-s 1 --idle-s 0.5 --warmin-cap-s 6")
KERNELS=$(pick "-k triton-splitkv -k sdpa-kvcache" "-k triton-splitkv -k sdpa-kvcache-cudnn -k sdpa-kvcache")
DECODE=$(pick "--batch 2 --heads 8 --heads-kv 2 --head-dim 16 --seq-len-q 1 --seq-len-kv 96 --page-size none,16" \
              "--batch 16 --heads 32 --heads-kv 8 --head-dim 128 --seq-len-q 1 --seq-len-kv 32768 --page-size none,16")
MLA=$(pick "--mla --heads 16 --batch 2 --seq-len-q 1 --seq-len-kv 96 --page-size 16" \
           "--mla --heads 128,16 --batch 16 --seq-len-q 1 --seq-len-kv 16384 --page-size 64")
PROTO=$(pick "--quick --repeats 1" "--repeats 2 --window-s 0.5 --idle-s 0.2 --chunk-s 0.1 --warmin-cap-s 4")

step "decode round 2: DEVICE=$DEVICE QUICK=$QUICK OUT=$OUT"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
    --format=csv,noheader 2>&1 | tee -a "$OUT/steps.log"

step "1. peaks: $PEAKS_K"
$BENCH peaks -k "$PEAKS_K" --device "$DEVICE" $PEAKS_SIZE $PEAKS_PROTO --results "$RESULTS" --name round2-peaks \
    2>&1 | tee "$OUT/peaks.log"
PEAKS=$(ls -d "$RESULTS"/*-round2-peaks-* 2>/dev/null | tail -1)
WITH_PEAKS=${PEAKS:+--peaks $PEAKS}
[ -z "$PEAKS" ] && step "1. no peaks run: steps 2-3 run without --peaks"

step "2a. triton-splitkv's setup candidates on the dense cache and three page orders (decode_tune.py --parts candidates)"
timeout 90 $PY benchmarks/h200/decode_tune.py $(pick "--dry" "") --out "$WORK/candidates" --budget-s 80 \
    --parts candidates > "$OUT/candidates.log" 2>&1 || echo "   candidates: exit $? (see $OUT/candidates.log)" | tee -a "$OUT/steps.log"
grep -E "picks|SUMMARY" "$OUT/candidates.log" | tee -a "$OUT/steps.log"

step "2. decode B16 S_kv 32768, dense and page 16: $KERNELS"
$BENCH sustained $KERNELS -i gaussian:0.1 $DECODE --device "$DEVICE" $PROTO --results "$RESULTS" \
    --name round2-decode $WITH_PEAKS 2>&1 | tee "$OUT/decode.log"

step "3. MLA decode: triton-mla $MLA"
$BENCH sustained -k triton-mla -i gaussian:0.1 $MLA --device "$DEVICE" $PROTO --results "$RESULTS" \
    --name round2-mla $WITH_PEAKS 2>&1 | tee "$OUT/mla.log"

step "4. the figures of acceptance 1, from the stored runs"
$PY - "$RESULTS" <<'EOF' 2>&1 | tee "$OUT/summary.txt"
import statistics
import sys
from pathlib import Path

from harness.profiling import read_trace_table, roofs_from_peaks
from harness.results import read_rows

runs = [p for p in sorted(Path(sys.argv[1]).iterdir()) if p.is_dir()]
peaks = next((p for p in runs if "-round2-peaks-" in p.name), None)
roofs = {r.label: r for r in roofs_from_peaks(read_trace_table(peaks, "peaks"))} if peaks else {}
for label, r in roofs.items():
    check = f", second method {r.check_value / 1e12:.3f} ({r.disagreement:+.1%}: {r.check_method})" if r.check_value else ""
    clock = f" at {r.clock_mhz:.0f} MHz {r.clock_source}" if r.clock_mhz else ""
    print(f"peak {label}: {r.value / 1e12:.3f} T{'B' if r.kind == 'memory' else 'FLOP' if r.kind == 'compute' else 'exp'}/s{clock}{check}")
read = roofs.get("read-stream")
copy = roofs.get("copy-d2d")
if copy and copy.check_value:
    print(f"ACCEPT copy within 3 % of eager copy_: {abs(copy.disagreement) <= 0.03} ({copy.disagreement:+.2%})")
if read:
    print(f"ACCEPT read roof >= 4.5 TB/s: {read.value >= 4.5e12} ({read.value / 1e12:.3f} TB/s)")


def medians(run):
    groups = {}
    for m in read_rows(run, "measurements"):
        if m.get("time_ns"):
            groups.setdefault((m["kernel"], m["input_label"]), []).append(m)
    return {k: (statistics.median(r["time_ns"] for r in rs), rs[0]["bytes_per_launch"], rs[0]["flops_per_launch"],
                statistics.median(r.get("inband_clock_mhz") or r.get("sm_clock_mhz") or 0 for r in rs), len(rs),
                sum(r["status"] == "unsettled" for r in rs)) for k, rs in groups.items()}


for run in runs:
    if run is peaks:
        continue
    print(f"run {run.name}:")
    rows = medians(run)
    for (kernel, label), (t, nbytes, flops, clock, n, unsettled) in sorted(rows.items(), key=lambda kv: kv[0][1]):
        gbs = nbytes / t
        share = f", {gbs * 1e9 / read.value:.1%} of the read roof" if read else ""
        print(f"  {kernel:20s} {label:40s} {t / 1e3:9.1f} us {gbs:7.0f} GB/s {flops / t * 1e-3:7.1f} TFLOP/s"
              f"{share} at {clock:.0f} MHz ({n} repeats, {unsettled} unsettled)")
    cudnn = next((v for (k, lab), v in rows.items() if k == "sdpa-kvcache-cudnn" and "none" in lab), None)
    for (kernel, label), (t, nbytes, *_rest) in rows.items():
        if kernel == "triton-splitkv" and cudnn:
            rate = (nbytes / t) / (cudnn[1] / cudnn[0])
            print(f"ACCEPT triton-splitkv {label} >= 92 % of cuDNN's dense rate: {rate >= 0.92} ({rate:.1%})")
        if kernel == "triton-mla" and read:
            print(f"ACCEPT? triton-mla {label} >= 70 % of the read roof: {nbytes / t * 1e9 / read.value >= 0.70} "
                  f"({nbytes / t * 1e9 / read.value:.1%}; see the roofline for the roof that governs it)")
EOF

if $PY -c "import polars" 2>/dev/null; then
    for RUN in "$RESULTS"/*-round2-decode-* "$RESULTS"/*-round2-mla-*; do
        [ -d "$RUN" ] || continue
        NAME=$(basename "$RUN")
        step "5. report $NAME"
        $BENCH report "$RUN" --html "$OUT/report-$NAME.html" --md "$OUT/report-$NAME.md" > "$OUT/report-$NAME.log" 2>&1 \
            || echo "   report $NAME failed: see $OUT/report-$NAME.log" | tee -a "$OUT/steps.log"
    done
else
    step "5. reports: polars is not installed here; render them from $OUT/results-round2.tgz elsewhere"
fi
step "done: runs in $RESULTS (packed into $OUT/results-round2.tgz on exit)"
