# Sourced by every H200 script: OUT made absolute (their steps cd elsewhere), DEVICE, the
# environment every step runs under, BENCH, `step` (a timestamped line into $OUT/steps.log), and
# `pick QUICK_VALUE FULL_VALUE`, `note` (an indented line into $OUT/steps.log), `run_step` (below), and
# `scratch NAME`: a temporary WORK folder with RESULTS inside, packed into $OUT/results-NAME.tgz and removed
# on exit, however the script ends.
set -u -o pipefail
OUT=${OUT:-out/h200}
DEVICE=${DEVICE:-cuda:0}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export COLUMNS=${COLUMNS:-250} PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BENCH="python3 -m harness"
step() { echo "== $(date -u +%T) $*" | tee -a "$OUT/steps.log"; }
scratch() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1-XXXXXX")
    RESULTS="$WORK/results"
    # shellcheck disable=SC2064  # the names are fixed now, on purpose
    trap "tar czf '$OUT/results-$1.tgz' -C '$WORK' results 2>/dev/null; rm -rf '$WORK'" EXIT
}
QUICK=${QUICK:-0}
pick() { if [ "$QUICK" = 1 ]; then echo "$1"; else echo "$2"; fi; }
note() { echo "   $*" | tee -a "$OUT/steps.log"; }
# run_step NAME CAP_S LOG CMD...: CMD (its output in $OUT/LOG) under the smaller of CAP_S and the time left before
# the script's DEADLINE less STEP_RESERVE_S (default 10) for what follows; skipped when that is under STEP_MIN_S
# (default 15); the last STEP_TAIL (default 3) lines of its log and how it ended go to steps.log. Never fails.
run_step() {
    local name=$1 cap=$2 log=$3; shift 3
    local left=$(( DEADLINE - $(date +%s) - ${STEP_RESERVE_S:-10} ))
    local limit=$(( cap < left ? cap : left ))
    if [ "$limit" -lt "${STEP_MIN_S:-15}" ]; then step "SKIPPED $name: ${left} s left of BUDGET_S=$BUDGET_S"; return 0; fi
    step "$name (limit ${limit} s)"
    timeout -k 10 "$limit" "$@" >"$OUT/$log" 2>&1
    local rc=$?
    tail -n "${STEP_TAIL:-3}" "$OUT/$log" | sed 's/^/   | /' | tee -a "$OUT/steps.log"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then note "$name: stopped at its limit (rc $rc); what finished is kept"
    elif [ $rc -ne 0 ]; then note "$name: exit $rc (see $OUT/$log)"; fi
    return 0
}
