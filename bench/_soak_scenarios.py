"""The child side of ``bench/http_soak.py``: what one short process of the soak does (one scenario each).

Each scenario runs small prompt jobs against the simulator in a way that has crashed interpreters
before (threads that end, exiting with clients open, fork and multiprocessing after a job, a Ray
worker, a Spark Python worker) and prints one result line (``_util.emit_result``). The parent,
``http_soak.py``, starts the processes, reads their exit codes and prints the table.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

from _util import emit_result

CHEAP = ("thread", "exit-open", "fork", "mp-fork")
HEAVY = ("ray", "spark")
SCENARIOS = CHEAP + HEAVY
MODEL = "gpt-5-mini"
KEY = "sk-soak"
ROWS = 3  # questions per job
CHILD_TIMEOUT_S = 60.0  # a forked or multiprocessing child that has not ended by then hangs
# What a process that crashed leaves on stderr: CPython's fatal error, the shell's or faulthandler's line, a Rust panic.
CRASH_LINES = re.compile(r"Fatal Python error|Segmentation fault|core dumped|panicked at|SIGSEGV|SIGABRT|"
                         r"Python worker exited unexpectedly|worker died unexpectedly")


# --------------------------------------------------------------------------- children: one scenario each


class JobFailed(RuntimeError):
    """A job ran but its answers were not the simulator's."""


def _job(url: str, cache: str, tag: str, rows: int = ROWS) -> None:
    """One prompt() job as a user writes it: unique questions, every answer checked."""
    _run(*_plan(url, cache, tag, rows))


def _plan(url: str, cache: str, tag: str, rows: int = ROWS):
    """The job's DataFrame (built: the plan, and the HTTP client chosen) and its questions."""
    import inferframe as ifr
    from inferframe import col
    from inferframe.functions import prompt

    questions = [f"{tag} q{i}" for i in range(rows)]
    return ifr.from_pydict({"q": questions}).with_column(
        "a", prompt(col("q"), provider="openai", base_url=url, api_key=KEY, model=MODEL, cache_dir=cache)), questions


def _run(df, questions: list) -> None:
    out = df.to_pydict()
    _check(questions, out["a"], out["a_error"])


def _check(questions: list, answers: list, errors: list) -> None:
    wrong = [(q, a, e) for q, a, e in zip(questions, answers, errors) if a != f"sim answer: {q}" or e is not None]
    if wrong or len(answers) != len(questions):
        raise JobFailed(f"{len(wrong)} of {len(questions)} rows not answered; first: {wrong[:1]}")


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:400]


def _thread(a, variant: int) -> dict:
    errors: list[str] = []
    if variant % 2:  # a job on the main thread first: reqwest loaded on the main thread
        _job(a.url, a.cache, f"{a.tag} main")
    on_main = (variant // 2) % 2  # the plans built on the main thread, run on the threads

    def run(k: int, built) -> None:
        try:
            _run(*(built or _plan(a.url, a.cache, f"{a.tag} t{k}")))
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(_error(e))

    for k in range(2):
        built = _plan(a.url, a.cache, f"{a.tag} t{k}") if on_main else None
        t = threading.Thread(target=run, args=(k, built), name=f"soak-job-{k}")
        t.start()
        t.join()
    if errors:
        raise JobFailed(errors[0])
    return {"main_job_first": bool(variant % 2), "built_on_main": bool(on_main)}


_HELD: list = []  # what exit-open keeps referenced until the process ends


def _exit_open(a, variant: int) -> dict:
    hold = ("stream", "provider", "in-flight")[variant % 3]
    how = ("os._exit", "interpreter")[(variant // 3) % 2]
    _job(a.url, a.cache, f"{a.tag} first")
    if hold == "stream":
        df, _ = _plan(a.url, a.cache, f"{a.tag} s", rows=8)
        batches = df.iter_batches()
        first = next(batches).to_pydict()  # the stream is not read to its end: the job, its provider, its client open
        _check(first["q"], first["a"], first["a_error"])
        _HELD.append(batches)
    elif hold == "in-flight":  # a job on a daemon thread, its requests in flight (the slow server: 20-400 ms) at exit
        df, _ = _plan(a.slow_url, a.cache, f"{a.tag} f", rows=16)
        threading.Thread(target=df.to_pydict, name="soak-in-flight", daemon=True).start()
        time.sleep(0.05 + (variant % 7) * 0.05)  # exit at a different point of the job each time
    else:
        import asyncio

        from inferframe.providers.interface import Request
        from inferframe.providers.openai import OpenAIProvider
        from inferframe.providers.spec import ProviderSpec

        provider = OpenAIProvider(ProviderSpec("openai"), base_url=a.url, api_key=KEY)
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"{a.tag} p"}]}
        outcome = asyncio.run(provider.send(Request("chat", body)))  # sent, never closed
        if outcome.error_kind is not None:
            raise JobFailed(f"the provider's request failed: {outcome.message}")
        _HELD.append(provider)
    result = {"hold": hold, "exit": how}
    if how == "os._exit":
        _emit_child(a, result)
        os._exit(0)
    return result


