"""Async UDF throughput, inferframe vs Daft, measured side by side in one run.

10,000 rows go through an async UDF that sleeps 1 s, with 1,000 rows in flight,
so the ideal is rows / in_flight * latency = 10 s. Pipeline, in both engines:

    from_pydict({"id", "text"})
      -> with_column("prompt", format("Summarise: {}", col("text")))
      -> with_column("out", summarise(col("prompt")))      # async, sleeps `latency`
      -> to_arrow()

Each engine/config runs in its own fresh Python process. A 10-row warm-up query
(UDF without sleep) runs first in each process and is not timed, so one-time
engine start-up is excluded. The UDF counts how many calls are in flight at once
(bench/_util.py:InFlight), so the table shows the concurrency each engine
actually used, not just the one asked for.

How the 1,000-row bound is expressed:
  * inferframe: ``@ifr.func(max_concurrency=1000)`` (max_concurrency = rows in flight).
  * Daft 0.7.x: ``@daft.func(max_concurrency=N)`` on an async function bounds the
    number of *batches* (morsels) in flight, each batch running all its rows
    concurrently with asyncio.gather, and it lets N+1 batches be in flight (it
    spawns, then drains while more than N are pending). So the bounded Daft config uses
    ``into_batches(B)`` with ``max_concurrency = in_flight // B - 1`` (default B=100 ->
    max_concurrency=9 -> at most 10 x 100 = 1,000 rows in flight). For reference
    the run also shows ``@daft.func(max_concurrency=1000)`` on its own, which does
    not bound rows (all 10,000 start at once).

Usage:
    .venv/bin/python bench/async_udf_vs_daft.py
    .venv/bin/python bench/async_udf_vs_daft.py --rows 2000 --in-flight 200 --latency 0.5
    .venv/bin/python bench/async_udf_vs_daft.py --no-daft-reference   # skip the unbounded Daft row
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _util  # noqa: E402  (imported by module so Daft pickles a reference to the counter)
from _util import emit_result, human_rows, now, run_child, table  # noqa: E402


def make_data(rows: int) -> dict:
    return {
        "id": list(range(rows)),
        "text": [f"Review {i:08d}: works as described" for i in range(rows)],
    }


# --------------------------------------------------------------------------- children
def run_inferframe(args: argparse.Namespace) -> dict:
    import inferframe as ifr
    from inferframe.functions import format

    latency = args.latency

    @ifr.func(max_concurrency=args.in_flight)
    async def summarise(prompt: str) -> str:
        _util.IN_FLIGHT.enter()
        try:
            await asyncio.sleep(latency)
        finally:
            _util.IN_FLIGHT.exit()
        return "ok:" + prompt[18:26]  # the id digits of "Summarise: Review 00000042: ..."

    @ifr.func(max_concurrency=args.in_flight)
    async def warm(prompt: str) -> str:
        return prompt

    def pipeline(data: dict, udf):
        return (
            ifr.from_pydict(data)
            .with_column("prompt", format("Summarise: {}", ifr.col("text")))
            .with_column("out", udf(ifr.col("prompt")))
        )

    pipeline(make_data(10), warm).to_arrow()
    df = pipeline(make_data(args.rows), summarise)
    t0 = now()
    result = df.to_arrow()
    seconds = now() - t0
    return {"seconds": seconds, "table": result,
            "how": f"@ifr.func(max_concurrency={args.in_flight})",
            "version": ifr.__version__}


def run_daft(args: argparse.Namespace, bounded: bool) -> dict:
    import daft
    from daft.functions import format

    latency = args.latency
    if bounded:
        batch = args.daft_batch
        mc = max(1, args.in_flight // batch - 1)
        how = f"@daft.func(max_concurrency={mc}) + into_batches({batch})"
    else:
        batch, mc = None, args.in_flight
        how = f"@daft.func(max_concurrency={mc})"

    @daft.func(max_concurrency=mc)
    async def summarise(prompt: str) -> str:
        _util.IN_FLIGHT.enter()
        try:
            await asyncio.sleep(latency)
        finally:
            _util.IN_FLIGHT.exit()
        return "ok:" + prompt[18:26]  # the id digits of "Summarise: Review 00000042: ..."

    @daft.func(max_concurrency=mc)
    async def warm(prompt: str) -> str:
        return prompt

    def pipeline(data: dict, udf):
        df = daft.from_pydict(data)
        if batch:
            df = df.into_batches(batch)
        return (
            df.with_column("prompt", format("Summarise: {}", daft.col("text")))
            .with_column("out", udf(daft.col("prompt")))
        )

    pipeline(make_data(10), warm).to_arrow()
    df = pipeline(make_data(args.rows), summarise)
    t0 = now()
    result = df.to_arrow()
    seconds = now() - t0
    return {"seconds": seconds, "table": result, "how": how, "version": daft.__version__}


def child(args: argparse.Namespace) -> None:
    if args.child == "inferframe":
        res = run_inferframe(args)
    else:
        res = run_daft(args, bounded=args.child == "daft")
    t = res.pop("table")
    # Order is not part of the check (Daft may reorder); every id must come back once with its own output.
    ids = t.column("id").to_pylist()
    outs = t.column("out").to_pylist()
    correct = sorted(ids) == list(range(args.rows)) and all(o == f"ok:{i:08d}" for i, o in zip(ids, outs))
    f = _util.IN_FLIGHT
    res.update(rows_out=t.num_rows, correct=bool(correct), max_in_flight=f.max, calls=f.calls,
               udf_pids=len(f.pids), udf_threads=len(f.threads), same_process=os.getpid() in f.pids)
    emit_result(res)


# --------------------------------------------------------------------------- parent
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--in-flight", type=int, default=1_000, help="rows in flight (max_concurrency)")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds each UDF call sleeps")
    ap.add_argument("--daft-batch", type=int, default=100, help="into_batches() size for the bounded Daft config")
    ap.add_argument("--no-daft-reference", action="store_true", help="skip Daft with max_concurrency=in_flight alone")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--child", choices=["inferframe", "daft", "daft-unbounded"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    ideal = args.rows / args.in_flight * args.latency
    print(f"async_udf_vs_daft: {args.rows:,} rows, async UDF sleeping {args.latency:g} s, {args.in_flight:,} rows in "
          f"flight -> ideal {ideal:.1f} s ({args.rows / ideal:,.0f} rows/s); python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}")
    configs = [("inferframe", "inferframe"), ("daft", "daft (bounded)")]
    if not args.no_daft_reference:
        configs.append(("daft-unbounded", "daft (max_concurrency only)"))
    passthru = ["--rows", str(args.rows), "--in-flight", str(args.in_flight), "--latency", str(args.latency),
                "--daft-batch", str(args.daft_batch)]
    results = {}
    for key, label in configs:
        print(f"  running {label} ...", flush=True)
        r = run_child([__file__, "--child", key, *passthru], env={"DAFT_PROGRESS_BAR": "0"}, timeout=args.timeout)
        r["label"] = label
        r["rows_per_s"] = args.rows / r["seconds"]
        results[key] = r
        print(f"    {r['seconds']:.2f} s, max in flight {r['max_in_flight']}, {r['rows_out']:,} rows, "
              f"correct={r['correct']}", flush=True)

    print(f"\nResults ({human_rows(args.rows)} rows, {args.latency:g} s per call, target {args.in_flight:,} rows in flight, "
          f"ideal {ideal:.1f} s; each engine in its own process, warm-up excluded)")
    print(table(
        ["engine", "version", "concurrency setting", "max rows in flight (measured)", "seconds", "rows/s",
         "% of ideal", "rows out", "correct"],
        [[r["label"], r["version"], r["how"], r["max_in_flight"], f"{r['seconds']:.2f}", f"{r['rows_per_s']:,.0f}",
          f"{100 * ideal / r['seconds']:.0f}%", f"{r['rows_out']:,}", "yes" if r["correct"] else "NO"]
         for r in results.values()],
        aligns="lllrrrrrl",
    ))
    ifr_r, daft_r = results["inferframe"], results["daft"]
    print()
    print(f"inferframe / daft (bounded, <= {args.in_flight:,} rows in flight): time ratio "
          f"{ifr_r['seconds']:.2f} / {daft_r['seconds']:.2f} s = {ifr_r['seconds'] / daft_r['seconds']:.2f}x, "
          f"throughput ratio {ifr_r['rows_per_s'] / daft_r['rows_per_s']:.2f}x")
    if "daft-unbounded" in results:
        u = results["daft-unbounded"]
        print(f"inferframe / daft (max_concurrency={args.in_flight} only, measured {u['max_in_flight']:,} rows in flight; "
              f"not like-for-like): time ratio {ifr_r['seconds'] / u['seconds']:.2f}x")
    for r in results.values():
        if r["max_in_flight"] > args.in_flight:
            print(f"note: {r['label']} had {r['max_in_flight']:,} rows in flight, above the {args.in_flight:,} asked for.")


if __name__ == "__main__":
    main()
