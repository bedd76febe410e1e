"""Engine cost of prompt(): rows/s against the OpenAI simulator, four clients side by side.

Every client sends the same chat-completions requests (one short user message
per row, model "gpt-5-mini") to a simulator running in its own process
(``Simulator.spawn``), with at most ``--concurrency`` (default 512) requests in
flight, at each simulator latency in ``--latencies`` (default 200 ms and 0 ms):

  aiohttp     bare ``aiohttp`` client + ``asyncio.Semaphore``: orjson body in,
              orjson parse out, read the answer. The ceiling of this machine.
  openai-sdk  plain asyncio loop over ``openai.AsyncOpenAI`` (default client)
              with a semaphore.
  inferframe  ``prompt(col("q"), provider="openai", base_url=..., use_chat_completions=True,
              max_concurrency=C)`` then ``to_arrow()``.
  daft        Daft 0.7's ``daft.functions.prompt(col("q"), provider=OpenAIProvider(base_url=...),
              use_chat_completions=True, concurrency=K)`` on ``into_batches(B)``. Daft
              sends through ``openai.AsyncOpenAI``. In Daft 0.7 the concurrency of an
              async UDF counts *batches* and lets K+1 be in flight, every row of a batch
              at once, so B=64 and K = C/B - 1 give C rows in flight (the simulator's
              max-in-flight column confirms it at 200 ms).

  inferframe-aiohttp  (only when named in ``--clients``) the inferframe client with
              ``INFERFRAME_HTTP=aiohttp``: single requests through the portable aiohttp client
              instead of reqwest (issue 42), side by side with ``inferframe``.

The inferframe client sends through the HTTP client ``INFERFRAME_HTTP`` names, as a user's job does:
unset, reqwest where it runs; ``INFERFRAME_HTTP=aiohttp bench/prompt_throughput.py`` runs it (and the
sweep) on aiohttp. The first lines print which one it used.

  aiohttp-gc  (only when named in ``--clients``) bare aiohttp with the garbage collector set as
              inferframe's jobs set it (``execution.gc_scope``: the youngest generation collected
              every 50,000 allocations, not 700). Plain aiohttp spends part of its CPU in the collector
              (the "GC us/row" column); this client shows the engine's cost with that part equal.

"GC us/row (runs)": the wall time the child's garbage collector took during the timed run
(``gc.callbacks``), per row, and how many collections ran.

Each (client, latency) runs in a fresh Python subprocess against a freshly
spawned simulator. The child first runs a 64-row warm-up (imports, first-query
setup; for Daft a plain query, because a second prompt() query in one Daft
0.7.26 process hangs after its last answer), resets the simulator's counters,
then times the run: wall time from
building the client/query to having every answer in memory (connection set-up
included, as every client opens a fresh pool). The parent polls the simulator
for requests in flight and measures its CPU time.

Ideal at latency L: C / L rows/s (2,560 rows/s at 200 ms with 512 in flight);
at 0 ms the client's (or the server's) CPU is the limit. On a 2-core machine
client and server share the cores, and other load moves the figures by tens of
percent, so the fast clients (aiohttp, inferframe) run ``--repeat`` times
(default 5, rounds interleaved) and the table shows the fastest and the median
run; openai-sdk and Daft are 5-20x slower and run ``--repeat-slow`` times (1).
``--profile`` then runs the inferframe child once more per latency with py-spy
attached for the timed part only (``--gil``: the thread holding the GIL, i.e. CPU spent in Python; a thread waiting
for the GIL or a lock is not counted), and prints the top functions by self time and
the share of samples in each part of the engine (raw stacks in bench/out/).

Targets (issue 36), PASS/FAIL on the best runs with the medians beside them: at a latency, inferframe's
rows/s at least 1.0x bare aiohttp's; at 0 ms, at least 0.90x ``aiohttp-gc``'s with the client's CPU per row at
most 1.25x ``aiohttp-gc``'s. The 0 ms table is followed by the requests/s one process sustains per core and
how many processes a 10,000 requests/s server needs. ``--sweep 1024,16384`` then runs the prompt path at each
in-flight bound on the zero-latency simulator: rows/s at the largest at least 0.9x the smallest's.

Usage:
    .venv/bin/python bench/prompt_throughput.py --clients aiohttp,aiohttp-gc,inferframe --latencies 200,0 \
        --concurrency 512 --repeat 3 --sweep 1024,16384          # issue 36's targets and sweep
    .venv/bin/python bench/prompt_throughput.py                       # 5,000 rows at 200 ms and at 0 ms
    .venv/bin/python bench/prompt_throughput.py --rows-200ms 10000 --rows-0ms 3000
    .venv/bin/python bench/prompt_throughput.py --clients aiohttp,inferframe --latencies 0
    .venv/bin/python bench/prompt_throughput.py --profile             # also py-spy the inferframe child
    .venv/bin/python bench/prompt_throughput.py --clients aiohttp,inferframe,inferframe-aiohttp --latencies 0
    INFERFRAME_HTTP=aiohttp .venv/bin/python bench/prompt_throughput.py --clients aiohttp,inferframe
"""

