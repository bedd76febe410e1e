"""Throughput of prompt() under faults: fault-free vs a fault mix at 200 ms, and 429s at a genuine limit.

One run measures, against the OpenAI simulator (its own process, ``Simulator.spawn``), with
``prompt(..., max_concurrency=64)`` in a fresh Python subprocess per run:

  fault-free   ``--rows`` rows (default 2,000) at a constant ``--latency-ms`` (200 ms): the
               ideal is 64 / 0.2 s = 320 rows/s.
  fault mix    the same rows against a server that answers 5% of attempts with a 5xx (2.5% 500,
               2.5% 503), 1% with a reset connection, 1% with a malformed 200 body, and 3% of
               the rows with one 429 first (a fail rule on a marker in those rows' text; the
               simulator's fail-rule 429 says Retry-After 1 s and carries no x-ratelimit
               headers: a 429 with budget left, as an overloaded proxy or a per-key
               concurrency cap sends). Every row must still be answered.
  limit        ``--limit-rows`` rows (default 500) against a genuine per-second limit:
               ``--rpm`` (1,200) in a bucket that holds one second of it, lognormal latency
               (median 100 ms), as bench/rate_limit_efficiency.py's ``bucket1s``; the limit is
               learned from the x-ratelimit-* headers. Target: < 1% of requests answered 429.
  limit+mix    the same limit with the fault mix on top: the injected 429s come with budget
               left in their headers, and the limit's own 429s (counted apart by the
               simulator) must stay under 1%.

The fault-free and fault-mix runs repeat ``--repeat`` times (default 5), rounds interleaved, and
the table shows each one's median run; the target is mix/fault-free >= 70% (medians), every row
answered, and the limit's 429 share < 1%. While each job runs, the child renders the progress
line every 0.25 s (``observe.progress.render_line``) and counts the lines that showed
"0 in flight" with rows left and nothing said about why (the issue's "looks like a hang").

Like bench/rate_limit_efficiency.py, the client is whatever ``inferframe`` the interpreter
imports, so ``PYTHONPATH=/path/to/other/checkout/src`` measures another version of the client
against this checkout's simulator (the header names it).

Usage:
    .venv/bin/python bench/fault_throughput.py                 # about 3 min (about 9 min before issue 15)
    .venv/bin/python bench/fault_throughput.py --rows 1500 --repeat 1
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

# Throughput is measured against the server: the response cache must not answer instead.
os.environ["INFERFRAME_CACHE"] = "off"

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _sim_util import SimSampler, emit_result, machine_line, run_child, table

MODEL = "gpt-5-mini"
API_KEY = "sk-bench"
MARK = "[RL429]"
MIX = {"p_500": 0.025, "p_503": 0.025, "p_connection_reset": 0.01, "p_malformed": 0.01}
SHARE_429 = 0.03


def texts(n: int) -> list[str]:
    """The rows; 3% of them (seeded, spread out) carry the marker the fault mix's 429 rule matches."""
    marked = set(random.Random(15).sample(range(n), round(SHARE_429 * n)))
    return [f"Row {i:07d}: the parcel arrived on time and works well. Sentiment?" + (f" {MARK}" if i in marked else "")
            for i in range(n)]


# --------------------------------------------------------------------------- child


