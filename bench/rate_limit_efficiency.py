"""Rate-limit efficiency of prompt(): throughput against a rate limit, 429s at start-up and over the run.

The simulator (its own process) enforces ``--rpm`` requests (and ``--tpm`` tokens,
0 = none) per minute per model with OpenAI's accounting: a request costs its prompt
tokens plus ``max_tokens``, a denied request costs nothing and gets a 429 with
Retry-After and x-ratelimit-* headers, and every answer carries
x-ratelimit-limit/remaining/reset headers. Two kinds of server (``--servers``):

  bucket1s  refills continuously and holds one second of budget, as hosted APIs do
            (simulator ``ratelimit_burst_s=1``). ``--rows`` rows (default 500: about 25 s
            at 1,200 RPM). Targets: < 1% of requests answered 429, and at least 97% of
            what the limit allows in the run's time (one bucket at once, then the rate).
  window    a fixed per-minute window (``ratelimit_mode="window"``): the whole minute's
            budget may go at once, nothing more until the minute ends. 1.5 windows of
            rows. Shows whether the job uses the burst (time until 95% of the first
            window's budget is answered; about one minute when it is paced instead)
            without a storm of 429s when the window runs out (target < 1%).
  quantized per-minute headers enforced per second (``ratelimit_mode="quantized"``): the headers
            say what is left of the minute (``remaining 1187`` of 1,200) while a bucket of
            one second of the rate admits, as OpenAI's guide warns ("60,000 requests/minute
            may be enforced as 1,000 requests/second"). Targets as for bucket1s.

For each server, inferframe runs in a fresh subprocess against a freshly spawned simulator:

  learned  prompt(...) with default settings: not told the limits; it learns them from the
           x-ratelimit-* headers (and 429s).
  user     prompt(..., rpm=RPM[, tpm=TPM]): limits passed in.

``--concurrency N`` passes max_concurrency=N (default: not passed, the default settings).

The run's time starts when ``to_arrow()`` of the job starts, in a child that has already imported
aiohttp and run one job without AI calls (the executor's first start): what is measured is how the
job uses the limit, not Python's imports (about 0.3-0.6 s of a 25 s run on this machine).

The simulator always comes from this checkout (``src/`` next to ``bench/``); the client
is whatever ``inferframe`` the interpreter imports, so
``PYTHONPATH=/path/to/other/checkout/src python bench/rate_limit_efficiency.py`` measures
another version of the client against the same server (the header line names it).

Usage:
    .venv/bin/python bench/rate_limit_efficiency.py                        # about 5 min (three servers)
    .venv/bin/python bench/rate_limit_efficiency.py --servers bucket1s --rows 1000
    .venv/bin/python bench/rate_limit_efficiency.py --tpm 60000 --servers bucket1s   # make the TPM bind
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import sys
import time
import urllib.request
from pathlib import Path

# Throughput is measured against the server: the response cache must not answer instead.
os.environ["INFERFRAME_CACHE"] = "off"

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _sim_util import SimSampler, emit_result, machine_line, run_child, table

MODEL = "gpt-5-mini"
API_KEY = "sk-bench"
SERVERS = {"bucket1s": {"ratelimit_burst_s": 1.0}, "window": {"ratelimit_mode": "window"},
           "quantized": {"ratelimit_mode": "quantized", "ratelimit_quantum_s": 1.0}}
PER_SECOND = ("bucket1s", "quantized")  # servers that let one second of the budget go at once


def texts(n: int) -> list[str]:
    # Same length for every row, so every request has the same cost.
    return [f"Row {i:07d}: the parcel arrived on time and works well. Sentiment?" for i in range(n)]


# --------------------------------------------------------------------------- child


def child_main(args: argparse.Namespace) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt
    from inferframe.observe import last_run

    opts = {}
    if args.mode == "user":
        opts["rpm"] = args.rpm
        if args.tpm:
            opts["tpm"] = args.tpm
    if args.concurrency:
        opts["max_concurrency"] = args.concurrency
    import aiohttp  # noqa: F401  (imported by the first request otherwise: startup, not rate limiting)

    ifr.from_pydict({"x": [1]}).to_arrow(progress=False)  # the executor's first start, outside the timed run
    df = ifr.from_pydict({"q": texts(args.rows)})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=args.url, api_key=API_KEY, model=MODEL,
                                    use_chat_completions=True, max_tokens=args.max_tokens, **opts))
    t0 = time.monotonic()
    out = df.to_arrow(progress=False)
    t1 = time.monotonic()
    vals = out.column("a").to_pylist()
    errs = out.column("a_error").to_pylist()
    kinds = collections.Counter(f"{e['kind']}/{e['status']}" for e in errs if e)
    rep = last_run()
    emit_result({"t0": t0, "t1": t1, "rows": len(vals), "ok": sum(v is not None for v in vals),
                 "failed": sum(v is None for v in vals), "error_kinds": dict(kinds), "report": rep[0] if rep else {}})


# --------------------------------------------------------------------------- parent


def probe_cost(base_url: str, max_tokens: int) -> int:
    """Prompt tokens the server charges for one row (all rows have the same length)."""
    body = json.dumps({"model": MODEL, "max_tokens": max_tokens,
                       "messages": [{"role": "user", "content": texts(1)[0]}]}).encode()
    req = urllib.request.Request(base_url + "/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return int(json.loads(resp.read())["usage"]["prompt_tokens"])


def client_origin() -> str:
    """Where the child's ``import inferframe`` comes from (PYTHONPATH wins over the editable install)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", "import inferframe, os; print(os.path.dirname(inferframe.__file__))"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "?"