from __future__ import annotations

import argparse
import collections
import math
import os

# Throughput is measured against the server: the response cache must not answer instead.
os.environ["INFERFRAME_CACHE"] = "off"
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _sim_util import ProcCPU, SimSampler, machine_line, run_child, table  # noqa: E402
from _throughput_clients import API_KEY, MODEL, WARMUP_ROWS, child_main  # noqa: E402

CLIENTS = ("aiohttp", "openai-sdk", "inferframe", "daft")
EXTRA_CLIENTS = ("aiohttp-gc", "inferframe-aiohttp")  # not run by default: --clients aiohttp,aiohttp-gc,inferframe


# --------------------------------------------------------------------------- parent


def run_one(client: str, latency_ms: float, rows: int, args: argparse.Namespace, profile_to: str | None = None,
            concurrency: int | None = None) -> dict:
    from inferframe.simulator import Simulator, SimulatorConfig

    proc = Simulator.spawn(SimulatorConfig(latency_ms=latency_ms))
    sampler = SimSampler(proc.url, interval=0.2).start()
    try:
        cpu = ProcCPU(proc.pid)
        cpu.start()
        argv = [__file__, "--child", client, "--url", proc.base_url, "--rows", str(rows),
                "--concurrency", str(concurrency or args.concurrency), "--daft-batch", str(args.daft_batch)]
        if profile_to:
            argv += ["--pyspy-out", profile_to]
        res = run_child(argv, timeout=args.timeout)
        sampler.stop()
        res["server_cpu_s"] = cpu.seconds()
        st = proc.stats()
        res["server_requests"] = st["total_requests"]
        res["non_200"] = st["total_requests"] - st["by_status"].get("200", 0)
        res["max_in_flight"] = st["max_in_flight"]
        res["mean_in_flight"] = sampler.mean_in_flight()
        res["duplicates"] = st["duplicate_requests"]
    finally:
        sampler.stop()
        proc.close()
    res["rows_per_s"] = res["rows"] / res["seconds"]
    return res


_CATEGORIES = (  # (label, frame substrings); a sample goes to the first category with a frame on its stack
    ("inferframe: parse the answer (parse_chat)", ("parse_chat (inferframe",)),
    ("inferframe: orjson dumps/loads", ("_dumps (inferframe", "_loads")),
    ("inferframe: token estimate (estimate_request)", ("estimate_request (inferframe",)),
    ("inferframe: request dicts (AIClient.body)", ("AIClient.body (inferframe",)),
    ("inferframe: rows -> requests -> results (AIClient.__call__)", ("AIClient.__call__ (inferframe",)),
    ("inferframe: admission (RateLimiter.acquire, AdaptiveLimit, asyncio locks)",
     ("RateLimiter.acquire (inferframe", "AdaptiveLimit.", "(asyncio/locks.py")),
)


