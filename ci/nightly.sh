#!/usr/bin/env bash
# The nightly sustained-clock benchmark, as CI runs it and as anyone can run it locally:
#   ci/nightly.sh --device cuda:0 --baseline DIR [--update-baseline] -- --model smollm2-135m --seq-len 8192
#   ci/nightly.sh --device cpu [-- --capture captures/M/T-S2048/layer03.safetensors]   (a dry run)
# Steps: `bench doctor`, the suite (captured + control inputs), the comparison with the baseline stored
# in DIR, the Markdown summary (appended to $GITHUB_STEP_SUMMARY when that is set), the HTML report and
# the run's Parquet tables under --results, and the verdict as the exit status: 0 pass (or no baseline yet,
# or a baseline from another GPU model), 1 slower beyond the noise rule, 2 an error. The baseline is
# replaced only with --update-baseline. Arguments after `--` go to `bench nightly` (the suite's inputs).
set -euo pipefail

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }

DEVICE=cuda:0
OUT=out/nightly
BASELINE=${BENCH_BASELINE_DIR:-baseline}
FAIL_ON_SLOWDOWN=2%
PYTHON=${PYTHON:-python}
OPTS=()
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --device) DEVICE=$2; shift 2 ;;
    --results|--out) OUT=$2; shift 2 ;;  # --out: the old name, as bench nightly still takes it
    --baseline) BASELINE=$2; shift 2 ;;
    --fail-on-slowdown) FAIL_ON_SLOWDOWN=$2; shift 2 ;;
    --update-baseline|--quick|--no-figures) OPTS+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) echo "ci/nightly.sh: unknown argument $1 (suite options go after --)" >&2; usage >&2; exit 2 ;;
  esac
done
if [ "$DEVICE" = cpu ]; then
  # On the CPU this is a dry run of the pipeline: the short protocol, never figures worth keeping.
  OPTS+=(--quick)
fi

mkdir -p "$OUT"
rm -f "$OUT/summary.md" "$OUT/verdict.json"  # never append last night's summary if tonight fails early
echo "== bench doctor ($DEVICE)"
# Exits 2 when $DEVICE cannot be used here (no GPU, a driver PyTorch cannot reach): the job stops before the suite.
"$PYTHON" -m harness doctor --device "$DEVICE" | tee "$OUT/doctor.txt"

echo "== suite and comparison with the baseline in $BASELINE"
set +e
# The same function `bench nightly` runs, called through its module so the script needs no PATH entry.
"$PYTHON" -m harness.cli nightly --device "$DEVICE" --results "$OUT" --baseline "$BASELINE" \
  --fail-on-slowdown "$FAIL_ON_SLOWDOWN" ${OPTS[@]+"${OPTS[@]}"} ${EXTRA[@]+"${EXTRA[@]}"}
status=$?
set -e

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  if [ -f "$OUT/summary.md" ]; then
    cat "$OUT/summary.md" >> "$GITHUB_STEP_SUMMARY"
  else
    printf '# Nightly sustained benchmark: ERROR\n\nThe run stopped before its summary (exit status %s); see the job log.\n' \
      "$status" >> "$GITHUB_STEP_SUMMARY"
  fi
fi
echo "== verdict: exit status $status"
exit "$status"
