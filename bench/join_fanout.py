"""Fan-out join memory: does streaming a join whose keys match many rows keep peak RSS flat?

A 1,000-row frame joined to an N-row frame on one key value (every row matches every row) gives
1,000 x N rows. For each size, one fresh Python process (so each peak RSS is its own) runs:

    left = ifr.from_pydict({"k": [1] * 1000, "a": range(1000)})
    right = ifr.from_pydict({"k": [1] * N, "b": range(N)})      # N = 1,000 (1M rows) or 10,000 (10M rows)
    for batch in pa.RecordBatchReader.from_stream(left.join(right, on="k")): ...   # rows counted, batches dropped

Peak RSS is the larger of a psutil sample every 20 ms and the kernel's ru_maxrss; "before" is after
imports and building both frames. "largest batch" is the most rows in one streamed batch.

Usage:
    .venv/bin/python bench/join_fanout.py               # 1M and 10M output rows
    .venv/bin/python bench/join_fanout.py --rows 1M     # one size

Requirement checked: peak RSS grows by less than 1.25x from 1M to 10M output rows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import PeakRSS, emit_result, human_rows, now, parse_rows, run_child, table  # noqa: E402

LEFT_ROWS = 1000


def child(rows: int) -> None:
    rss = PeakRSS(interval=0.02)
    rss.__enter__()
    import pyarrow as pa

    import inferframe as ifr

    right_rows = rows // LEFT_ROWS
    left = ifr.from_pydict({"k": [1] * LEFT_ROWS, "a": list(range(LEFT_ROWS))})
    right = ifr.from_pydict({"k": [1] * right_rows, "b": list(range(right_rows))})
    baseline = rss.current_mib()
    t0 = now()
    total = batches = largest = 0
    for batch in pa.RecordBatchReader.from_stream(left.join(right, on="k")):
        total += batch.num_rows
        batches += 1
        largest = max(largest, batch.num_rows)
    seconds = now() - t0
    rss.__exit__(None, None, None)
    emit_result({"rows_read": total, "batches": batches, "largest": largest, "seconds": seconds,
                 "baseline_mib": baseline, "peak_mib": rss.peak_mib})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=["1M", "10M"], help="output rows (multiples of 1,000)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return
    results = []
    for text in args.rows:
        rows = parse_rows(text)
        res = run_child([__file__, "--child", str(rows)])
        if res["rows_read"] != rows:
            raise SystemExit(f"the join gave {res['rows_read']} rows, not {rows}")
        results.append([human_rows(rows), res["batches"], res["largest"], f"{res['seconds']:.2f}",
                        f"{res['baseline_mib']:.0f}", f"{res['peak_mib']:.0f}"])
        print(f"  {human_rows(rows):>5} rows: peak RSS {res['peak_mib']:.0f} MiB (before {res['baseline_mib']:.0f} MiB), "
              f"{res['batches']} batches of at most {res['largest']} rows, {res['seconds']:.2f} s", flush=True)
    print(table(["output rows", "batches", "largest batch", "seconds", "RSS before MiB", "peak RSS MiB"], results))
    if len(results) > 1:
        growth = float(results[-1][-1]) / float(results[0][-1])
        print(f"peak RSS from {results[0][0]} to {results[-1][0]} rows: x{growth:.2f} "
              f"({'flat' if growth < 1.25 else 'grows with the output'}; requirement < 1.25x)")


if __name__ == "__main__":
    main()