def _category(frames: list[str]) -> str:
    leaf = frames[-1]
    if "Condition.wait (threading.py" in leaf:
        return "main thread waiting for the event loop thread (threading.Condition.wait)"
    for label, keys in _CATEGORIES:
        if any(k in f for f in frames for k in keys):
            return label
    if any("OpenAIProvider.send (inferframe" in f for f in frames):
        return ("inferframe: OpenAIProvider.send own lines" if "(inferframe/" in leaf
                else "aiohttp request/response inside OpenAIProvider.send")
    if any("InferenceRuntime." in f for f in frames):
        return "inferframe: run_one/run_many bookkeeping (stats, breaker, retry, result)"
    if any(k in f for f in frames for k in ("udf_ops.py", "executor.py", "operators.py", "(inferframe/")):
        return "inferframe: executor, UDF operator, Arrow conversion"
    if any("_read_ready" in f or "data_received" in f for f in frames):
        return "asyncio/aiohttp socket reads, response parsing"
    return "event loop and other (asyncio, selectors, socket writes)"


def print_profile(path: str, top: int = 15) -> None:
    """Self time per function and time per part of the engine, from py-spy's raw (collapsed-stack) output."""
    import re

    def func(frame: str) -> str:  # "name (file:line)" -> "name (file)"
        return re.sub(r":\d+\)$", ")", frame)

    self_f: collections.Counter = collections.Counter()
    self_line: dict = collections.defaultdict(collections.Counter)
    cats: collections.Counter = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            n = int(n)
            total += n
            frames = stack.split(";")
            leaf = func(frames[-1])
            self_f[leaf] += n
            self_line[leaf][frames[-1].rsplit(":", 1)[-1].rstrip(")")] += n
            cats[_category(frames)] += n
    if not total:
        print("  (no samples)")
        return
    print(f"  {total} samples holding the GIL (timed part only; py-spy --gil 250 Hz: CPU in Python, not threads waiting); % of those")
    rows = [[f"{100 * c / total:5.1f}", fr, ",".join(ln for ln, _ in self_line[fr].most_common(3))]
            for fr, c in self_f.most_common(top)]
    print(table(["% self", "function (file)", "hottest lines"], rows, "rll"))
    print("  samples by part (first match from the top of this list; inclusive of callees):")
    ifr = sum(c for k, c in cats.items() if k.startswith("inferframe:"))
    rows = [[f"{100 * c / total:5.1f}", k] for k, c in cats.most_common()]
    rows.append([f"{100 * ifr / total:5.1f}", "= all inferframe parts together (the engine's own cost)"])
    print(table(["%", "part"], rows, "rl"))


def _ratio(lat: float, results: dict, runs: dict, other: str) -> tuple[float, float] | None:
    """inferframe's rows/s over ``other``'s: (best runs, medians); None when either did not run."""
    a, b = results.get((lat, "inferframe")), results.get((lat, other))
    if a is None or b is None:
        return None
    return (a["rows_per_s"] / b["rows_per_s"],
            statistics.median(runs[(lat, "inferframe")]) / statistics.median(runs[(lat, other)]))