def run_variant(server: str, mode: str, args: argparse.Namespace) -> dict:
    from inferframe.simulator import Simulator, SimulatorConfig

    proc = Simulator.spawn(SimulatorConfig(rpm=args.rpm, tpm=args.tpm or None, latency_dist="lognormal",
                                           latency_ms=args.latency_ms, latency_sigma=0.3, seed=1, **SERVERS[server]))
    try:
        prompt_tokens = probe_cost(proc.base_url, args.max_tokens)
        cost = prompt_tokens + args.max_tokens
        rate_rpm = args.rpm / 60.0
        rate_tpm = args.tpm / 60.0 / cost if args.tpm else math.inf
        rate = min(rate_rpm, rate_tpm)  # requests per second the limits allow
        binding = "TPM" if rate_tpm < rate_rpm else "RPM"
        held = 1.0 if server in PER_SECOND else 60.0  # seconds of budget the server lets go at once
        burst_req = min(max(1.0, args.rpm * held / 60.0),
                        math.floor(max(1.0, args.tpm * held / 60.0) / cost) if args.tpm else math.inf)
        rows = args.rows if server in PER_SECOND else int(1.5 * burst_req)
        proc.reset()  # zero counters, refill the buckets (the probe spent one request)
        sampler = SimSampler(proc.url, interval=0.25).start()
        cmd = [__file__, "--child", "--mode", mode, "--url", proc.base_url, "--rows", str(rows), "--rpm", str(args.rpm),
               "--tpm", str(args.tpm), "--max-tokens", str(args.max_tokens), "--concurrency", str(args.concurrency)]
        res = run_child(cmd, timeout=rows / rate * 4 + 180)
        time.sleep(0.6)
        sampler.stop()
        st = proc.stats()
    finally:
        proc.close()

    t0, t1 = res["t0"], res["t1"]
    n200 = st["by_status"].get("200", 0)
    n429 = st["by_status"].get("429", 0)
    total = st["total_requests"]
    duration = t1 - t0
    out = {"server": server, "mode": mode, "rows": rows, "prompt_tokens": prompt_tokens, "cost": cost, "rate": rate,
           "binding": binding, "burst_req": burst_req, "duration": duration, "n200": n200, "n429": n429,
           "total": total, "pct429": 100 * n429 / total if total else 0.0,
           "first10_429": sampler.count_at(t0 + 10.0, 3), "peak_in_flight": max((s[1] for s in sampler.samples),
                                                                                default=0),
           "ok": res["ok"], "failed": res["failed"], "error_kinds": res["error_kinds"], "report": res["report"]}
    if server == "window":
        # The first window's budget is answered by when? (paced at the rate: about a minute)
        goal = 0.95 * burst_req
        out["t_window95"] = next((s[0] - t0 for s in sampler.samples if s[2] >= goal), math.nan)
        out["window_ok_10s"] = sampler.count_at(t0 + 10.0)
    else:
        # What the server allows in the run's time: one bucket at once, then the rate.
        out["possible"] = burst_req + rate * duration
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpm", type=int, default=1200)
    ap.add_argument("--tpm", type=int, default=0, help="tokens per minute (0: no TPM limit)")
    ap.add_argument("--max-tokens", type=int, default=48, help="max_tokens of every request (part of its TPM cost)")
    ap.add_argument("--latency-ms", type=float, default=100, help="median of the simulator's lognormal latency")
    ap.add_argument("--concurrency", type=int, default=0, help="max_concurrency passed to prompt() (0: not passed)")
    ap.add_argument("--rows", type=int, default=500, help="rows against the per-second bucket")
    ap.add_argument("--servers", default="bucket1s,window,quantized",
                    help="bucket1s, window and/or quantized, comma separated")
    ap.add_argument("--modes", default="learned,user", help="learned (limits from headers) and/or user (rpm given)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return
    # The server is this checkout's simulator whichever client runs (see the docstring).
    sys.path.insert(0, str(HERE.parent / "src"))

    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    print(f"rate_limit_efficiency: inferframe prompt() against a simulator limited to {args.rpm:,} RPM"
          + (f" and {args.tpm:,} TPM" if args.tpm else "") + f" (per model), chat completions, "
          f"max_tokens={args.max_tokens}, lognormal latency median {args.latency_ms:g} ms, "
          + (f"max_concurrency={args.concurrency}" if args.concurrency else "default concurrency"))
    print(f"  client: {client_origin()}")
    print(f"  {machine_line()}")
    results = []
    for server in servers:
        for mode in modes:
            print(f"  running {server}, {mode} ...", flush=True)
            r = run_variant(server, mode, args)
            results.append(r)
            print(f"    {r['rows']:,} rows in {r['duration']:.1f} s", flush=True)

    r0 = results[0]
    print()
    print(f"request cost: {r0['prompt_tokens']} prompt + {args.max_tokens} max_tokens = {r0['cost']} tokens; the "
          f"{r0['binding']} binds at {r0['rate']:.2f} req/s = {60 * r0['rate']:,.0f} req/min")
    ok_all = True
    bucket = [r for r in results if r["server"] in PER_SECOND]
    if bucket:
        print()
        print("one second at once: bucket1s (a bucket of one second), quantized (per-minute headers, enforced per")
        print("second). Targets: 0 failed rows, < 1% of requests answered 429, >= 97% of the limit")
        rows = []
        for r in bucket:
            ok = r["failed"] == 0 and r["pct429"] < 1 and r["n200"] / r["possible"] >= 0.97
            ok_all &= ok
            rows.append([r["server"], r["mode"], f"{r['rows']:,}", f"{r['failed']:,}", f"{r['total']:,}", f"{r['n429']:,}",
                         f"{r['pct429']:.1f}%", f"{r['first10_429']:.0f}", f"{r['duration']:.1f}",
                         f"{60 * r['n200'] / r['duration']:,.0f}", f"{100 * r['n200'] / r['duration'] / r['rate']:.1f}%",
                         f"{100 * r['n200'] / r['possible']:.1f}%", r["peak_in_flight"], "PASS" if ok else "FAIL"])
        print(table(["server", "limits", "rows", "failed", "requests", "429s", "429 %", "429s 0-10 s", "run s",
                     "req/min", "run vs limit", "vs limit+bucket", "peak in flight", "target"], rows, "llrrrrrrrrrrrl"))
        print("  run vs limit: successes per second / the limit; vs limit+bucket: successes / (one bucket")
        print("  + limit x run seconds), what the server could have answered in the run's time.")
    window = [r for r in results if r["server"] == "window"]
    if window:
        print()
        print(f"per-minute window of {window[0]['burst_req']:,.0f} requests (targets: 0 failed rows, < 1% answered "
              f"429; the burst used: 95% of the first window in seconds, not a minute)")
        rows = []
        for r in window:
            ok = r["failed"] == 0 and r["pct429"] < 1 and r["t_window95"] < 30
            ok_all &= ok
            rows.append([r["mode"], f"{r['rows']:,}", f"{r['failed']:,}", f"{r['total']:,}", f"{r['n429']:,}",
                         f"{r['pct429']:.1f}%", f"{r['window_ok_10s']:,.0f}", f"{r['t_window95']:.1f}",
                         f"{r['duration']:.1f}", r["peak_in_flight"], "PASS" if ok else "FAIL"])
        print(table(["limits", "rows", "failed", "requests", "429s", "429 %", "answered in 0-10 s",
                     "s to 95% of window", "run s", "peak in flight", "target"], rows, "lrrrrrrrrrl"))
    print()
    print("PASS" if ok_all else "FAIL", "rate_limit_efficiency")


if __name__ == "__main__":
    main()
