#!/usr/bin/env bash
# Run several H200 scripts in one device call, each under its own time limit, and pack what each wrote
# into one file: the device tool brings back at most 8 files from $OUT.
#
#   bash benchmarks/h200/run_several.sh hung_kernel:150 commits_plain_function:240 nightly_log:200
#
# Each NAME:SECONDS runs benchmarks/h200/NAME.sh with OUT=/tmp/h200/NAME; its console goes to
# $OUT/steps.log, and /tmp/h200/NAME (with any results/ it made) becomes $OUT/NAME.tgz.
# With WHEELS=1 the carried wheels in .whl/ are installed first (polars: the image has none).
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
if [ "${WHEELS:-0}" = 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{ echo "== $(date -u +%T) $(nvidia-smi --query-gpu=name,pci.bus_id,driver_version,power.limit --format=csv,noheader)"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import polars; print('polars', polars.__version__)" 2>&1 | tail -1; } | tee -a "$OUT/steps.log"
for item in "$@"; do
  name=${item%%:*}; limit=${item##*:}
  dir=/tmp/h200/$name
  mkdir -p "$dir"
  echo "== $(date -u +%T) $name (limit ${limit}s)" | tee -a "$OUT/steps.log"
  start=$(date +%s)
  OUT=$dir timeout --signal=TERM --kill-after=10 "$limit" bash "benchmarks/h200/$name.sh" >"$dir/console.log" 2>&1
  rc=$?
  echo "== $(date -u +%T) $name exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/steps.log"
  tail -n 40 "$dir/console.log" >> "$OUT/steps.log"
  tar czf "$OUT/$name.tgz" -C /tmp/h200 "$name"
done
nvidia-smi --query-gpu=utilization.gpu,memory.used,power.draw --format=csv >> "$OUT/steps.log"
