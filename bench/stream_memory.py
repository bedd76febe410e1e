"""Streaming memory benchmark: does peak RSS stay flat as the row count grows?

Pipeline (one fresh Python process per size, so each peak RSS is its own):

    read_parquet(input)
      -> with_column("prompt", format("Summarise: {}", col("text")))
      -> with_column("out", async_udf(col("prompt")))   # await asyncio.sleep(latency)
      -> write_parquet(out_dir)

The input (id int64, text ~40 chars) is generated once per row count with
pyarrow, in row groups, under bench/out/ (gitignored) and reused afterwards.

Usage:
    .venv/bin/python bench/stream_memory.py                      # 1M and 10M rows
    .venv/bin/python bench/stream_memory.py --rows 100k --rows 1M  # quick check
    .venv/bin/python bench/stream_memory.py --rows 200k --sweep 1024,4096,16384

Requirement checked: peak RSS < 1 GiB and not growing with row count
(RSS(largest)/RSS(smallest) close to 1).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import (  # noqa: E402
    OUT_DIR, PeakRSS, emit_result, human_rows, now, parse_rows, run_child, table,
)

DEFAULT_ROWS = ["1M", "10M"]
DEFAULT_CONCURRENCY = 1024  # best of a 512..16384 sweep; higher is slower (see README)
DEFAULT_LATENCY = 0.01
ROW_GROUP_SIZE = 100_000
GIB_MIB = 1024.0


# --------------------------------------------------------------------------- input
def input_path(rows: int) -> Path:
    return OUT_DIR / f"stream_input_{rows}.parquet"


def ensure_input(rows: int, row_group_size: int = ROW_GROUP_SIZE) -> tuple[Path, bool]:
    """Write the input Parquet file for ``rows`` rows unless it is already cached."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = input_path(rows)
    if path.exists():
        try:
            if pq.read_metadata(path).num_rows == rows:
                return path, False
        except Exception:
            pass
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    phrases = pa.array([
        ": battery life is decent", ": arrived late, box damaged", ": works as described ok",
        ": would not buy this again", ": great value for the money", ": colour differs from photo",
    ])
    with pq.ParquetWriter(tmp, schema) as w:
        for start in range(0, rows, row_group_size):
            n = min(row_group_size, rows - start)
            ids = pa.array(range(start, start + n), type=pa.int64())
            num = pc.utf8_lpad(pc.cast(ids, pa.string()), 8, "0")
            tail = phrases.take(pa.array(ids.to_numpy() % len(phrases)))
            text = pc.binary_join_element_wise(pa.scalar("Review "), num, tail, "")  # ~40 chars
            w.write_table(pa.table({"id": ids, "text": text}, schema=schema), row_group_size=row_group_size)
    os.replace(tmp, path)
    return path, True


def output_rows(out_dir: Path) -> tuple[int, int]:
    """(rows by pyarrow footers, number of files) of a written output directory."""
    import pyarrow.parquet as pq

    files = sorted(p for p in out_dir.iterdir() if p.suffix == ".parquet")
    return sum(pq.read_metadata(p).num_rows for p in files), len(files)


# --------------------------------------------------------------------------- child
def child(args: argparse.Namespace) -> None:
    rss = PeakRSS(interval=0.05)
    rss.__enter__()
    import inferframe as ifr
    from inferframe.functions import format

    latency = args.latency
    stats = {"in_flight": 0, "max_in_flight": 0}

    @ifr.func(max_concurrency=args.concurrency)
    async def summarise(prompt: str) -> str:
        stats["in_flight"] += 1  # single event loop: no lock needed
        if stats["in_flight"] > stats["max_in_flight"]:
            stats["max_in_flight"] = stats["in_flight"]
        await asyncio.sleep(latency)
        stats["in_flight"] -= 1
        return "ok:" + prompt[-6:]

    df = (
        ifr.read_parquet(args.input)
        .with_column("prompt", format("Summarise: {}", ifr.col("text")))
        .with_column("out", summarise(ifr.col("prompt")))
    )
    baseline = rss.current_mib()
    t0 = now()
    cpu0 = os.times()
    df.write_parquet(args.out)
    seconds = now() - t0
    cpu1 = os.times()
    rss.__exit__(None, None, None)
    emit_result({
        "seconds": seconds,
        "cpu_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "baseline_mib": baseline,
        "peak_mib": rss.peak_mib,
        "sampled_peak_mib": rss.sampled_peak_mib,
        "ru_maxrss_mib": rss.ru_maxrss_mib(),
        "samples": rss.samples,
        "max_in_flight": stats["max_in_flight"],
    })


