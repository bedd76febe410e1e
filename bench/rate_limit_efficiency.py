"""Rate-limit efficiency of prompt(): throughput against a fixed RPM/TPM, failed rows and 429s.

The simulator (its own process) enforces ``--rpm`` requests and ``--tpm`` tokens
per minute per model, with OpenAI's accounting: a request costs its prompt
tokens plus ``max_tokens`` (the answer's real length does not matter), a denied
request costs nothing and gets a 429 with Retry-After and x-ratelimit-* headers,
and every answer carries x-ratelimit-limit/remaining/reset headers. The
defaults (rpm 1,200, tpm 60,000, short prompts, max_tokens 48) make a request
cost 71 tokens (23 prompt + 48), so the TPM allows about 14.1 requests/s while
the RPM would allow 20: **the TPM binds**. The script measures the cost with one
probe request and prints which limit binds. The simulator's answers are short
(about 20 tokens), as real answers usually are, so a request's usage is below
what it is charged; ``--answer-min-chars 188`` makes every answer exactly 48
tokens (usage = charged cost), which isolates the effect of that gap.

Buckets refill continuously; ``ratelimit_burst_s`` is their capacity in seconds
of refill. With the simulator's default (60 s) a whole minute's quota can go in
the first second, so a run's average can exceed the limit; with 1 s (OpenAI-like
quantisation) almost nothing can be spent ahead. Both are run (``--bursts``).
The rows are sized to last about ``--seconds`` (default 60) at the limit after the
burst: ``rows = burst capacity + rate * seconds``.

For each burst setting, inferframe runs twice in a fresh subprocess against a
freshly spawned simulator:

  learned  prompt(..., max_concurrency=512): not told the limits; it has to learn
           them from the x-ratelimit-* headers (and 429s).
  user     prompt(..., max_concurrency=512, rpm=RPM, tpm=TPM): limits passed in.

Figures:

  * failed rows (null answer; target 0), server requests, 429s and their share of
    requests (target < 2%), 429s in the first 10 s, inferframe's retries;
  * whole run: successful requests per minute, and successes / what the server
    could have allowed in that time (bucket capacity + rate * duration);
  * steady state: from 5 s after the burst capacity is used up to 2 s before the
    last answer, requests/min and charged tokens/min (prompt + max_tokens) against
    the limits, and % of the binding limit (target >= 95%). Server-side counts are
    sampled every 0.5 s by this process.

Usage:
    .venv/bin/python bench/rate_limit_efficiency.py                  # bursts 60 s and 1 s, about 5 min
    .venv/bin/python bench/rate_limit_efficiency.py --bursts 60 --seconds 30
    .venv/bin/python bench/rate_limit_efficiency.py --rpm 600 --tpm 1000000   # make the RPM bind
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sim_util import ProcCPU, SimSampler, emit_result, machine_line, run_child, table

MODEL = "gpt-5-mini"
API_KEY = "sk-bench"


def texts(n: int) -> list[str]:
    # Same length for every row, so every request has the same cost.
    return [f"Row {i:07d}: the parcel arrived on time and works well. Sentiment?" for i in range(n)]


# --------------------------------------------------------------------------- child


def child_main(args: argparse.Namespace) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt
    from inferframe.observe import last_run

    limits = {}
    if args.mode == "user":
        limits = {"rpm": args.rpm, "tpm": args.tpm}
    df = ifr.from_pydict({"q": texts(args.rows)})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=args.url, api_key=API_KEY, model=MODEL,
                                    use_chat_completions=True, max_tokens=args.max_tokens,
                                    max_concurrency=args.concurrency, **limits))
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


def run_variant(burst: float, mode: str, args: argparse.Namespace) -> dict:
    from inferframe.simulator import Simulator, SimulatorConfig

    proc = Simulator.spawn(SimulatorConfig(rpm=args.rpm, tpm=args.tpm, ratelimit_burst_s=burst,
                                           latency_dist="lognormal", latency_ms=args.latency_ms, latency_sigma=0.3,
                                           answer_min_chars=args.answer_min_chars, seed=1))
    try:
        prompt_tokens = probe_cost(proc.base_url, args.max_tokens)
        cost = prompt_tokens + args.max_tokens
        rate_rpm = args.rpm / 60.0
        rate_tpm = args.tpm / 60.0 / cost
        rate = min(rate_rpm, rate_tpm)  # requests per second the limits allow
        binding = "TPM" if rate_tpm < rate_rpm else "RPM"
        cap_req = max(1.0, args.rpm * burst / 60.0)
        cap_tok = max(1.0, args.tpm * burst / 60.0)
        burst_req = min(cap_req, math.floor(cap_tok / cost))  # requests the full buckets allow at once
        rows = int(math.ceil(burst_req + rate * args.seconds))
        proc.reset()  # zero counters, refill the buckets (the probe spent one request)
        sampler = SimSampler(proc.url, interval=0.5).start()
        cpu = ProcCPU(proc.pid)
        cpu.start()
        res = run_child([__file__, "--child", "--mode", mode, "--url", proc.base_url, "--rows", str(rows),
                         "--rpm", str(args.rpm), "--tpm", str(args.tpm), "--max-tokens", str(args.max_tokens),
                         "--concurrency", str(args.concurrency)], timeout=args.seconds * 4 + 120)
        time.sleep(0.6)
        sampler.stop()
        st = proc.stats()
        server_cpu = cpu.seconds()
    finally:
        proc.close()

    t0, t1 = res["t0"], res["t1"]
    n200 = st["by_status"].get("200", 0)
    n429 = st["by_status"].get("429", 0)
    total = st["total_requests"]
    duration = t1 - t0
    possible = burst_req + rate * duration
    # Steady state: 5 s after the burst capacity has been used, to 2 s before the end.
    samples = sampler.samples
    t_burst = next((s[0] for s in samples if s[2] >= burst_req), t0)
    ta = max(t0, t_burst) + 5.0
    tb = t1 - 2.0
    steady = None
    if tb - ta >= 10.0:
        ok_s = sampler.count_at(tb) - sampler.count_at(ta)
        r429_s = sampler.count_at(tb, 3) - sampler.count_at(ta, 3)
        req_per_s = ok_s / (tb - ta)
        steady = {"seconds": tb - ta, "req_per_min": req_per_s * 60, "tok_per_min": req_per_s * 60 * cost,
                  "pct_binding": 100 * req_per_s / rate, "r429": r429_s}
    first10 = sampler.count_at(t0 + 10.0, 3)
    return {"burst": burst, "mode": mode, "rows": rows, "prompt_tokens": prompt_tokens, "cost": cost, "rate": rate,
            "binding": binding, "burst_req": burst_req, "duration": duration, "possible": possible, "n200": n200,
            "n429": n429, "total": total, "pct429": 100 * n429 / total if total else 0.0, "first10_429": first10,
            "steady": steady, "ok": res["ok"], "failed": res["failed"], "error_kinds": res["error_kinds"],
            "report": res["report"], "server_cpu_s": server_cpu, "duplicates": st["duplicate_requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rpm", type=int, default=1200)
    ap.add_argument("--tpm", type=int, default=60000)
    ap.add_argument("--max-tokens", type=int, default=48, help="max_tokens of every request (part of its TPM cost)")
    ap.add_argument("--answer-min-chars", type=int, default=0,
                    help="pad answers to this many characters (188 makes a 48-token answer: usage = charged cost)")
    ap.add_argument("--latency-ms", type=float, default=150, help="median of the simulator's lognormal latency")
    ap.add_argument("--concurrency", type=int, default=512, help="max_concurrency passed to prompt()")
    ap.add_argument("--seconds", type=float, default=60, help="target run length at the limit, after the burst")
    ap.add_argument("--bursts", default="60,1", help="simulator ratelimit_burst_s values to run, comma separated")
    ap.add_argument("--modes", default="learned,user", help="learned (limits from headers) and/or user (rpm/tpm given)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return

    bursts = [float(b) for b in args.bursts.split(",")]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    print(f"rate_limit_efficiency: inferframe prompt() against a simulator limited to {args.rpm:,} RPM and "
          f"{args.tpm:,} TPM (per model), chat completions, max_tokens={args.max_tokens}, "
          f"lognormal latency median {args.latency_ms:g} ms, max_concurrency={args.concurrency}")
    print(f"  {machine_line()}")
    results = []
    for burst in bursts:
        for mode in modes:
            print(f"  running burst {burst:g} s, {mode} ...", flush=True)
            r = run_variant(burst, mode, args)
            results.append(r)
            print(f"    {r['rows']:,} rows in {r['duration']:.1f} s", flush=True)

    r0 = results[0]
    print()
    print(f"request cost charged by the server: {r0['prompt_tokens']} prompt + {args.max_tokens} max_tokens = "
          f"{r0['cost']} tokens; RPM allows {args.rpm / 60:.2f} req/s, TPM allows {args.tpm / 60 / r0['cost']:.2f} req/s "
          f"-> the {r0['binding']} binds at {r0['rate']:.2f} req/s = {60 * r0['rate']:,.0f} req/min")
    print()
    print("outcome (targets: 0 failed rows, < 2% of requests answered 429)")
    rows = []
    for r in results:
        rep = r["report"]
        rows.append([f"burst {r['burst']:g} s", r["mode"], f"{r['rows']:,}", f"{r['failed']:,}",
                     ", ".join(f"{k} x{v}" for k, v in r["error_kinds"].items()) or "-",
                     f"{r['total']:,}", f"{r['n429']:,}", f"{r['pct429']:.1f}%", f"{r['first10_429']:.0f}",
                     f"{r['steady']['r429']:.0f}" if r["steady"] else "-", rep.get("retries", "?"),
                     rep.get("rate_limited", "?"), r["duplicates"],
                     "PASS" if r["failed"] == 0 and r["pct429"] < 2 else "FAIL"])
    print(table(["simulator", "limits", "rows", "failed", "errors", "requests", "429s", "429 %", "429s 0-10 s",
                 "429s steady", "retries", "rate_limited", "dup bodies", "target"], rows, "llrrlrrrrrrrrl"))
    print()
    print(f"throughput (binding limit: {r0['binding']}, {60 * r0['rate']:,.0f} req/min; target >= 95% in the steady state)")
    rows = []
    for r in results:
        s = r["steady"]
        rows.append([f"burst {r['burst']:g} s", r["mode"], f"{r['burst_req']:,.0f}", f"{r['duration']:.1f}",
                     f"{60 * r['n200'] / r['duration']:,.0f}", f"{100 * r['n200'] / r['duration'] / r['rate']:.0f}%",
                     f"{100 * r['n200'] / r['possible']:.1f}%",
                     f"{s['seconds']:.0f}" if s else "-",
                     f"{s['req_per_min']:,.0f} / {args.rpm:,}" if s else "-",
                     f"{s['tok_per_min']:,.0f} / {args.tpm:,}" if s else "-",
                     f"{s['pct_binding']:.1f}%" if s else "-",
                     ("PASS" if s["pct_binding"] >= 95 else "FAIL") if s else "-"])
    print(table(["simulator", "limits", "burst reqs", "run s", "req/min (run)", "run vs limit", "run vs possible",
                 "steady s", "steady req/min", "steady tok/min", "steady vs limit", "target"], rows,
                "llrrrrrrrrrl"))
    print()
    print("  burst reqs: requests the full buckets allow at once; run vs limit: whole-run rate / binding limit (above")
    print("  100% when the burst is large); run vs possible: successes / (burst reqs + limit * run seconds);")
    print("  steady tok/min counts what the server charges (prompt + max_tokens per request).")


if __name__ == "__main__":
    main()
