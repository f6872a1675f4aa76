#!/usr/bin/env bash
# Several GPUs of one node (issue 9) on nvidia-h200-x2, and Proton timelines of the Triton kernels (issue 6).
#
#   OUT=out/x2 HARNESS_GIT_COMMIT=$(git rev-parse HEAD) RUN=results/<a run with the Triton kernels> \
#       bash benchmarks/h200/multigpu.sh
#
# No collective is used; NCCL's NVLink multicast stays off all the same.
OUT=${OUT:-out/x2}
# shellcheck source=benchmarks/h200/preamble.sh
. "$(dirname "$0")/preamble.sh"
export NCCL_NVLS_ENABLE=0
mkdir -p results
trap 'tar czf "$OUT/results-x2.tgz" --exclude="*.chrome_trace" results; tar czf "$OUT/chrome-traces.tgz" results/*/traces/*.chrome_trace 2>/dev/null' EXIT
nvidia-smi -L | tee "$OUT/gpus.log"

step "the same suite on every GPU (--replicate), default protocol, 1 repeat"
timeout 150 $BENCH sustained --gpus all --replicate -k sdpa-cudnn -k sdpa-flash -i gaussian:1 --repeats 1 \
    --name replicate 2>&1 | tee "$OUT/replicate.log"

step "Proton timelines into ${RUN:-<no run>}"
if [ -n "${RUN:-}" ]; then
    SPEC='{"dtype": "bf16", "name": null, "scale": null, "seed": 0, "shape": {"batch": 1, "causal": true, "head_dim_qk": 128, "head_dim_v": 128, "heads_kv": 32, "heads_q": 32, "seq_len": 16384}, "source": "gaussian:0.1"}'
    mkdir -p "$RUN/traces"
    for k in triton-fp8-lean triton-fp8-exact triton-bf16; do
        timeout 60 python3 -m harness.profiling._child proton --kernel "$k" --spec "$SPEC" --warm-s 3 \
            --out "$RUN/traces/timeline-$k-gaussian_0.1.chrome_trace" 2>&1 | tail -5 | tee -a "$OUT/proton.log"
    done
fi

step "GPU tests of the multi-GPU path (replicate, bad selections, a busy GPU)"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/multigpu/test_gpus.py 2>&1 | tee "$OUT/pytest-gpus.log"

step "bad input through the CLI: a GPU index not present, and GPU 1 busy with another process"
timeout 30 $BENCH sustained --gpus 0,7 -k sdpa-flash -i gaussian:1 --quick 2>&1 | tail -8 | tee "$OUT/bad-gpus.log"
python3 -c "import time, torch; torch.ones(1, device='cuda:1'); print('holding GPU 1', flush=True); time.sleep(60)" &
HOLDER=$!; sleep 8
timeout 60 $BENCH sustained --gpus all -k sdpa-flash -i gaussian:1 --seq-len 4096 --quick --name busy 2>&1 \
    | tee "$OUT/busy.log"
kill $HOLDER 2>/dev/null
step done
