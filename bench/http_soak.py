"""Crash soak of the two HTTP clients (issue 42 item 2): many short processes, none may end by a signal.

pyreqwest (the reqwest client, ``providers/http_reqwest.py``) is native code with its own threads: a
process that ends, forks or runs its jobs on threads that end at the wrong moment can abort or
segfault (issue 42 found three such crashes by hand). This script runs ``--processes`` short
processes (default 500), split evenly between the clients in ``--transports`` (``INFERFRAME_HTTP``,
as a user sets it; ``default``: the variable unset, reqwest where it runs), each a fresh interpreter
that runs small ``prompt()`` jobs against one simulator started here, and mixes these scenarios
round-robin:

  thread     a job on a thread that ends (joined), then another job on another thread, then exit; in turn
             with a job on the main thread first or not, the plans built on the main thread or on the threads
  exit-open  a job, then exit while a client is still open: a job's ``iter_batches()`` not read to its
             end, a provider that sent a request and was never closed, or a job on a daemon thread with
             its requests in flight (a second simulator answers in 20-400 ms); by ``os._exit(0)`` or by a
             plain interpreter exit (the six combinations in turn)
  fork       a job, then ``os.fork()``: the child runs a job (answers, or a clear Python error: both
             fine; a signal or a hang is not), ending by ``os._exit`` or by ``sys.exit`` in turn; the
             parent waits for it and then runs one more job itself
  mp-fork    the same through ``multiprocessing`` with the "fork" start method (a ``Process``, or a
             ``Pool(1)`` in turn)
  ray        a job on the driver, then ``ray.init("local", num_cpus=1)`` (a Ray of its own) and two
             ``@ray.remote(max_calls=1)`` tasks that run a job each (the worker exits after its task);
             Ray's worker logs are read for crashes
  spark      a job on the driver, then a local ``SparkSession`` (``local[1]``) whose Python workers,
             forked by Spark's daemon, run the jobs: a ``mapInPandas`` function running a whole inferframe
             job per batch, or ``inferframe.spark.with_columns`` in turn. Workers run this interpreter
             (``PYSPARK_PYTHON``, as a user of a virtual environment sets it).

ray and spark cost 10-30 s a process: each runs in ``max(transports, N // --heavy-every)`` processes
(none below N = ``--heavy-every``, default 50), spread through the run, alone on the machine; the
other processes run two at a time (``--jobs``). Every job asks unique questions (no answer comes from
the cache) and checks every answer.

It prints a table of the exit codes seen per client and scenario: the processes', and those of the
children they started (a forked child, a ``multiprocessing`` child, a Ray or Spark worker: "crash"
when Ray or Spark reports a worker that died), "hang" for a process killed after ``--timeout`` s,
and the processes whose stderr holds a crash report ("Fatal Python error", "Segmentation fault",
a Rust panic). Target: no process or child ends by a signal (a negative code, 134, 139, "crash"),
none hangs and no crash report, for each client: PASS/FAIL per client, exit status 1 on any FAIL.
Exit code 1 (a Python error) is counted and shown, not a FAIL: for a child it is the allowed outcome
above; a process's own is a scenario that could not run (its stderr is printed). The last line is
``BENCH_RESULT {json}``.

Usage:
    .venv/bin/python bench/http_soak.py                                   # 500 processes, both clients
    .venv/bin/python bench/http_soak.py --processes 12 --scenarios thread,exit-open,fork,mp-fork
    .venv/bin/python bench/http_soak.py --processes 2 --scenarios ray,spark
    .venv/bin/python bench/http_soak.py --transports reqwest --processes 200
    .venv/bin/python bench/http_soak.py --transports reqwest,aiohttp,default --processes 60

What a forked child of a process that built a reqwest client gets (pyreqwest 0.15): building a client
raises RuntimeError("A pyreqwest runtime was initialized before fork() ..."), so a job in the child
fails with a PlanError that names INFERFRAME_HTTP=reqwest and the way out (exit 1 in the table);
with the variable unset it runs on aiohttp after one warning. A client inherited from
the parent answers nothing in the child: jobs build their clients, so only a job forked mid-run meets it.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _soak_scenarios import CHEAP, CRASH_LINES, HEAVY, SCENARIOS, child_main  # noqa: E402
from _util import RESULT_PREFIX, emit_result, table  # noqa: E402

TRANSPORTS = ("reqwest", "aiohttp")
CHOICES = TRANSPORTS + ("default",)  # "default": INFERFRAME_HTTP unset
# --------------------------------------------------------------------------- the parent


def plan(n: int, transports: list[str], scenarios: list[str], heavy_every: int) -> list[tuple[str, str]]:
    """(transport, scenario) of each process, in the order they run: clients alternate, cheap scenarios in turn,
    each heavy one in max(len(transports), n // heavy_every) processes spread evenly (none below n = heavy_every).

    Example:
        >>> [f"{t[0]}:{s}" for t, s in plan(6, ["reqwest", "aiohttp"], ["thread", "fork"], 50)]
        ['r:thread', 'a:thread', 'r:fork', 'a:fork', 'r:thread', 'a:thread']
        >>> [s for _, s in plan(100, ["reqwest", "aiohttp"], ["thread", "ray"], 50)].count("ray")
        2
        >>> plan(2, ["reqwest", "aiohttp"], ["ray", "spark"], 50)
        [('reqwest', 'ray'), ('reqwest', 'spark')]
    """
    cheap = [s for s in scenarios if s in CHEAP]
    heavy = [s for s in scenarios if s in HEAVY]
    T = len(transports)
    if not cheap:  # only heavy ones asked for: each in turn, on the first client first
        return [(transports[(i // len(heavy)) % T], heavy[i % len(heavy)]) for i in range(n)]
    per_heavy = max(T, n // heavy_every) if heavy and n >= heavy_every else 0
    slots: dict[int, str] = {}
    total_heavy = per_heavy * len(heavy)
    for j in range(total_heavy):  # heavy process j at an even place in the run; clients alternate within a scenario
        slots[(j * n) // total_heavy + n // (2 * total_heavy)] = heavy[j % len(heavy)]
    out, k, seen = [], 0, collections.Counter()
    for i in range(n):
        scen = slots.get(i)
        if scen is None:
            scen = cheap[(k // T) % len(cheap)]
            transport = transports[k % T]
            k += 1
        else:
            transport = transports[seen[scen] % T]
        seen[scen] += 1
        out.append((transport, scen))
    return out


def is_signal(code) -> bool:
    """A process that ended by a signal: a negative code, 134 (abort) or 139 (segfault) through a shell, a "crash"."""
    return code == "crash" or (isinstance(code, int) and (code < 0 or code in (134, 139)))


def run_one(i: int, transport: str, scenario: str, variant: int, urls: tuple[str, str], root: Path,
            timeout: float) -> dict:
    cache = root / f"p{i}"
    cache.mkdir(mode=0o700)  # private, as inferframe asks of a cache that holds answers
    tag = f"{scenario}-{i}-{uuid.uuid4().hex[:8]}"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", scenario, "--variant", str(variant),
           "--url", urls[0], "--slow-url", urls[1], "--cache", str(cache), "--tag", tag]
    env = {k: v for k, v in os.environ.items() if k != "INFERFRAME_HTTP"}
    if transport != "default":  # "default": unset, as most users run (reqwest where it works)
        env["INFERFRAME_HTTP"] = transport
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)  # its own group: a hung one is killed with all it started
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        code = "hang"
    seconds = time.monotonic() - start
    shutil.rmtree(cache, ignore_errors=True)
    result = None
    for line in out.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
    crash_lines = [line for line in err.splitlines() + out.splitlines() if CRASH_LINES.search(line)]
    return {"i": i, "transport": transport, "scenario": scenario, "variant": variant, "code": code, "result": result,
            "seconds": seconds, "stderr": err, "crash_lines": crash_lines}


def _last_error_line(stderr: str) -> str | None:
    lines = [line.strip() for line in stderr.splitlines() if re.match(r"^[\w.]+(Error|Exception): ", line.strip())]
    return lines[-1][:400] if lines else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=500, help="processes in all, split evenly between the clients")
    ap.add_argument("--transports", default=",".join(TRANSPORTS),
                    help="INFERFRAME_HTTP values, comma separated (default: the variable unset)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"subset of {','.join(SCENARIOS)}")
    ap.add_argument("--heavy-every", type=int, default=50, help="one ray and one spark process per this many")
    ap.add_argument("--jobs", type=int, default=2, help="processes at once (ray and spark run alone)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds per process (ray and spark: twice this)")
    ap.add_argument("--child", choices=SCENARIOS, help=argparse.SUPPRESS)
    ap.add_argument("--variant", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--slow-url", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return

    transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    bad = [t for t in transports if t not in CHOICES] + [s for s in scenarios if s not in SCENARIOS]
    if bad or not transports or not scenarios or args.processes < 1 or args.jobs < 1:
        raise SystemExit(f"unknown or missing: {bad}; clients: {CHOICES}, scenarios: {SCENARIOS}")
    todo = plan(args.processes, transports, scenarios, args.heavy_every)
    variants = collections.Counter()
    tasks = []
    for i, (transport, scenario) in enumerate(todo):
        tasks.append((i, transport, scenario, variants[transport, scenario]))
        variants[transport, scenario] += 1

    from inferframe.simulator import Simulator, SimulatorConfig

    shares = ", ".join(f"{s} x{n}" for s, n in collections.Counter(s for _, s in todo).items())
    print(f"http_soak: {len(tasks)} processes ({shares}), clients {', '.join(transports)}, {args.jobs} at once; "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
    results: list[dict] = []
    lock = threading.Lock()
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="inferframe-soak-"))

    said_before: set = set()

    def record(r: dict) -> None:
        with lock:
            results.append(r)
            done = len(results)
            children = (r["result"] or {}).get("children", [])
            for c in children:  # a child's clear error without words of its own: the last error line of stderr
                if c["code"] == 1 and not c.get("error"):
                    c["error"] = _last_error_line(r["stderr"])
            if r["code"] != 0 or r["crash_lines"] or any(is_signal(c["code"]) or c["code"] == "hang" for c in children):
                tail = "\n".join("      " + s for s in r["stderr"].strip().splitlines()[-12:])
                print(f"  ! process {r['i']} ({r['transport']}, {r['scenario']}, variant {r['variant']}): exit "
                      f"{r['code']}, children {[(c['who'], c['code'], c.get('error')) for c in children]}\n{tail}",
                      flush=True)
            for c in children:  # an allowed outcome: each different clear error shown once
                key = (r["transport"], r["scenario"], c["who"], c.get("error"))
                if c["code"] == 1 and key not in said_before:
                    said_before.add(key)
                    print(f"  clear error ({r['transport']}, {r['scenario']}, {c['who']}; shown once): {c['error']}",
                          flush=True)
            if done % 50 == 0 or done == len(tasks):
                deaths = sum(is_signal(x["code"]) for x in results)
                print(f"  {done}/{len(tasks)} processes, {deaths} ended by a signal, "
                      f"{time.monotonic() - started:.0f} s", flush=True)

    slow = SimulatorConfig(latency_dist="uniform", latency_lo_ms=20, latency_hi_ms=400)  # exit-open's in-flight jobs
    with Simulator(SimulatorConfig()) as sim, Simulator(slow) as slow_sim, ThreadPoolExecutor(args.jobs) as pool:
        urls = (sim.base_url, slow_sim.base_url)
        pending = []
        for i, transport, scenario, variant in tasks:
            heavy = scenario in HEAVY
            timeout = args.timeout * (2 if heavy else 1)
            if heavy:  # alone: Ray or Spark with another process on 2 cores is where timeouts come from
                wait(pending)
                pending = []
            fut = pool.submit(run_one, i, transport, scenario, variant, urls, root, timeout)
            fut.add_done_callback(lambda f: record(f.result()))
            pending.append(fut)
            if heavy:
                wait(pending)
                pending = []
            pending = [f for f in pending if not f.done()]
            while len(pending) >= args.jobs:
                wait(pending, return_when="FIRST_COMPLETED")
                pending = [f for f in pending if not f.done()]
        wait(pending)
    shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - started
    print(report(results, transports, scenarios, elapsed))
    summary = summarize(results, transports)
    emit_result({"processes": len(results), "seconds": round(elapsed, 1), "transports": summary,
                 "codes": {f"{t}/{s}/{w}": dict(c) for (t, s, w), c in codes_by(results).items()}})
    sys.exit(1 if any(v["verdict"] == "FAIL" for v in summary.values()) else 0)


def codes_by(results: list[dict]) -> dict:
    """(transport, scenario, who) -> Counter of exit codes (as strings), processes and their children."""
    out: dict = collections.defaultdict(collections.Counter)
    for r in sorted(results, key=lambda r: r["i"]):
        out[r["transport"], r["scenario"], "process"][str(r["code"])] += 1
        for c in (r["result"] or {}).get("children", ()):
            out[r["transport"], r["scenario"], c["who"]][str(c["code"])] += 1
    return out


def summarize(results: list[dict], transports: list[str]) -> dict:
    out = {}
    for t in transports:
        mine = [r for r in results if r["transport"] == t]
        children = [c for r in mine for c in (r["result"] or {}).get("children", ())]
        codes = [r["code"] for r in mine] + [c["code"] for c in children]
        deaths = sum(is_signal(c) for c in codes)
        hangs = sum(c == "hang" for c in codes)
        crash_reports = sum(bool(r["crash_lines"]) for r in mine)
        not_loaded = sum(1 for r in mine if r["result"] and r["result"]["reqwest_loaded"] != (t != "aiohttp"))
        not_loaded += sum(1 for c in children if c.get("reqwest_loaded") not in (None, t != "aiohttp"))
        verdict = "FAIL" if deaths or hangs or crash_reports or not_loaded else "PASS" if mine else "none run"
        out[t] = {"processes": len(mine), "children": len(children), "signal_deaths": deaths, "hangs": hangs,
                  "crash_reports": crash_reports, "wrong_client": not_loaded,
                  "failed_processes": sum(1 for r in mine if r["code"] == 1),
                  "clear_errors": sum(1 for c in children if c["code"] == 1), "verdict": verdict}
    return out


def report(results: list[dict], transports: list[str], scenarios: list[str], elapsed: float) -> str:
    rows = []
    by = codes_by(results)
    seconds = collections.defaultdict(list)
    crash_reports = collections.Counter()
    for r in results:
        seconds[r["transport"], r["scenario"]].append(r["seconds"])
        crash_reports[r["transport"], r["scenario"]] += bool(r["crash_lines"])
    for t in transports:
        for s in scenarios:
            for (tt, ss, who), counts in by.items():
                if (tt, ss) != (t, s):
                    continue
                n = sum(counts.values())
                codes = "  ".join(f"{code}: {k}" for code, k in sorted(counts.items(), key=lambda x: _order(x[0])))
                deaths = sum(k for code, k in counts.items() if is_signal(_code(code)))
                hangs = counts.get("hang", 0)
                secs = seconds[t, s]
                rows.append([t, s, who, n, codes, deaths, hangs,
                             crash_reports[t, s] if who == "process" else "",
                             f"{sum(secs) / len(secs):.1f}" if who == "process" and secs else ""])
    out = [table(["client", "scenario", "who", "runs", "exit codes (code: count)", "by signal", "hung", "crash reports",
                  "s/process"], rows, aligns="lllrlrrrr")]
    summary = summarize(results, transports)
    for t, v in summary.items():
        out.append(f"{t}: {v['processes']} processes + {v['children']} children, "
                   f"{v['signal_deaths']} ended by a signal, {v['hangs']} hung, "
                   f"{v['crash_reports']} with a crash report, {v['failed_processes']} processes and "
                   f"{v['clear_errors']} children ended by a Python error (exit 1), "
                   f"{v['wrong_client']} on the wrong client: {v['verdict']} "
                   f"(target: 0 by a signal, 0 hung, 0 crash reports)")
    out.append(f"{len(results)} processes in {elapsed:.0f} s")
    return "\n".join(out)


def _code(text: str):
    try:
        return int(text)
    except ValueError:
        return text


def _order(text: str):
    code = _code(text)
    return (0, code) if isinstance(code, int) else (1, 0)


if __name__ == "__main__":
    main()