# --------------------------------------------------------------------------- parent
def run_size(rows: int, concurrency: int, latency: float, timeout: float | None) -> dict:
    t0 = now()
    path, made = ensure_input(rows)
    gen_s = now() - t0
    out_dir = OUT_DIR / f"stream_output_{rows}"
    shutil.rmtree(out_dir, ignore_errors=True)
    print(f"  {human_rows(rows):>5} rows, max_concurrency={concurrency}: input "
          f"{'generated in %.1f s' % gen_s if made else 'cached'} ({path.stat().st_size / 2**20:.0f} MiB); running ...",
          flush=True)
    res = run_child([__file__, "--child", "--input", str(path), "--out", str(out_dir),
                     "--concurrency", str(concurrency), "--latency", str(latency)], timeout=timeout)
    got, files = output_rows(out_dir)
    res.update(rows=rows, concurrency=concurrency, out_rows=got, out_files=files)
    res["rows_per_s"] = rows / res["seconds"]
    res["load1"] = os.getloadavg()[0]
    print(f"        done in {res['seconds']:.1f} s, {res['rows_per_s']:,.0f} rows/s, "
          f"peak RSS {res['peak_mib']:.0f} MiB, output {got:,} rows in {files} file(s)", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", action="append", help="row count (e.g. 1M, 250k); repeatable; default 1M and 10M")
    ap.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="max_concurrency (rows in flight)")
    ap.add_argument("--latency", type=float, default=DEFAULT_LATENCY, help="seconds each UDF call sleeps")
    ap.add_argument("--sweep", help="comma-separated max_concurrency values to compare at the first --rows size")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a child run is killed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    sizes = [parse_rows(r) for r in (args.rows or DEFAULT_ROWS)]
    import inferframe

    print(f"stream_memory: python {sys.version.split()[0]}, inferframe {inferframe.__version__}, "
          f"{os.cpu_count()} CPUs, UDF latency {args.latency * 1000:.0f} ms")

    if args.sweep:
        rows = sizes[0]
        results = [run_size(rows, int(c), args.latency, args.timeout) for c in args.sweep.split(",")]
        print(f"\nmax_concurrency sweep at {human_rows(rows)} rows (UDF sleeps {args.latency * 1000:.0f} ms)")
        print(table(
            ["max_concurrency", "seconds", "rows/s", "ideal rows/s", "% of ideal", "max in flight", "CPU s",
             "peak RSS MiB", "load avg 1m"],
            [[r["concurrency"], f"{r['seconds']:.2f}", f"{r['rows_per_s']:,.0f}",
              f"{r['concurrency'] / args.latency:,.0f}",
              f"{100 * r['rows_per_s'] / (r['concurrency'] / args.latency):.1f}%", r["max_in_flight"],
              f"{r['cpu_s']:.1f}", f"{r['peak_mib']:.0f}", f"{r['load1']:.2f}"] for r in results],
        ))
        lo = min(results, key=lambda r: r["concurrency"])
        hi = max(results, key=lambda r: r["concurrency"])
        if hi is not lo:  # issue 36: many rows in flight cost no more per row than few
            ratio = hi["rows_per_s"] / lo["rows_per_s"]
            print(f"  target rows/s at {hi['concurrency']:,} >= 0.90x at {lo['concurrency']:,}: {ratio:.2f}x -> "
                  f"{'PASS' if ratio >= 0.9 else 'FAIL'}")
        return

    results = [run_size(rows, args.concurrency, args.latency, args.timeout) for rows in sizes]
    ideal = args.concurrency / args.latency
    print(f"\nResults (max_concurrency={args.concurrency}, UDF sleeps {args.latency * 1000:.0f} ms, "
          f"ideal = in_flight/latency = {ideal:,.0f} rows/s; one fresh process per size)")
    print(table(
        ["rows", "seconds", "rows/s", "% of ideal", "CPU s", "CPU us/row", "max in flight", "RSS before run MiB",
         "peak RSS MiB", "output rows", "rows match", "load avg 1m"],
        [[f"{r['rows']:,}", f"{r['seconds']:.1f}", f"{r['rows_per_s']:,.0f}", f"{100 * r['rows_per_s'] / ideal:.1f}%",
          f"{r['cpu_s']:.1f}", f"{1e6 * r['cpu_s'] / r['rows']:.1f}", r["max_in_flight"],
          f"{r['baseline_mib']:.0f}", f"{r['peak_mib']:.0f}", f"{r['out_rows']:,}",
          "yes" if r["out_rows"] == r["rows"] else "NO", f"{r['load1']:.2f}"] for r in results],
    ))
    small, large = min(results, key=lambda r: r["rows"]), max(results, key=lambda r: r["rows"])
    ok_mem = all(r["peak_mib"] < GIB_MIB for r in results)
    ok_rows = all(r["out_rows"] == r["rows"] for r in results)
    print()
    if large is not small:
        ratio = large["peak_mib"] / small["peak_mib"]
        print(f"RSS({human_rows(large['rows'])}) / RSS({human_rows(small['rows'])}) = "
              f"{large['peak_mib']:.0f} / {small['peak_mib']:.0f} MiB = {ratio:.2f}x "
              f"(rows grew {large['rows'] / small['rows']:.0f}x)")
        flat = ratio < 1.25
        print(f"peak RSS not growing with rows (ratio < 1.25): {'PASS' if flat else 'FAIL'}")
    print(f"peak RSS under 1 GiB at every size: {'PASS' if ok_mem else 'FAIL'}")
    print(f"output row count equals input at every size: {'PASS' if ok_rows else 'FAIL'}")


if __name__ == "__main__":
    main()
