"""Self-hosted servers with default settings: does prompt() find a server's capacity without making it queue?

vLLM, llama.cpp's server, TGI and SGLang send no ``x-ratelimit-*`` headers: such a server has a
capacity instead of a rate (up to its batch size the latency stays flat; past it requests queue).
The simulator (its own process) models one (``SimulatorConfig(capacity=C)``: C requests served at
once, the rest wait in a FIFO, their wait counted), with a constant latency and, with
``--slowdown``, a latency that grows a little with the batch it joins.

Each case runs prompt() with default settings (no max_concurrency) in a fresh subprocess against a
fresh server, over capacities ``--capacities`` (32, 256, 1,024) and latencies ``--latencies``
(50 ms, 1 s). Rows: 20,000, or fewer where that many would take more than ``--seconds`` (20) at
the best possible rate (so at 1 s: 640, 5,120 and 20,000).

Figures per case, from one run:

* rows/s, against the best possible (capacity / latency): target >= 90%;
* the server's mean queueing delay per request, against the latency floor: target <= 0.5x;
* 429s and failed rows: target 0;
* the in-flight bound over time: the client's bound (``last_run()``'s ``concurrency`` timeline, when
  the client has one) and the server's requests (served + queued) sampled every 0.25 s.

On a 2-core machine the client's own CPU caps it near 2,000-3,000 rows/s: where capacity / latency
is above that (256 and 1,024 at 50 ms), no setting reaches 90% of it. So each case that misses 90%
of best runs once more, right after, with ``max_concurrency`` = the capacity (a perfect guess, the
same engine: the client's ceiling, ``--ceiling auto``; ``all``: every case; ``off``: none), and the
table prints the default's rows/s against that ceiling too: a case passes where it reaches 90% of
best, or where the ceiling itself is under 90% of best and the default reaches 90% of the ceiling
("ceiling": the client, not the policy, is the limit). The server is its own process (the
simulator's ``spawn``), the client another: neither takes the other's interpreter.

Usage:
    .venv/bin/python bench/self_hosted.py                       # about 3 min
    .venv/bin/python bench/self_hosted.py --capacities 256 --latencies 1000 --ceiling all
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ["INFERFRAME_CACHE"] = "off"  # measure the server's capacity, not the response cache

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _sim_util import SimSampler, emit_result, machine_line, run_child, table

MODEL = "gpt-5-mini"


def texts(n: int) -> list[str]:
    return [f"Row {i:07d}: the parcel arrived on time and works well. Sentiment?" for i in range(n)]


def child_main(args: argparse.Namespace) -> None:
    import inferframe as ifr
    from inferframe.functions import prompt

    import aiohttp  # noqa: F401  (imported by the first request otherwise: startup, not the server's capacity)

    opts = {"max_concurrency": args.max_concurrency} if args.max_concurrency else {}
    ifr.from_pydict({"x": [1]}).to_arrow(progress=False)  # the executor's first start, outside the timed run
    df = ifr.from_pydict({"q": texts(args.rows)})
    df = df.with_column("a", prompt(ifr.col("q"), provider="openai", base_url=args.url, api_key="sk-bench", model=MODEL,
                                    use_chat_completions=True, max_tokens=64, **opts))
    t0 = time.monotonic()
    out = df.to_arrow(progress=False)
    t1 = time.monotonic()
    errs = out.column("a_error").to_pylist()
    runs = ifr.last_run()
    timeline = []
    for call in runs:
        timeline = call.get("concurrency") or timeline
    emit_result({"t0": t0, "t1": t1, "failed": sum(e is not None for e in errs), "timeline": timeline,
                 "error_kinds": dict(collections.Counter(f"{e['kind']}/{e['status']}" for e in errs if e))})


def rows_for(capacity: int, latency_s: float, args: argparse.Namespace) -> int:
    return int(min(args.rows, capacity / latency_s * args.seconds))


def run_case(capacity: int, latency_ms: float, args: argparse.Namespace, oracle: bool = False) -> dict:
    from inferframe.simulator import Simulator, SimulatorConfig

    latency = latency_ms / 1000.0
    rows = rows_for(capacity, latency, args)
    proc = Simulator.spawn(SimulatorConfig(latency_ms=latency_ms, capacity=capacity,
                                           capacity_slowdown=args.slowdown, seed=1))
    try:
        sampler = SimSampler(proc.url, interval=0.25).start()
        child = [__file__, "--child", "--url", proc.base_url, "--rows", str(rows)]
        if oracle:
            child += ["--max-concurrency", str(capacity)]
        res = run_child(child, timeout=rows / 20 + 180)
        sampler.stop()
        st = proc.stats()
    finally:
        proc.close()
    duration = res["t1"] - res["t0"]
    best = capacity / latency
    return {"capacity": capacity, "latency": latency, "rows": rows, "duration": duration, "rate": rows / duration,
            "best": best, "vs_best": rows / duration / best, "queue": st.get("mean_queue_wait_s", 0.0),
            "n429": st["by_status"].get("429", 0), "failed": res["failed"], "error_kinds": res["error_kinds"],
            "peak": st.get("max_in_flight", 0), "timeline": res["timeline"], "oracle": oracle,
            "server": [(t - res["t0"], n) for t, n, *_ in sampler.samples if res["t0"] <= t <= res["t1"]]}


def bound_line(r: dict) -> str:
    """The in-flight bound at a few points of the run: the client's (time: bound, reason) and the server's."""
    tl = r["timeline"]
    client = ", ".join(f"{p[0]:.1f}s:{p[1]}{'/' + p[2] if len(p) > 2 and p[2] else ''}" for p in tl[:12])
    if len(tl) > 12:
        client += f", ... ({len(tl)} changes) {tl[-1][0]:.1f}s:{tl[-1][1]}"
    n = len(r["server"])
    picks = [r["server"][int(i * (n - 1) / 7)] for i in range(8)] if n else []
    server = ", ".join(f"{t:.1f}s:{k}" for t, k in picks)
    return (f"    cap {r['capacity']:,} @ {r['latency'] * 1000:g} ms{' (oracle)' if r['oracle'] else ''}: client bound "
            f"[{client or 'no timeline'}]\n      server in flight [{server}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capacities", default="32,256,1024")
    ap.add_argument("--latencies", default="50,1000", help="the server's latency floor, ms")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--seconds", type=float, default=20.0, help="fewer rows where 20,000 would take longer at best")
    ap.add_argument("--slowdown", type=float, default=0.0, help="latency x (1 + this x served / capacity)")
    ap.add_argument("--ceiling", choices=("auto", "all", "off"), default="auto",
                    help="run a case again with max_concurrency = capacity: where it misses 90%% of best (auto), always, never")
    ap.add_argument("--oracle", action="store_true", help="the same as --ceiling all")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--max-concurrency", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return
    sys.path.insert(0, str(HERE.parent / "src"))  # this checkout's simulator, whichever client runs
    client = subprocess.run([sys.executable, "-c", "import inferframe, os; print(os.path.dirname(inferframe.__file__))"],
                            capture_output=True, text=True, timeout=60).stdout.strip()
    caps = [int(c) for c in args.capacities.split(",") if c.strip()]
    lats = [float(x) for x in args.latencies.split(",") if x.strip()]
    print(f"self_hosted: prompt() with default settings against a simulated self-hosted server (capacity C served at "
          f"once, FIFO beyond, no limit headers; constant latency, slowdown {args.slowdown:g})")
    print(f"  client: {client}")
    print(f"  {machine_line()}")
    mode = "all" if args.oracle else args.ceiling
    results = []
    for lat in lats:
        for cap in caps:
            print(f"  running capacity {cap:,} at {lat:g} ms ...", flush=True)
            r = run_case(cap, lat, args)
            results.append(r)
            print(f"    {r['rows']:,} rows in {r['duration']:.1f} s", flush=True)
            if mode == "all" or (mode == "auto" and r["vs_best"] < 0.90):
                # Right after, on the same machine: what this client does with a perfect guess of the bound.
                print(f"  running capacity {cap:,} at {lat:g} ms with max_concurrency {cap:,} (the ceiling) ...",
                      flush=True)
                results.append(run_case(cap, lat, args, oracle=True))
                r["ceiling"] = results[-1]["rate"]
                print(f"    {results[-1]['rows']:,} rows in {results[-1]['duration']:.1f} s", flush=True)
    print()
    rows, ok_all = [], True
    for r in results:
        clean = r["queue"] <= 0.5 * r["latency"] and r["n429"] == 0 and r["failed"] == 0
        ceiling = r.get("ceiling")
        vs_ceiling = r["rate"] / ceiling if ceiling else None
        if r["vs_best"] >= 0.90:
            verdict = "PASS" if clean else "FAIL"
        elif ceiling and ceiling < 0.90 * r["best"] and vs_ceiling >= 0.90:
            verdict = "PASS (ceiling)" if clean else "FAIL"  # the client's limit, not the policy's
        else:
            verdict = "FAIL"
        if not r["oracle"]:
            ok_all &= verdict != "FAIL"
        else:
            verdict = "-"
        rows.append([f"{r['capacity']:,}", f"{r['latency'] * 1000:g} ms", "cap" if r["oracle"] else "default",
                     f"{r['rows']:,}", f"{r['duration']:.1f}", f"{r['rate']:,.0f}", f"{r['best']:,.0f}",
                     f"{100 * r['vs_best']:.1f}%", f"{100 * vs_ceiling:.1f}%" if vs_ceiling else "-",
                     f"{r['queue'] * 1000:.1f} ms", f"{r['queue'] / r['latency']:.2f}x",
                     r["peak"], f"{r['n429']:,}", f"{r['failed']:,}", verdict])
    print(table(["capacity", "latency", "settings", "rows", "run s", "rows/s", "best rows/s", "vs best", "vs ceiling",
                 "mean queued", "vs latency", "server peak", "429s", "failed", "target"], rows, "lllrrrrrrrrrrrl"))
    print("  best: capacity / latency; ceiling: the same client with max_concurrency = the capacity (the cap row).")
    print("  Targets: >= 90% of best (or, where the ceiling is under 90% of best, >= 90% of the ceiling: 'PASS (ceiling)'),")
    print("  mean queueing <= 0.5x the latency, no 429s or failures.")
    print(f"  {machine_line()} (after the runs)")
    print()
    print("In-flight bound over time (time from the run's start: bound/why it moved):")
    for r in results:
        print(bound_line(r))
    print("PASS" if ok_all else "FAIL", "self_hosted")


if __name__ == "__main__":
    main()
