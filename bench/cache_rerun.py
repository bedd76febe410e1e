"""Never pay twice, measured: a rerun of a finished job is served from the response cache.

Target: the cached rerun of a 1,000,000-row prompt() job runs at >= 100,000 rows/s, in flat
memory (peak RSS at 1M rows < 1.25x that at 100k rows), quoted next to a plain pyarrow read
of the same input.

Per size (default 100k and 1M rows), each step in a fresh Python process:

1. seed: the input Parquet file (one string column ``q``, 100k-row row groups) is written
   once under bench/out/, and the response cache is filled with one answer per row, stored
   under the key the job's own request builder and ``cache_key`` give each row (sending 1M
   requests through the simulator would take many minutes on 2 CPUs);
2. pyarrow: ``pyarrow.parquet.read_table`` of the same file (the floor: reading, nothing else);
3. rerun: ``read_parquet(...).with_column("a", prompt(...))`` streamed with ``iter_batches``
   (batches are counted and dropped) against the project's simulator; it must send zero
   requests and count one cache hit per row. Reports seconds, rows/s, CPU us per row and
   peak RSS (psutil samples every 50 ms and ru_maxrss).

Then a real first run and its rerun at ``--first-run`` rows (default 20k) through the
simulator (its own process, 0 ms latency), which checks that answers stored by a real run are
found by the rerun, and ResponseCache.put / get per answer.

    .venv/bin/python bench/cache_rerun.py                          # 100k and 1M rows
    .venv/bin/python bench/cache_rerun.py --rows 100k --first-run 0
    .venv/bin/python bench/cache_rerun.py --before /tmp/before/src  # and another checkout, side by side
    PYTHONPATH=/tmp/before/src .venv/bin/python bench/cache_rerun.py   # another checkout alone
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _util import OUT_DIR, PeakRSS, emit_result, human_rows, parse_rows, run_child, table  # noqa: E402

TARGET_ROWS_S = 100_000
FLAT_RATIO = 1.25
ANSWER = "sim answer: " + "x" * 120  # about the size of the simulator's answers


def _prompt(base_url: str, cache_dir: str):
    from inferframe import col
    from inferframe.functions import prompt

    return prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                  use_chat_completions=True, max_concurrency=256, cache_dir=cache_dir)


def input_path(n: int) -> Path:
    path = OUT_DIR / f"cache_rerun_input_{human_rows(n)}.parquet"
    if not path.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        OUT_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.table({"q": [f"question number {i}" for i in range(n)]}), tmp, row_group_size=100_000)
        tmp.rename(path)
    return path


def child_seed(n: int, base_url: str, cache_dir: str) -> None:
    """Store one answer per row under the key the job gives it; uses only APIs older checkouts have."""
    import pyarrow.parquet as pq

    from inferframe.ai.requests import build_request
    from inferframe.providers.registry import build
    from inferframe.runtime.cache import ResponseCache, cache_key

    expr = _prompt(base_url, cache_dir)
    config = expr._node.child.args[0].udf.owner.args[0]  # the AICallConfig prompt() resolved
    identity = build(config.provider).cache_identity
    cache = ResponseCache(cache_dir)
    t = time.perf_counter()
    for batch in pq.ParquetFile(input_path(n)).iter_batches(batch_size=50_000, columns=["q"]):
        items = []
        for q in batch.column(0).to_pylist():
            r = build_request(config, [q])
            items.append((cache_key(identity, r.endpoint, r.body, config.runtime.prompt_version), ANSWER, 12, 30))
        cache.put_many(items)
    emit_result({"rows": len(cache), "seconds": time.perf_counter() - t})


def child_pyarrow(n: int) -> None:
    import pyarrow.parquet as pq

    path = input_path(n)
    pq.read_table(path)  # warm the page cache, as the rerun after it finds it
    t = time.perf_counter()
    rows = pq.read_table(path).num_rows
    emit_result({"rows": rows, "seconds": time.perf_counter() - t})


def child_rerun(n: int, base_url: str, cache_dir: str) -> None:
    import inferframe as ifr
    from inferframe.observe import last_run

    df = ifr.read_parquet(str(input_path(n))).with_column("a", _prompt(base_url, cache_dir))
    with PeakRSS() as rss:
        before_mib = rss.current_mib()
        cpu0, t = time.process_time(), time.perf_counter()
        rows = errors = 0
        for batch in df.iter_batches(progress=False):
            rows += batch.num_rows
            errors += batch.num_rows - batch.column("a_error").null_count
        dt, cpu = time.perf_counter() - t, time.process_time() - cpu0
    run = last_run()[0]
    emit_result({"rows": rows, "errors": errors, "seconds": dt, "cpu": cpu, "cache_hits": run["cache_hits"],
                 "requests": run["requests"], "rss_before": before_mib, "rss_peak": rss.peak_mib})


def child_first_run(n: int, base_url: str, cache_dir: str) -> None:
    import inferframe as ifr
    from inferframe.observe import last_run

    df = ifr.from_pydict({"q": [f"first run question {i}" for i in range(n)]}).with_column("a", _prompt(base_url, cache_dir))
    out = []
    for label in ("first run", "rerun"):
        t = time.perf_counter()
        table_ = df.to_arrow(progress=False)
        dt = time.perf_counter() - t
        assert table_.num_rows == n and table_.column("a_error").null_count == n
        out.append({"label": label, "seconds": dt, "cache_hits": last_run()[0]["cache_hits"],
                    "requests": last_run()[0]["requests"]})
    emit_result({"runs": out})


def child_cache_costs(samples: int = 20_000) -> None:
    from inferframe.runtime.cache import ResponseCache, cache_key

    cache = ResponseCache(tempfile.mkdtemp(prefix="inferframe-bench-cache-"))
    keys = [cache_key("openai:http://x/v1", "chat", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
            for i in range(samples)]
    t = time.perf_counter()
    for k in keys:
        cache.put(k, ANSWER, 12, 30)
    put_us = (time.perf_counter() - t) / samples * 1e6
    t = time.perf_counter()
    for k in keys:
        cache.get(k)
    get_us = (time.perf_counter() - t) / samples * 1e6
    many_us = None
    if hasattr(cache, "get_many"):
        t = time.perf_counter()
        for i in range(0, samples, 128):
            cache.get_many(keys[i:i + 128])
        many_us = (time.perf_counter() - t) / samples * 1e6
    emit_result({"put_us": put_us, "get_us": get_us, "get_many_us": many_us})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", action="append", type=parse_rows, help="row counts (repeatable; default 100k and 1M)")
    p.add_argument("--first-run", type=parse_rows, default=20_000, help="rows of the real first run (0: skip)")
    p.add_argument("--before", metavar="SRC", help="also run every measured step with PYTHONPATH=SRC (another "
                                                   "checkout's src/), side by side in this run")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--base-url", help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        {"seed": lambda: child_seed(args.n, args.base_url, args.cache_dir),
         "pyarrow": lambda: child_pyarrow(args.n),
         "rerun": lambda: child_rerun(args.n, args.base_url, args.cache_dir),
         "first": lambda: child_first_run(args.n, args.base_url, args.cache_dir),
         "costs": child_cache_costs}[args.child]()
        return

    from inferframe.simulator import Simulator, SimulatorConfig

    sizes = args.rows or [100_000, 1_000_000]
    me = str(Path(__file__).resolve())
    import inferframe

    trees = [("this", None)]
    if args.before:
        trees = [("before", {"PYTHONPATH": str(Path(args.before).resolve())}), ("after", None)]
    print(f"cache_rerun: {', '.join(human_rows(n) for n in sizes)} rows, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; inferframe from {Path(inferframe.__file__).parent}"
          + (f"; before: PYTHONPATH={args.before}" if args.before else ""), flush=True)
    rows, results = [], {}
    with Simulator.spawn(SimulatorConfig(track_request_hashes=False)) as sim:
        for n in sizes:
            input_path(n)
            cache_dir = tempfile.mkdtemp(prefix="inferframe-bench-cache-")
            common = ["--n", str(n), "--base-url", sim.base_url, "--cache-dir", cache_dir]
            seeded = run_child([me, "--child", "seed", *common])
            assert seeded["rows"] == n, seeded
            pa_rate = n / run_child([me, "--child", "pyarrow", "--n", str(n)])["seconds"]
            for label, env in trees:
                load = os.getloadavg()[0]
                sent0 = sim.stats()["total_requests"]
                r = run_child([me, "--child", "rerun", *common], env=env)
                sent = sim.stats()["total_requests"] - sent0
                ok = r["rows"] == n and r["errors"] == 0 and r["cache_hits"] == n and sent == 0
                results[label, n] = r
                rows.append([label, human_rows(n), f"{pa_rate:,.0f}", f"{r['seconds']:.2f}", f"{n / r['seconds']:,.0f}",
                             f"{n / r['seconds'] / pa_rate:.4f}", f"{r['cpu'] / n * 1e6:.1f}", f"{r['rss_before']:.0f}",
                             f"{r['rss_peak']:.0f}", f"{sent:,}", f"{r['cache_hits']:,}", "yes" if ok else "NO",
                             f"{load:.2f}"])
        print(table(["code", "rows", "pyarrow read rows/s", "rerun s", "rerun rows/s", "rerun/read", "CPU us/row",
                     "RSS before MiB", "peak RSS MiB", "requests sent", "cache hits", "all cached", "load"],
                    rows, "llrrrrrrrrrrr"))
        if args.first_run:
            first_rows = []
            for label, env in trees:
                cache_dir = tempfile.mkdtemp(prefix="inferframe-bench-cache-")
                first = run_child([me, "--child", "first", "--n", str(args.first_run), "--base-url", sim.base_url,
                                   "--cache-dir", cache_dir], env=env)["runs"]
                first_rows += [[label, f["label"], f"{f['seconds']:.2f}", f"{args.first_run / f['seconds']:,.0f}",
                                f"{f['requests']:,}", f"{f['cache_hits']:,}"] for f in first]
            print(f"\nreal first run through the simulator and its rerun, {human_rows(args.first_run)} rows "
                  "(from_pydict, to_arrow):")
            print(table(["code", "run", "seconds", "rows/s", "requests", "cache hits"], first_rows, "llrrrr"))
    for label, env in trees:
        costs = run_child([me, "--child", "costs"], env=env)
        line = (f"{label + ': ' if args.before else ''}ResponseCache.put: {costs['put_us']:.1f} us per answer "
                f"(committed at once, WAL); get: {costs['get_us']:.1f} us")
        if costs["get_many_us"] is not None:
            line += f"; get_many (128 keys a query): {costs['get_many_us']:.1f} us per key"
        print(("\n" if label == trees[0][0] else "") + line)
    big, small = max(sizes), min(sizes)
    verdict = []
    for label, _ in trees:
        who = f"{label}: " if args.before else ""
        rate = big / results[label, big]["seconds"]
        verdict.append(f"{who}rerun of {human_rows(big)} rows: {rate:,.0f} rows/s (target >= {TARGET_ROWS_S:,}): "
                       + ("PASS" if rate >= TARGET_ROWS_S else "FAIL"))
        if big != small:
            ratio = results[label, big]["rss_peak"] / results[label, small]["rss_peak"]
            verdict.append(f"{who}peak RSS {human_rows(big)} / {human_rows(small)}: {ratio:.2f}x (flat: < {FLAT_RATIO}): "
                           + ("PASS" if ratio < FLAT_RATIO else "FAIL"))
    if args.before:
        for n in sizes:
            b, a = results["before", n], results["after", n]
            verdict.append(f"{human_rows(n)} rows: after / before speed {b['seconds'] / a['seconds']:.2f}x, "
                           f"CPU per row {b['cpu'] / a['cpu']:.2f}x less")
    print("\n".join(verdict))


if __name__ == "__main__":
    main()
