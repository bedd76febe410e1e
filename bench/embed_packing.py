"""Embeddings over an API: requests packed by a token budget vs one row per request.

Runs embed_text over N review-like rows (default 20,000) against the project's simulator in its own
process (its default latency), once with packing (the defaults: 2,048 inputs / 300,000 tokens per
request) and once with ``max_batch_inputs=1`` (what a loop calling the API per row sends), each with
an empty cache. Prints requests sent, rows/s and whether the vectors agree.

    .venv/bin/python bench/embed_packing.py [--rows 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _util import table  # noqa: E402
from embed_throughput import make_texts  # noqa: E402


def run(texts: list[str], base_url: str, **options) -> np.ndarray:
    import inferframe as ifr
    from inferframe.functions import embed_text

    df = ifr.from_pydict({"t": texts}).with_column("v", embed_text(
        ifr.col("t"), provider="openai", base_url=base_url, api_key="k", model="text-embedding-3-small",
        cache_dir=tempfile.mkdtemp(prefix="inferframe-bench-embed-"), max_concurrency=64, **options))
    out = df.to_arrow(progress=False)
    assert out.column("v_error").null_count == len(texts), "some rows failed"
    return out.column("v").combine_chunks().values.to_numpy().reshape(len(texts), -1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20_000)
    args = p.parse_args()
    from inferframe.simulator import Simulator, SimulatorConfig

    texts = make_texts(args.rows)
    print(f"embed_packing: {args.rows:,} rows, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    rows, results = [], {}
    with Simulator.spawn(SimulatorConfig(track_request_hashes=False)) as sim:
        for label, opts in (("packed (defaults)", {}), ("one row per request", {"max_batch_inputs": 1})):
            before = sim.stats()["total_requests"]
            t = time.perf_counter()
            results[label] = run(texts, sim.base_url, **opts)
            dt = time.perf_counter() - t
            sent = sim.stats()["total_requests"] - before
            rows.append([label, f"{sent:,}", f"{dt:.2f}", f"{args.rows / dt:,.0f}"])
    print(table(["mode", "requests", "seconds", "rows/s"], rows, "lrrr"))
    a, b = results.values()
    print(f"\nsame vectors: {bool(np.allclose(a, b, atol=1e-6))}; packed/one-per-row speed: "
          f"{float(rows[0][3].replace(',', '')) / float(rows[1][3].replace(',', '')):.1f}x; "
          f"requests saved: {1 - int(rows[0][1].replace(',', '')) / int(rows[1][1].replace(',', '')):.2%}")


if __name__ == "__main__":
    main()