def _wait_child(pid: int) -> int | str:
    """The forked child's exit code (negative: the signal that ended it), "hang" if killed after CHILD_TIMEOUT_S."""
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang"
        time.sleep(0.02)


def _fork(a, variant: int) -> dict:
    _job(a.url, a.cache, f"{a.tag} before")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a job, then its verdict down the pipe
        os.close(read_end)
        try:
            _job(a.url, a.cache, f"{a.tag} child")
            said, code = {"error": None}, 0
        except BaseException as e:  # noqa: BLE001 - a clear Python error is an allowed outcome: reported
            said, code = {"error": _error(e)}, 1
        os.write(write_end, json.dumps(said).encode())
        os.close(write_end)
        if variant % 2 == 0:
            os._exit(code)
        sys.exit(code)  # a plain exit: the child runs the atexit hooks it inherited (raises SystemExit past main)
    os.close(write_end)
    code = _wait_child(pid)
    with os.fdopen(read_end, "rb") as f:
        said = json.loads(f.read() or b'{"error": "the child said nothing"}')
    _job(a.url, a.cache, f"{a.tag} after")  # the parent's client still works after the fork
    return {"children": [{"who": "fork-child", "code": code, "error": said["error"],
                          "exit": ("os._exit", "sys.exit")[variant % 2]}]}


def _mp_job(url: str, cache: str, tag: str) -> str:
    _job(url, cache, tag)
    return "ok"


def _mp_fork(a, variant: int) -> dict:
    import multiprocessing

    _job(a.url, a.cache, f"{a.tag} before")
    ctx = multiprocessing.get_context("fork")
    if variant % 2 == 0:
        proc = ctx.Process(target=_mp_job, args=(a.url, a.cache, f"{a.tag} child"))
        proc.start()
        proc.join(CHILD_TIMEOUT_S)
        if proc.is_alive():
            proc.kill()
            proc.join()
            child = {"who": "mp-process", "code": "hang", "error": None}
        else:  # a Python error in the child: exit code 1, its traceback on stderr
            child = {"who": "mp-process", "code": proc.exitcode, "error": None}
    else:
        pool = ctx.Pool(1)
        workers = list(pool._pool)  # the worker processes, to read their exit codes once the pool is joined
        error, hung = None, False
        try:
            pool.apply_async(_mp_job, (a.url, a.cache, f"{a.tag} child")).get(CHILD_TIMEOUT_S)
        except multiprocessing.TimeoutError:
            hung = True
        except Exception as e:  # noqa: BLE001 - the task's clear Python error, raised again here
            error = _error(e)
        if hung:
            pool.terminate()
        else:
            pool.close()
        pool.join()
        codes = [w.exitcode for w in workers]
        code = "hang" if hung else next((c for c in codes if c), 1 if error else 0)
        child = {"who": "mp-pool", "code": code, "error": error}
    _job(a.url, a.cache, f"{a.tag} after")
    return {"children": [child]}


def _ray(a, variant: int) -> dict:
    import ray

    _job(a.url, a.cache, f"{a.tag} driver")
    # "local": a Ray of its own, as ray.init() with no address joins a cluster another program runs on this machine
    ray.init(address="local", num_cpus=1, include_dashboard=False)
    logs = Path(ray._private.worker._global_node.get_logs_dir_path())

    @ray.remote(max_calls=1)  # the worker exits after its task: its exit runs with the client's library loaded
    def work(url: str, cache: str, tag: str) -> tuple[int, bool]:
        _job(url, cache, tag)
        return os.getpid(), "inferframe.providers.http_reqwest" in sys.modules

    children = []
    try:
        done = ray.get([work.remote(a.url, a.cache, f"{a.tag} w{k}") for k in range(2)], timeout=240)
        children = [{"who": "ray-worker", "code": 0, "error": None, "pid": p, "reqwest_loaded": r} for p, r in done]
    except ray.exceptions.WorkerCrashedError as e:
        children = [{"who": "ray-worker", "code": "crash", "error": _error(e)}]
    except ray.exceptions.RayTaskError as e:
        children = [{"who": "ray-worker", "code": 1, "error": _error(e)}]
    time.sleep(1.0)  # the workers' exits (max_calls=1) reach their log files
    crashed = [line for pattern in ("worker-*", "python-core-worker-*", "raylet.*")
               for line in _crash_lines_in(logs, pattern)]
    ray.shutdown()
    if crashed:
        children.append({"who": "ray-worker", "code": "crash", "error": crashed[0]})
    return {"children": children}