def child_main(args: argparse.Namespace) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt
    from inferframe.observe import last_run
    from inferframe.observe.progress import render_line
    from inferframe.observe.stats import CURRENT_RUN

    rows = texts(args.rows)
    opts = {"max_concurrency": args.concurrency} if args.concurrency else {}
    df = ifr.from_pydict({"q": rows})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=args.url, api_key=API_KEY, model=MODEL,
                                    use_chat_completions=True, max_tokens=48, **opts))
    lines: list[str] = []
    silent: list[str] = []
    stop = threading.Event()

    def sample() -> None:  # what the progress line would show, four times a second
        while not stop.wait(0.25):
            for s in CURRENT_RUN.runs():
                lines.append(render_line(s, len(rows)))
                # From the first answer on (before it the plan is built and the first request sent).
                hung = s.in_flight == 0 and 0 < s.rows_done < len(rows) and "paused" not in lines[-1] \
                    and "retrying" not in lines[-1]
                if hung:
                    silent.append(lines[-1])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    out = df.to_arrow(progress=False)
    seconds = time.perf_counter() - t0
    stop.set()
    sampler.join()
    vals = out.column("a").to_pylist()
    errs = out.column("a_error").to_pylist()
    want = [t[:11] for t in rows]
    answered = sum(1 for v, w in zip(vals, want) if v is not None and v.removeprefix("sim answer: ")[:11] == w)
    rep = last_run()
    waits = [ln for ln in lines if "paused" in ln or "retrying" in ln]
    emit_result({"seconds": seconds, "rows": len(vals), "answered": answered,
                 "error_kinds": dict(collections.Counter(f"{e['kind']}/{e['status']}" for e in errs if e)),
                 "report": rep[0] if rep else {}, "progress_samples": len(lines), "silent_zero": len(silent),
                 "silent_example": silent[len(silent) // 2] if silent else "",
                 "wait_example": waits[len(waits) // 2] if waits else ""})


# --------------------------------------------------------------------------- parent


def run_case(case: str, args: argparse.Namespace) -> dict:
    from inferframe.simulator import FailRule, Simulator, SimulatorConfig

    mix = dict(MIX, fail_rules=[FailRule(match=MARK, status=429, times=1)])
    if case in ("fault-free", "fault mix"):
        cfg = SimulatorConfig(latency_ms=args.latency_ms, seed=1, **(mix if case == "fault mix" else {}))
        rows = args.rows
    else:
        cfg = SimulatorConfig(rpm=args.rpm, ratelimit_burst_s=1.0, latency_dist="lognormal", latency_ms=100,
                              latency_sigma=0.3, seed=1, **(mix if case == "limit+mix" else {}))
        rows = args.limit_rows
    proc = Simulator.spawn(cfg)
    try:
        sampler = SimSampler(proc.url, interval=0.25).start()
        res = run_child([__file__, "--child", "--url", proc.base_url, "--rows", str(rows),
                         "--concurrency", str(args.concurrency)], timeout=600)
        sampler.stop()
        st = proc.stats()
    finally:
        proc.close()
    total = st["total_requests"]
    n429 = st["by_status"].get("429", 0)
    res.update(case=case, requests=total, n429=n429, limit429=st["rate_limited"], rule429=st["rule_hits"],
               faults=st["faults_injected"], mean_in_flight=sampler.mean_in_flight(),
               rows_per_s=res["rows"] / res["seconds"])
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2000, help="rows of the fault-free and fault-mix runs")
    ap.add_argument("--latency-ms", type=float, default=200, help="constant latency of those runs")
    ap.add_argument("--concurrency", type=int, default=64, help="max_concurrency passed to prompt()")
    ap.add_argument("--repeat", type=int, default=5, help="fault-free and fault-mix runs each (medians shown)")
    ap.add_argument("--rpm", type=int, default=1200, help="the genuine limit (one second of it in the bucket)")
    ap.add_argument("--limit-rows", type=int, default=500, help="rows against the genuine limit")
    ap.add_argument("--cases", default="fault-free,fault mix,limit,limit+mix")
    ap.add_argument("--max-load", type=float, default=1.5,
                    help="wait until the 1-minute load average is below this before starting")
    ap.add_argument("--max-wait", type=float, default=600, help="seconds to wait for that; then exit without running")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return
    sys.path.insert(0, str(HERE.parent / "src"))  # the simulator is this checkout's whichever client runs
    import subprocess

    origin = subprocess.run([sys.executable, "-c", "import inferframe, os; print(os.path.dirname(inferframe.__file__))"],
                            capture_output=True, text=True, timeout=60).stdout.strip()
    waited = time.monotonic()
    while os.getloadavg()[0] >= args.max_load:  # other work on a shared machine moves the figures by tens of percent
        if time.monotonic() - waited > args.max_wait:
            raise SystemExit(f"load average {os.getloadavg()[0]:.2f} stayed >= {args.max_load:g} for "
                             f"{args.max_wait:g} s: not run")
        time.sleep(15)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    ideal = args.concurrency / (args.latency_ms / 1000)
    print(f"fault_throughput: prompt(max_concurrency={args.concurrency}) against the simulator; fault mix = "
          f"5% 5xx, 1% resets, 1% malformed, 3% of rows one 429 (Retry-After 1 s, no x-ratelimit headers)")
    print(f"  client: {origin}")
    print(f"  {machine_line()} (at the start{'; waited for a load below %g' % args.max_load if time.monotonic() - waited > 1 else ''})")
    runs: dict[str, list[dict]] = collections.defaultdict(list)
    for rep in range(args.repeat):
        for case in ("fault-free", "fault mix"):
            if case in cases:
                print(f"  round {rep + 1}: {case}, {args.rows:,} rows at {args.latency_ms:g} ms ...", flush=True)
                r = run_case(case, args)
                runs[case].append(r)
                print(f"    {r['rows_per_s']:,.0f} rows/s, {r['answered']:,}/{r['rows']:,} answered", flush=True)
    for case in ("limit", "limit+mix"):
        if case in cases:
            print(f"  {case}: {args.limit_rows:,} rows at {args.rpm:,} RPM (1 s bucket) ...", flush=True)
            runs[case].append(run_case(case, args))
    print(f"  {machine_line()} (after the runs)")

    def median_run(case: str) -> dict:
        rs = sorted(runs[case], key=lambda r: r["rows_per_s"])
        return rs[len(rs) // 2]

    print()
    print(f"{args.rows:,} rows at {args.latency_ms:g} ms, {args.concurrency} in flight (ideal {ideal:,.0f} rows/s); "
          f"limit rows: {args.limit_rows:,} at {args.rpm:,} RPM")
    rows = []
    for case in ("fault-free", "fault mix", "limit", "limit+mix"):
        if not runs.get(case):
            continue
        r = median_run(case)
        rep = r["report"]
        rows.append([case, f"{r['seconds']:.2f}", f"{r['rows_per_s']:,.0f}",
                     ", ".join(f"{x['rows_per_s']:,.0f}" for x in runs[case]),
                     f"{100 * r['rows_per_s'] / ideal:.0f}%" if case in ("fault-free", "fault mix") else "-",
                     "yes" if r["answered"] == r["rows"] else f"NO ({r['answered']:,}/{r['rows']:,})",
                     f"{r['requests']:,}", f"{r['faults']:,}", f"{r['n429']:,}", f"{100 * r['n429'] / r['requests']:.1f}%",
                     f"{r['limit429']:,}", f"{100 * r['limit429'] / r['requests']:.2f}%",
                     rep.get("retries", ""), rep.get("pauses", "-"), f"{r['mean_in_flight']:.0f}",
                     f"{r['silent_zero']}/{r['progress_samples']}"])
    print(table(["case", "seconds", "rows/s", "runs rows/s", "vs ideal", "all answered", "requests", "5xx/reset/bad",
                 "429s", "429 %", "limit 429s", "limit 429 %", "retries", "pauses", "mean in flight",
                 "'0 in flight' lines"], rows, "lrrrrlrrrrrrrrrr"))
    print("  429s: every 429 the server sent; limit 429s: the ones its rate limiter sent (the rest are the mix's);"
          "\n  pauses: 429s that paused admission for every row (last_run()['pauses']; '-': the client has no such count)."
          "\n  '0 in flight' lines: progress lines that showed 0 in flight with rows left (after the first answer) and"
          " no reason, of all sampled.")
    verdict = []
    if runs.get("fault-free") and runs.get("fault mix"):
        free, mix = median_run("fault-free"), median_run("fault mix")
        ratio = mix["rows_per_s"] / free["rows_per_s"]
        all_ok = all(r["answered"] == r["rows"] for c in ("fault-free", "fault mix") for r in runs[c])
        print(f"  fault mix / fault-free = {mix['rows_per_s']:,.0f} / {free['rows_per_s']:,.0f} = {100 * ratio:.0f}% "
              f"(medians; target >= 70%) -> {'PASS' if ratio >= 0.7 else 'FAIL'}; every row answered in every run: "
              f"{'yes' if all_ok else 'NO'}")
        verdict.append(ratio >= 0.7 and all_ok)
        for case in ("fault mix",):
            r = median_run(case)
            if r["silent_example"]:
                print(f"  a '0 in flight' line ({case}): {r['silent_example']}")
            if r["wait_example"]:
                print(f"  a waiting line ({case}): {r['wait_example']}")
    for case in ("limit", "limit+mix"):
        if runs.get(case):
            r = runs[case][0]
            share = 100 * r["limit429"] / r["requests"]
            ok = share < 1 and r["answered"] == r["rows"]
            print(f"  {case}: the limit's 429s {r['limit429']:,} of {r['requests']:,} requests = {share:.2f}% "
                  f"(target < 1%), every row answered: {'yes' if r['answered'] == r['rows'] else 'NO'} "
                  f"-> {'PASS' if ok else 'FAIL'}")
            verdict.append(ok)
    print(f"  overall: {'PASS' if verdict and all(verdict) else 'FAIL'}")


if __name__ == "__main__":
    main()
