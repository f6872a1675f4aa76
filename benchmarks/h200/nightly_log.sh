#!/usr/bin/env bash
# The nightly job as CI runs it (issue 16): non-interactive, stdout to a file (not a terminal, no COLUMNS,
# GITHUB_ACTIONS=true), on one H200 with a short suite (sdpa-cudnn x gaussian:0.1 / gaussian:1 at S=8192,
# the default sustained protocol: 6 measurements). Prints the log's first 20 lines, its measurement lines
# and its end, and checks that no line was wrapped or cut. About 3 minutes.
#
#   OUT=out/h200-nightly HARNESS_GIT_COMMIT=$(git rev-parse HEAD) bash benchmarks/h200/nightly_log.sh
#   DEVICE=cpu OUT=/tmp/n bash benchmarks/h200/nightly_log.sh     # the CPU dry run of the same script
#
# Each step is guarded (its own time limit; a failure is reported and the next step runs).
OUT=${OUT:-out/h200-nightly}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
export PYTHON=${PYTHON:-python3}
unset COLUMNS LINES  # the nightly job as CI runs it: no terminal width
LOG="$OUT/nightly.log"
if [ "$DEVICE" = cpu ]; then KERNEL=sdpa-cpu SEQ=256; else KERNEL=sdpa-cudnn SEQ=8192; fi

step "nightly job on $DEVICE, stdout to $LOG (not a terminal)"
GITHUB_ACTIONS=true timeout 420 bash ci/nightly.sh --device "$DEVICE" --out "$OUT/nightly" --baseline "$OUT/baseline" \
    -- -k $KERNEL -i gaussian:0.1,gaussian:1 --seq-len $SEQ \
       --json "$OUT/nightly/figures.json" --csv "$OUT/nightly/figures.csv" \
    > "$LOG" 2>&1 < /dev/null
echo "exit status $? (0 pass / no baseline, 1 slower, 2 user error, 3 internal error)" | tee -a "$OUT/steps.log"

step "the log's first 20 lines"
head -20 "$LOG"

step "one line per finished measurement (with the ETA)"
grep -E '^\[[0-9]+/[0-9]+, ' "$LOG" || echo "(no measurement lines: see $LOG)"

step "the end of the log"
tail -25 "$LOG"

step "checks: longest line, wrapped table rows, figures JSON"
echo "longest line: $(wc -L < "$LOG") characters; $(wc -l < "$LOG") lines"
# A table row rich had to fold would leave a row whose first cell is empty (a continuation line).
if grep -nE '^│ +│' "$LOG"; then echo "WRAPPED ROWS ABOVE"; else echo "no wrapped table rows"; fi
timeout 60 "$PYTHON" - "$OUT/nightly/figures.json" <<'PY' || echo "figures check failed"
import json, sys
doc = json.load(open(sys.argv[1]))
print(f"figures.json: schema {doc['schema']} v{doc['schema_version']}, run {doc['runs'][0]['run_id']}, "
      f"verdict {doc['verdict']['verdict']}")
for r in doc["tables"]["sustained"]:
    print(f"  {r['kernel']} {r['input']}: {r['time_ms']} ms, NVML {r['nvml_clock_mhz']} MHz, "
          f"in-band {r['inband_clock_mhz']} MHz, {r['board_power_w']} W, {r['limiters']}")
PY
step done