def _crash_lines_in(folder: Path, pattern: str) -> list[str]:
    found = []
    for path in sorted(folder.glob(pattern)):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        found += [f"{path.name}: {line.strip()}" for line in text.splitlines() if CRASH_LINES.search(line)]
    return found


def _spark(a, variant: int) -> dict:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this venv's Python, as a user sets it
    _job(a.url, a.cache, f"{a.tag} driver")
    from pyspark.sql import SparkSession

    # C1 only and serial GC: a session of four rows, whose C2 compiles never repay (the soak is of the Python
    # workers; a local session's start and job took 8.6-8.7 CPU-seconds against 14.7-15.6 with Java's defaults).
    spark = (SparkSession.builder.master("local[1]").appName("inferframe-http-soak")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    url, cache = a.url, a.cache
    questions = [f"{a.tag} s{i}" for i in range(4)]
    sdf = spark.createDataFrame([(q,) for q in questions], "q string").repartition(2)  # two tasks, one worker
    how = ("mapInPandas", "with_columns")[variant % 2]
    try:
        if how == "mapInPandas":
            def run(batches):  # in the Python worker: a whole inferframe job per batch
                import inferframe as ifr
                from inferframe import col
                from inferframe.functions import prompt

                for pdf in batches:
                    asked = prompt(col("q"), provider="openai", base_url=url, api_key=KEY, model=MODEL, cache_dir=cache)
                    out = ifr.from_pandas(pdf).with_column("a", asked).to_pandas()
                    out["pid"] = os.getpid()
                    out["reqwest"] = "inferframe.providers.http_reqwest" in sys.modules
                    out["err"] = out["a_error"].map(lambda e: None if e is None else str(e))
                    yield out[["q", "a", "err", "pid", "reqwest"]]

            rows = sdf.mapInPandas(run, "q string, a string, err string, pid long, reqwest boolean").collect()
            errors = [r["err"] for r in rows]
            loaded = all(r["reqwest"] for r in rows)
        else:
            from inferframe import col
            from inferframe.functions import prompt
            from inferframe.spark import with_columns

            rows = with_columns(sdf, a=prompt(col("q"), provider="openai", base_url=url, api_key=KEY, model=MODEL,
                                              cache_dir=cache)).collect()
            errors = [r["a_error"] for r in rows]
            loaded = None  # not seen from here
        got = {r["q"]: (r["a"], e) for r, e in zip(rows, errors)}
        _check(questions, [got.get(q, (None,))[0] for q in questions], [got.get(q, (None, None))[1] for q in questions])
        child = {"who": "spark-worker", "code": 0, "error": None, "how": how, "reqwest_loaded": loaded}
    except JobFailed as e:
        child = {"who": "spark-worker", "code": 1, "error": _error(e), "how": how}
    except Exception as e:  # noqa: BLE001 - Spark's error: a worker that died, or a clear Python error in it
        text = _error(e)
        code = "crash" if CRASH_LINES.search(str(e)) or "crashed" in str(e) else 1
        child = {"who": "spark-worker", "code": code, "error": text, "how": how}
    spark.stop()
    return {"children": [child]}


SCENARIO_FUNCS = {"thread": _thread, "exit-open": _exit_open, "fork": _fork, "mp-fork": _mp_fork, "ray": _ray,
                  "spark": _spark}


def _emit_child(a, result: dict) -> None:
    result = {"scenario": a.child, "variant": a.variant,
              "reqwest_loaded": "inferframe.providers.http_reqwest" in sys.modules, **result}
    emit_result(result)
    sys.stderr.flush()


def child_main(a) -> None:
    # Ray and Spark workers unpickle this module's functions by reference: they import it from bench/.
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    result = SCENARIO_FUNCS[a.child](a, a.variant)
    _emit_child(a, result)
