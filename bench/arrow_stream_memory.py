"""Arrow stream export memory: does exporting a lazy scan keep peak RSS at a few record batches?

For each row count, one fresh Python process per way of taking the rows (so each peak RSS is its own):

    df = read_parquet(input).with_column("n", col("text").str.length())    # lazy: nothing read yet

    stream    pa.RecordBatchReader.from_stream(df), read batch by batch (rows and sum(n) counted, batches dropped)
    duckdb    duckdb.sql("select count(*), sum(n) from df")     # DuckDB scans df's Arrow stream
    to_arrow  df.to_arrow()                                     # the reference: the whole result in memory

The input (id int64, text ~40 chars, 100k-row row groups) is the one bench/stream_memory.py writes, cached
under bench/out/. Peak RSS is the larger of a psutil sample every 20 ms and the kernel's ru_maxrss; the
"RSS before" column is after imports and plan building. "result size" is the Arrow size of the whole
result (to_arrow's table.nbytes), what a materialising export would hold.

Usage:
    .venv/bin/python bench/arrow_stream_memory.py                  # 1M and 10M rows
    .venv/bin/python bench/arrow_stream_memory.py --rows 200k      # quick check
    .venv/bin/python bench/arrow_stream_memory.py --modes stream   # one way only

Requirement checked: the streamed exports' peak RSS grows by less than 1.25x from the smallest to the
largest row count, while to_arrow's grows with the rows.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PeakRSS, emit_result, human_rows, now, parse_rows, run_child, table  # noqa: E402
from stream_memory import ensure_input  # noqa: E402

DEFAULT_ROWS = ["1M", "10M"]
MODES = ("stream", "duckdb", "to_arrow")
MIB = 1024 * 1024


def child(args: argparse.Namespace) -> None:
    rss = PeakRSS(interval=0.02)
    rss.__enter__()
    import pyarrow as pa

    import inferframe as ifr

    df = ifr.read_parquet(args.input).with_column("n", ifr.col("text").str.length())
    baseline = rss.current_mib()
    t0 = now()
    result_bytes = None
    batches = 0
    if args.mode == "stream":
        rows = total = 0
        reader = pa.RecordBatchReader.from_stream(df)
        for batch in reader:
            rows += batch.num_rows
            total += pa.compute.sum(batch.column("n")).as_py() or 0
            batches += 1
    elif args.mode == "duckdb":
        import duckdb

        [(rows, total)] = duckdb.sql("select count(*), sum(n) from df").fetchall()
    else:
        result = df.to_arrow()
        rows, total = result.num_rows, pa.compute.sum(result.column("n")).as_py()
        result_bytes = result.nbytes
        batches = result.column(0).num_chunks
    seconds = now() - t0
    rss.__exit__(None, None, None)
    emit_result({"rows_read": rows, "sum_n": int(total), "seconds": seconds, "baseline_mib": baseline,
                 "peak_mib": rss.peak_mib, "result_bytes": result_bytes, "batches": batches})


def run(rows: int, mode: str, timeout: float | None) -> dict:
    path, made = ensure_input(rows)
    res = run_child([__file__, "--child", "--input", str(path), "--mode", mode], timeout=timeout)
    res.update(rows=rows, mode=mode, file_mib=path.stat().st_size / MIB)
    print(f"  {human_rows(rows):>5} rows, {mode:<8}: {res['seconds']:.2f} s, peak RSS {res['peak_mib']:.0f} MiB "
          f"(before {res['baseline_mib']:.0f} MiB){', input generated' if made else ''}", flush=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", action="append", help="row count (e.g. 1M, 250k); repeatable; default 1M and 10M")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a child run is killed")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    sizes = sorted(parse_rows(r) for r in (args.rows or DEFAULT_ROWS))
    modes = [m for m in args.modes.split(",") if m]
    import pyarrow

    import inferframe

    print(f"arrow_stream_memory: python {sys.version.split()[0]}, inferframe {inferframe.__version__}, "
          f"pyarrow {pyarrow.__version__}, {os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.2f}")
    results = [run(rows, mode, args.timeout) for rows in sizes for mode in modes]
    sizes_by_rows = {r["rows"]: r["result_bytes"] for r in results if r["result_bytes"]}
    print("\nPeak RSS per way of exporting a lazy read_parquet(...).with_column(...) (one fresh process each)")
    print(table(
        ["rows", "export", "seconds", "rows read", "RSS before MiB", "peak RSS MiB", "peak - before MiB",
         "result size MiB", "input file MiB"],
        [[f"{r['rows']:,}", r["mode"], f"{r['seconds']:.2f}", f"{r['rows_read']:,}", f"{r['baseline_mib']:.0f}",
          f"{r['peak_mib']:.0f}", f"{r['peak_mib'] - r['baseline_mib']:.0f}",
          f"{sizes_by_rows[r['rows']] / MIB:.0f}" if r["rows"] in sizes_by_rows else "-", f"{r['file_mib']:.0f}"]
         for r in results],
        "rlrrrrrrr",
    ))
    ok_rows = all(r["rows_read"] == r["rows"] for r in results)
    print(f"\nevery export read every row: {'PASS' if ok_rows else 'FAIL'}")
    if len(sizes) > 1:
        small, large = sizes[0], sizes[-1]
        for mode in modes:
            a = next(r for r in results if r["rows"] == small and r["mode"] == mode)
            b = next(r for r in results if r["rows"] == large and r["mode"] == mode)
            ratio = b["peak_mib"] / a["peak_mib"]
            verdict = "" if mode == "to_arrow" else f"  flat (< 1.25x): {'PASS' if ratio < 1.25 else 'FAIL'}"
            print(f"{mode:<8} peak RSS {human_rows(large)} / {human_rows(small)} = {b['peak_mib']:.0f} / "
                  f"{a['peak_mib']:.0f} MiB = {ratio:.2f}x (rows x{large // small}){verdict}")


if __name__ == "__main__":
    main()
