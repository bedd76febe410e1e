"""The two response-cache stores side by side: the SQLite file and PostgreSQL (issue 33 item 8).

Targets: the cached rerun of a 100,000-row prompt() job from PostgreSQL runs at >= 50,000 rows/s;
a live run on the simulator at 512 requests in flight loses no more than 5% rows/s with the
PostgreSQL store against the SQLite file.

One run, both stores, each step in a fresh Python process:

1. a real PostgreSQL 16 (pgserver, from PyPI; a Unix socket, as a server on the same host);
2. seed: one answer per row of a 100k-row input stored under the key the job gives the row,
   in each store (``put_many``);
3. cached rerun: ``read_parquet(...).with_column("a", prompt(...))`` streamed, against the
   simulator; it must send 0 requests and count one cache hit per row;
4. live run: ``--live`` rows (default 20k) through the simulator (its own process, ``--latency``
   ms per request) at ``max_concurrency=512``, each store in turn, ``--rounds`` times (best kept),
   each round with fresh keys (a new prompt_version).

    .venv/bin/python bench/cache_store.py
    .venv/bin/python bench/cache_store.py --rows 100k --live 20000 --rounds 2
    .venv/bin/python bench/cache_store.py --live 0     # the cached rerun alone
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _util import OUT_DIR, emit_result, human_rows, parse_rows, run_child, table  # noqa: E402

TARGET_RERUN = 50_000
TARGET_LIVE_LOSS = 0.05
ANSWER = "sim answer: " + "x" * 120


def _prompt(base_url: str, cache_dir: str, url: str | None, version: str | None = None):
    from inferframe import col
    from inferframe.functions import prompt

    extra = {"cache_url": url} if url else {}
    return prompt(col("q"), provider="openai", base_url=base_url, api_key="k", model="gpt-5-mini",
                  use_chat_completions=True, max_concurrency=512, cache_dir=cache_dir, prompt_version=version,
                  **extra)


def input_path(n: int) -> Path:
    path = OUT_DIR / f"cache_store_input_{human_rows(n)}.parquet"
    if not path.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        OUT_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.table({"q": [f"question number {i}" for i in range(n)]}), tmp, row_group_size=100_000)
        tmp.rename(path)
    return path


def child_seed(n: int, base_url: str, cache_dir: str, url: str) -> None:
    import pyarrow.parquet as pq

    from inferframe.ai.requests import build_request
    from inferframe.providers.registry import build
    from inferframe.runtime.cache import cache_key, open_cache

    expr = _prompt(base_url, cache_dir, url or None)
    config = expr._node.child.args[0].udf.owner.args[0]
    identity = build(config.provider).cache_identity
    store = open_cache(cache_dir, url or None)
    t = time.perf_counter()
    for batch in pq.ParquetFile(input_path(n)).iter_batches(batch_size=20_000, columns=["q"]):
        items = []
        for q in batch.column(0).to_pylist():
            r = build_request(config, [q])
            items.append((cache_key(identity, r.endpoint, r.body, config.runtime.prompt_version), ANSWER, 12, 30))
        store.put_many(items)
    store.flush()
    seconds = time.perf_counter() - t
    if url:
        # A rerun comes long after the first run: by then autovacuum has visited the new rows (set their
        # hint bits, the visibility map and statistics), which the first read of fresh rows otherwise does.
        store._query(lambda cur: cur.execute("VACUUM (ANALYZE) inferframe_responses"))
    emit_result({"rows": len(store), "seconds": seconds})


def child_rerun(n: int, base_url: str, cache_dir: str, url: str) -> None:
    import inferframe as ifr
    from inferframe.observe import last_run

    df = ifr.read_parquet(str(input_path(n))).with_column("a", _prompt(base_url, cache_dir, url or None))
    t = time.perf_counter()
    rows = 0
    for batch in df.iter_batches(progress=False):
        rows += batch.num_rows
    dt = time.perf_counter() - t
    run = last_run()[0]
    emit_result({"rows": rows, "seconds": dt, "cache_hits": run["cache_hits"], "requests": run["requests"]})


def child_live(n: int, base_url: str, cache_dir: str, url: str, version: str) -> None:
    import inferframe as ifr
    from inferframe.observe import last_run
    from inferframe.runtime.cache import open_cache

    df = ifr.from_pydict({"q": [f"live question {i}" for i in range(n)]}).with_column(
        "a", _prompt(base_url, cache_dir, url or None, version))
    t = time.perf_counter()
    rows = 0
    for batch in df.iter_batches(progress=False):
        rows += batch.num_rows
    unwritten = open_cache(cache_dir, url or None).flush(timeout=60)  # every answer stored, as SQLite's are
    dt = time.perf_counter() - t
    run = last_run()[0]
    emit_result({"rows": rows, "seconds": dt, "requests": run["requests"], "errors": run["errors"],
                 "unwritten": unwritten})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="100k")
    ap.add_argument("--live", type=int, default=20_000)
    ap.add_argument("--latency", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", nargs="*")
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        {"seed": child_seed, "rerun": child_rerun, "live": child_live}[kind](int(rest[0]), *rest[1:])
        return

    import pgserver

    from inferframe.simulator import Simulator, SimulatorConfig

    n = parse_rows(args.rows)
    input_path(n)
    work = Path(tempfile.mkdtemp(prefix="inferframe-bench-store-"))
    pgdata = tempfile.mkdtemp(prefix="inferframe-bench-pg-")
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    sock = urllib.parse.parse_qs(urllib.parse.urlsplit(server.get_uri()).query)["host"][0]
    url = f"postgresql://postgres:bench-password@/postgres?host={sock}"
    me = [__file__, "--child"]
    stores = [("sqlite", ""), ("postgresql", url)]
    rows_out = []
    try:
        with Simulator(SimulatorConfig(allow_unknown_models=True)) as sim0:  # the rerun sends nothing
            for name, u in stores:
                cache_dir = str(work / f"{name}-rerun")
                seed = run_child(me + ["seed", str(n), sim0.base_url, cache_dir, u])
                rerun = run_child(me + ["rerun", str(n), sim0.base_url, cache_dir, u])
                assert rerun["requests"] == 0 and rerun["cache_hits"] == n, rerun
                rows_out.append([name, "seed (put_many)", f"{seed['rows']:,}", f"{seed['seconds']:.2f}",
                                 f"{seed['rows'] / seed['seconds']:,.0f}"])
                rows_out.append([name, "cached rerun", f"{rerun['rows']:,}", f"{rerun['seconds']:.2f}",
                                 f"{rerun['rows'] / rerun['seconds']:,.0f}"])
        live: dict[str, list[float]] = {"sqlite": [], "postgresql": []}
        sim = Simulator.spawn(SimulatorConfig(allow_unknown_models=True, latency_ms=args.latency))
        try:
            for k in range(args.rounds if args.live else 0):  # --live 0: the cached rerun alone
                for name, u in stores if k % 2 == 0 else list(reversed(stores)):
                    r = run_child(me + ["live", str(args.live), sim.base_url, str(work / f"{name}-live"), u, f"r{k}"])
                    assert r["requests"] == args.live and r["errors"] == 0 and r["unwritten"] == 0, r
                    live[name].append(r["rows"] / r["seconds"])
                    rows_out.append([name, f"live run {k + 1} (512 in flight, {args.latency:g} ms)",
                                     f"{r['rows']:,}", f"{r['seconds']:.2f}", f"{r['rows'] / r['seconds']:,.0f}"])
        finally:
            sim.close()
    finally:
        server.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(table(["store", "step", "rows", "seconds", "rows/s"], rows_out, "llrrr"))
    pg_rerun = float(rows_out[3][4].replace(",", ""))
    print(f"\ncached rerun from PostgreSQL: {pg_rerun:,.0f} rows/s (target >= {TARGET_RERUN:,}): "
          f"{'met' if pg_rerun >= TARGET_RERUN else 'NOT met'}")
    if not args.live:
        return
    best = {k: max(v) for k, v in live.items()}
    loss = 1 - best["postgresql"] / best["sqlite"]
    print(f"live run, best of {args.rounds}: SQLite {best['sqlite']:,.0f} rows/s, PostgreSQL "
          f"{best['postgresql']:,.0f} rows/s: PostgreSQL {loss:+.1%} slower (target <= {TARGET_LIVE_LOSS:.0%}): "
          f"{'met' if loss <= TARGET_LIVE_LOSS else 'NOT met'}")


if __name__ == "__main__":
    main()