def print_targets(lat: float, results: dict, runs: dict) -> None:
    """Issue 36's targets: at a latency, rows/s >= 1.0x bare aiohttp; at 0 ms, >= 0.90x aiohttp-gc with the
    client's CPU per row <= 1.25x aiohttp-gc's. PASS/FAIL on the best runs, the medians beside them."""
    other, want = ("aiohttp", 1.0) if lat > 0 else ("aiohttp-gc", 0.90)
    ratio = _ratio(lat, results, runs, other)
    if ratio is None:
        print(f"  target (issue 36): needs the {other} client in --clients")
        return
    best, med = ratio
    print(f"  target inferframe >= {want:.2f}x {other} rows/s: {best:.2f}x (best runs), {med:.2f}x (medians) -> "
          f"{'PASS' if best >= want else 'FAIL'}")
    if lat == 0:
        ifr, o = results[(lat, "inferframe")], results[(lat, other)]
        cpu = (ifr["cpu_s"] / ifr["rows"]) / (o["cpu_s"] / o["rows"])
        cpu_med = statistics.median(runs[(lat, "inferframe", "cpu")]) / statistics.median(runs[(lat, other, "cpu")])
        print(f"  target inferframe client CPU per row <= 1.25x {other}'s: {cpu:.2f}x (best runs), "
              f"{cpu_med:.2f}x (medians) -> {'PASS' if cpu <= 1.25 else 'FAIL'}")
    for c in (other, "inferframe"):
        print(f"    {c} runs (rows/s): " + ", ".join(f"{x:,.0f}" for x in runs[(lat, c)])
              + ("; CPU us/row: " + ", ".join(f"{1e6 * x:,.0f}" for x in runs[(lat, c, "cpu")]) if lat == 0 else ""))


SERVER_RPS = 10_000  # the GPU server to feed (seed 003: Ray Data + vLLM at ~12,000 prompts/s on four A10s)


def print_per_core(ifr: dict) -> None:
    """Requests/s one inferframe process sustains per core of its own CPU at 0 ms, and processes a server needs."""
    per_core = ifr["rows"] / ifr["cpu_s"]
    n = math.ceil(SERVER_RPS / per_core)
    who = "one such process or Ray worker, with a core" if n == 1 else f"{n} such processes or Ray workers, each with a core"
    print(f"  per core: one inferframe process sustains {per_core:,.0f} requests/s per CPU second of its own "
          f"({1e6 * ifr['cpu_s'] / ifr['rows']:,.0f} us/request) against the zero-latency simulator; a "
          f"{SERVER_RPS:,} requests/s server needs {who} of its own (the server's CPU not counted)")


