"""Does the in-flight bound follow the rate limit? prompt() with default settings at a long latency.

At 12,000 RPM (200 requests/s) and 1 s latency a job needs about 200 requests in flight
(Little's law: rate x latency); a fixed bound of 64 caps it at about 64 requests/s, a
third of the limit. The simulator (its own process) answers after a lognormal latency (median
``--latency-ms``, sigma 0.3) and limits the requests as one of three servers (``--servers``):

  bucket1s   a bucket of one second of the limit, refilled continuously, as hosted APIs do;
  quantized  headers of a per-minute bucket, enforced by a bucket of one second (OpenAI: "60,000
             requests/minute may be enforced as 1,000 requests/second");
  window     a fixed per-minute window: the minute's budget at once, nothing more until it ends;
  independent  the independent OpenAI-compatible test server of issue 36: a bucket of one second of
             the limit refilled continuously, ``x-ratelimit-limit-requests`` and
             ``x-ratelimit-remaining-requests`` but no ``x-ratelimit-reset-*``, 429s with ``retry-after``
             and ``retry-after-ms``, and a constant latency (``--latency-ms``) instead of a spread.

inferframe runs in a fresh subprocess with default settings (no max_concurrency):

  learned  the limits come from the x-ratelimit-* headers;
  user     prompt(..., rpm=RPM).

Figures: successes against the limit over the whole run ("vs possible": successes /
(one second's bucket + limit x run seconds); for the window, the shortest run it allows (the rows
beyond the first window answered one median latency after the minute ends) / the run's length;
target >= ``--target``, 93%) and in the steady state (5 s after
the start to 5 s before the end, sampled from the server every 0.25 s), the server's peak of
requests in flight, and 429s. Rows are sized to about ``--seconds`` (default 60) at the limit:
the run's fixed costs (learning the limits takes one round trip, and the run ends with the
slowest of the last requests, about 2 s at this latency's spread) weigh less in a longer run.

The run's time starts when ``to_arrow()`` of the job starts, in a child that has already imported
aiohttp and run one job without AI calls (the executor's first start): what is measured is how the
job uses the limit, not Python's imports (about 0.3-0.6 s of a 25 s run on this machine).

The simulator always comes from this checkout (``src/`` next to ``bench/``); the client is
whatever ``inferframe`` the interpreter imports (``PYTHONPATH=<other checkout>/src`` measures
another version against the same server).

Usage:
    .venv/bin/python bench/concurrency_follows_limit.py                   # about 7 min (2 runs of 3 servers)
    .venv/bin/python bench/concurrency_follows_limit.py --rpm 30000 --seconds 10
    .venv/bin/python bench/concurrency_follows_limit.py --servers bucket1s,independent --timeline   # per second
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ["INFERFRAME_CACHE"] = "off"  # measure the server's limit, not the response cache

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _sim_util import SimSampler, emit_result, machine_line, run_child, table

MODEL = "gpt-5-mini"
SERVERS = {"bucket1s": {"ratelimit_burst_s": 1.0}, "window": {"ratelimit_mode": "window"},
           "quantized": {"ratelimit_mode": "quantized", "ratelimit_quantum_s": 1.0},
           "independent": {"ratelimit_burst_s": 1.0, "ratelimit_headers": "no_reset", "latency_dist": "constant"}}


def texts(n: int) -> list[str]:
    return [f"Row {i:07d}: the parcel arrived on time and works well. Sentiment?" for i in range(n)]


def child_main(args: argparse.Namespace) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt

    import aiohttp  # noqa: F401  (imported by the first request otherwise: startup, not rate limiting)

    opts = {"rpm": args.rpm} if args.mode == "user" else {}
    ifr.from_pydict({"x": [1]}).to_arrow(progress=False)  # the executor's first start, outside the timed run
    df = ifr.from_pydict({"q": texts(args.rows)})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=args.url, api_key="sk-bench", model=MODEL,
                                    use_chat_completions=True, max_tokens=64, **opts))
    t0 = time.monotonic()
    out = df.to_arrow(progress=False)
    t1 = time.monotonic()
    errs = out.column("a_error").to_pylist()
    emit_result({"t0": t0, "t1": t1, "failed": sum(e is not None for e in errs),
                 "error_kinds": dict(collections.Counter(f"{e['kind']}/{e['status']}" for e in errs if e))})


def run_variant(server: str, mode: str, args: argparse.Namespace) -> dict:
    from inferframe.simulator import Simulator, SimulatorConfig

    rate = args.rpm / 60.0
    bucket = max(1.0, rate)  # one second of budget
    rows = int(bucket + rate * args.seconds)
    config = {"latency_dist": "lognormal", "latency_sigma": 0.3, **SERVERS[server]}
    proc = Simulator.spawn(SimulatorConfig(rpm=args.rpm, latency_ms=args.latency_ms, seed=1, **config))
    try:
        sampler = SimSampler(proc.url, interval=0.25).start()
        res = run_child([__file__, "--child", "--mode", mode, "--url", proc.base_url, "--rows", str(rows),
                         "--rpm", str(args.rpm)], timeout=rows / 30 + 180)
        sampler.stop()
        st = proc.stats()
    finally:
        proc.close()
    duration = res["t1"] - res["t0"]
    ta, tb = res["t0"] + 5.0, res["t1"] - 5.0
    steady = (sampler.count_at(tb) - sampler.count_at(ta)) / (tb - ta) if tb - ta >= 5 else float("nan")
    n200 = st["by_status"].get("200", 0)
    n429 = st["by_status"].get("429", 0)
    if server == "window":  # the first window's rows at once, the rest one latency after the minute ends
        windows = math.ceil(rows / args.rpm)
        vs_possible = min(1.0, (60.0 * (windows - 1) + args.latency_ms / 1000) / duration)
    else:
        vs_possible = n200 / (bucket + rate * duration)
    if args.timeline:  # per second of the run: requests arrived, answered 200, 429s, in flight (the server's)
        print(f"    timeline {server}/{mode} (s: arrived 200s 429s in-flight)")
        for s in range(int(math.ceil(duration)) + 1):
            t = res["t0"] + s
            print(f"      {s:3d}: {sampler.count_at(t + 1, 4) - sampler.count_at(t, 4):6.0f} "
                  f"{sampler.count_at(t + 1) - sampler.count_at(t):6.0f} "
                  f"{sampler.count_at(t + 1, 3) - sampler.count_at(t, 3):5.0f} "
                  f"{min((x[1] for x in sampler.samples if t <= x[0] < t + 1), default=0):5d}")
    return {"server": server, "mode": mode, "rows": rows, "duration": duration, "n200": n200, "n429": n429,
            "total": st["total_requests"], "failed": res["failed"], "error_kinds": res["error_kinds"],
            "peak": st.get("max_in_flight", 0), "rate": rate, "vs_possible": vs_possible, "steady": steady}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpm", type=int, default=12000)
    ap.add_argument("--latency-ms", type=float, default=1000, help="median of the simulator's lognormal latency")
    ap.add_argument("--seconds", type=float, default=60, help="run length at the limit")
    ap.add_argument("--modes", default="learned,user")
    ap.add_argument("--servers", default="bucket1s,quantized,window,independent",
                    help="bucket1s, quantized, window and/or independent")
    ap.add_argument("--target", type=float, default=93.0, help="percent of the limit each run must reach (issue 36: 93)")
    ap.add_argument("--timeline", action="store_true", help="print each run's server counts per second")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return
    sys.path.insert(0, str(HERE.parent / "src"))  # this checkout's simulator, whichever client runs
    client = subprocess.run([sys.executable, "-c", "import inferframe, os; print(os.path.dirname(inferframe.__file__))"],
                            capture_output=True, text=True, timeout=60).stdout.strip()
    servers = [m.strip() for m in args.servers.split(",") if m.strip()]
    print(f"concurrency_follows_limit: prompt() with default settings against a simulator limited to {args.rpm:,} RPM "
          f"({', '.join(servers)}), lognormal latency median {args.latency_ms:g} ms")
    print(f"  client: {client}")
    print(f"  {machine_line()}")
    results = []
    for server in servers:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            print(f"  running {server}, {mode} ...", flush=True)
            results.append(run_variant(server, mode, args))
            print(f"    {results[-1]['rows']:,} rows in {results[-1]['duration']:.1f} s", flush=True)
    need = args.rpm / 60.0 * args.latency_ms / 1000.0
    print()
    print(f"Little's law: {args.rpm / 60:,.0f} requests/s x {args.latency_ms / 1000:g} s = about {need:,.0f} in flight "
          f"(target: >= {args.target:g}% of the limit, 0 failed rows)")
    rows, ok_all = [], True
    for r in results:
        pct = 100 * r["vs_possible"]
        ok = pct >= args.target and r["failed"] == 0
        ok_all &= ok
        rows.append([r["server"], r["mode"], f"{r['rows']:,}", f"{r['failed']:,}", f"{r['duration']:.1f}",
                     f"{60 * r['n200'] / r['duration']:,.0f}", f"{pct:.1f}%", f"{60 * r['steady']:,.0f}",
                     f"{100 * r['steady'] / r['rate']:.1f}%", r["peak"], f"{r['n429']:,}", "PASS" if ok else "FAIL"])
    print(table(["server", "limits", "rows", "failed", "run s", "req/min", "vs possible", "steady req/min",
                 "steady vs limit", "server peak in flight", "429s", "target"], rows, "llrrrrrrrrrl"))
    print("  vs possible: successes / (one second's bucket + limit x run seconds); for the window, the shortest run")
    print("  it allows / the run's length. steady: 5 s after the start to 5 s before the end.")
    print("PASS" if ok_all else "FAIL", "concurrency_follows_limit")


if __name__ == "__main__":
    main()
