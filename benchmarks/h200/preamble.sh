# Sourced by every H200 script: OUT made absolute (their steps cd elsewhere), DEVICE, the
# environment every step runs under, BENCH, `step` (a timestamped line into $OUT/steps.log), and
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