def run_sweep(args: argparse.Namespace) -> None:
    """Issue 36 item 3: the prompt path at several in-flight bounds on the zero-latency simulator, rounds interleaved."""
    bounds = [int(x) for x in args.sweep.split(",")]
    clients = args.sweep_clients.split(",")
    rows = args.sweep_rows
    got: dict = collections.defaultdict(list)
    for rep in range(args.repeat):
        for c in bounds:
            for client in clients:
                print(f"  sweep round {rep + 1}: {client} in flight {c:,}, latency 0 ms, {rows:,} rows ...", flush=True)
                try:
                    got[client, c].append(run_one(client, 0.0, rows, args, concurrency=c))
                except Exception as exc:
                    print(f"    failed: {exc}")
    print()
    print(f"prompt path sweep: {rows:,} rows on the zero-latency simulator, in flight at most the bound "
          "(inferframe: max_concurrency)")
    out = []
    for client in clients:
        for c in bounds:
            rs = got[client, c]
            if not rs:
                out.append([client, f"{c:,}", "failed", "", "", "", "", ""])
                continue
            best = max(rs, key=lambda r: r["rows_per_s"])
            out.append([client, f"{c:,}", f"{best['rows_per_s']:,.0f}",
                        f"{statistics.median(r['rows_per_s'] for r in rs):,.0f}",
                        f"{1e6 * best['cpu_s'] / best['rows']:,.0f}", f"{1e6 * best['server_cpu_s'] / best['rows']:,.0f}",
                        "yes" if all(r["answers_match"] for r in rs) else "NO",
                        ", ".join(f"{r['rows_per_s']:,.0f}" for r in rs)])
    print(table(["client", "in flight", "rows/s (best)", "median", "CPU us/row (best)", "server CPU us/row",
                 "answers ok", "runs"], out))
    lo, hi = min(bounds), max(bounds)
    for client in clients:
        if got[client, lo] and got[client, hi] and lo != hi:
            best = max(r["rows_per_s"] for r in got[client, hi]) / max(r["rows_per_s"] for r in got[client, lo])
            med = statistics.median(r["rows_per_s"] for r in got[client, hi]) / statistics.median(
                r["rows_per_s"] for r in got[client, lo])
            verdict = f" -> {'PASS' if best >= 0.9 else 'FAIL'}" if client == "inferframe" else " (a bare client, for comparison)"
            print(f"  {'target ' if client == 'inferframe' else ''}{client} rows/s at {hi:,} >= 0.90x at {lo:,}: "
                  f"{best:.2f}x (best runs), {med:.2f}x (medians){verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows-200ms", type=int, default=5000, help="rows at latency 200 ms (and any latency > 0)")
    ap.add_argument("--rows-0ms", type=int, default=20_000,
                    help="rows at latency 0 ms (a run of 5,000 is about 1 s: its CPU per row moved by 1.5x run to run)")
    ap.add_argument("--latencies", default="200,0", help="simulator latencies in ms, comma separated")
    ap.add_argument("--concurrency", type=int, default=512, help="requests in flight for every client")
    ap.add_argument("--clients", default=",".join(CLIENTS), help=f"subset of {','.join(CLIENTS + EXTRA_CLIENTS)}")
    ap.add_argument("--daft-batch", type=int, default=64, help="into_batches() size for Daft")
    ap.add_argument("--repeat", type=int, default=5, help="runs per latency of aiohttp and inferframe (fastest reported)")
    ap.add_argument("--repeat-slow", type=int, default=1, help="runs per latency of openai-sdk and daft")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per child")
    ap.add_argument("--profile", action="store_true", help="after the table, py-spy the inferframe child at each latency")
    ap.add_argument("--sweep", help="after the table, run inferframe at these max_concurrency values at 0 ms "
                    "(e.g. 1024,16384; issue 36 item 3)")
    ap.add_argument("--sweep-rows", type=int, default=20_000, help="rows per run of --sweep")
    ap.add_argument("--sweep-clients", default="inferframe",
                    help="clients of --sweep (inferframe,aiohttp: what the bound costs a bare client as well)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--pyspy-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args)
        return

    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    try:  # only the daft client needs it; the others run without it installed
        import daft

        daft_version = daft.__version__
    except ImportError:
        if "daft" in clients:
            raise SystemExit("the daft client needs daft: pip install daft (or leave it out with --clients)")
        daft_version = "not installed"
    latencies = [float(x) for x in args.latencies.split(",")]
    print(f"prompt_throughput: chat completions against the simulator (separate process), "
          f"{args.concurrency} requests in flight per client")
    print(f"  {machine_line()}; daft {daft_version}; Daft: into_batches({args.daft_batch}), "
          f"concurrency={max(1, args.concurrency // args.daft_batch - 1)}")
    print(f"  inferframe's HTTP client: {os.environ.get('INFERFRAME_HTTP') or 'reqwest where it runs, else aiohttp'} "
          "(INFERFRAME_HTTP)" + ("; inferframe-aiohttp: aiohttp" if "inferframe-aiohttp" in clients else ""))
    print(f"  aiohttp and inferframe run {args.repeat}x per latency, openai-sdk and daft {args.repeat_slow}x, rounds "
          f"interleaved; the table shows each client's fastest run (least disturbed by other load), 'median' the median "
          f"of its runs")
    results: dict = {}
    runs: dict = collections.defaultdict(list)
    slow = ("openai-sdk", "daft")
    for rep in range(max(args.repeat, args.repeat_slow)):
        for lat in latencies:
            n = args.rows_0ms if lat == 0 else args.rows_200ms
            for c in clients:
                if rep >= (args.repeat_slow if c in slow else args.repeat):
                    continue
                print(f"  round {rep + 1}: {c:<10} latency {lat:g} ms, {n:,} rows ...", flush=True)
                try:
                    r = run_one(c, lat, n, args)
                except Exception as exc:  # a hung or crashed client must not hide the others
                    print(f"    {c} failed: {exc}")
                    continue
                runs[(lat, c)].append(r["rows_per_s"])
                runs[(lat, c, "cpu")].append(r["cpu_s"] / r["rows"])
                if (lat, c) not in results or r["rows_per_s"] > results[(lat, c)]["rows_per_s"]:
                    results[(lat, c)] = r
    print(f"  {machine_line()} (after the runs)")

    for lat in latencies:
        ideal = args.concurrency / (lat / 1000) if lat else None
        print()
        print(f"latency {lat:g} ms, {args.rows_0ms if lat == 0 else args.rows_200ms:,} rows"
              + (f"; ideal {ideal:,.0f} rows/s ({args.concurrency} in flight / {lat / 1000:g} s)" if ideal else
                 "; ideal = CPU bound"))
        base = results.get((lat, "aiohttp"))
        rows = []
        for c in clients:
            r = results.get((lat, c))
            if r is None:
                rows.append([c, "failed"] + [""] * 15)
                continue
            rows.append([
                c, f"{r['seconds']:.2f}", f"{r['rows_per_s']:,.0f}", f"{statistics.median(runs[(lat, c)]):,.0f}",
                f"{100 * r['rows_per_s'] / base['rows_per_s']:.0f}%" if base else "-",
                f"{100 * r['rows_per_s'] / ideal:.0f}%" if ideal else "-",
                f"{r['ok']:,}", f"{r['failed']:,}", "yes" if r["answers_match"] else "NO",
                f"{r['server_requests']:,}", r["non_200"], r["max_in_flight"], f"{r['mean_in_flight']:.0f}",
                f"{r['cpu_s']:.1f}", f"{1e6 * r['cpu_s'] / r['rows']:,.0f}",
                f"{1e6 * r['gc_s'] / r['rows']:,.0f} ({r['gc_runs']})", f"{r['server_cpu_s']:.1f}",
            ])
        print(table(["client", "seconds", "rows/s", "median", "vs aiohttp", "vs ideal", "ok rows", "failed", "answers ok",
                     "server reqs", "non-200", "max in flight", "mean in flight", "client CPU s", "CPU us/row",
                     "GC us/row (runs)", "server CPU s"], rows))
        ifr = results.get((lat, "inferframe"))
        if ifr:
            parts = []
            for other in ("aiohttp", "aiohttp-gc", "daft", "openai-sdk"):
                o = results.get((lat, other))
                if o:
                    parts.append(f"inferframe/{other} = {ifr['rows_per_s'] / o['rows_per_s']:.2f}x")
            print("  " + ", ".join(parts))
            print_targets(lat, results, runs)
            if lat == 0:
                print_per_core(ifr)
            if lat == 0:
                print("  (at 0 ms the server answers each request without yielding, so its 'max in flight' is 1 and "
                      "its in-flight samples are 0: they say nothing about the client)")
            rep = ifr.get("report") or {}
            if rep:
                print(f"  inferframe last_run(): requests {rep.get('requests')}, retries {rep.get('retries')}, "
                      f"rate_limited {rep.get('rate_limited')}, errors {rep.get('errors')}")

    if args.sweep:
        print()
        run_sweep(args)

    if args.profile:
        out_dir = Path(__file__).resolve().parent / "out"
        out_dir.mkdir(exist_ok=True)
        for lat in latencies:
            n = args.rows_0ms if lat == 0 else args.rows_200ms
            path = str(out_dir / f"prompt_throughput_inferframe_{lat:g}ms.pyspy.txt")
            print()
            print(f"py-spy profile of the inferframe child, latency {lat:g} ms, {n:,} rows -> {path}")
            r = run_one("inferframe", lat, n, args, profile_to=path)
            print(f"  (under py-spy: {r['rows_per_s']:,.0f} rows/s)")
            print_profile(path)


if __name__ == "__main__":
    main()
