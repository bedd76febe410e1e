"""Prefix-aware scheduling against a server with a prefix cache: sorted vs arrival order, one run.

The workload (issue 14, benchmark a): 8 shared prefixes of about 2,000 tokens each (a document
per group), 4,000 rows interleaved (row i uses prefix i % 8), each row a short question after its
prefix. The server is the project's simulator in its own process with its vLLM-style prefix
cache (``prefix_cache_tokens``, an LRU of 16-token blocks) smaller than the 8 prefixes together,
and ONE prefill engine of ``--prefill`` tokens/s that only uncached tokens use, plus a fixed
latency per request, as a GPU server whose prefill is compute-bound.

Both orders run the same ``prompt(..., provider="vllm")`` job (vLLM gets no cache hint: its
automatic prefix caching sees only the order): ``prefix_order=False`` (arrival order) and the
default (sorted). The simulator's cache is emptied between them. Printed: rows/s, the cached
share of input tokens as the server counted it (and as the client's last_run() read it from
usage), the prefill engine's busy time, and the sorted / arrival ratio. Target: >= 1.5x.

Usage:
    .venv/bin/python bench/prefix_cache_sim.py
    .venv/bin/python bench/prefix_cache_sim.py --rows 4000 --groups 8 --prefix-tokens 2000 --cache-tokens 8000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ["INFERFRAME_CACHE"] = "off"  # every row must reach the server
sys.path.insert(0, str(Path(__file__).resolve().parent))
# The spawned simulator imports its responder (bench/_prefix_answers.py) from here.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent),
                                                         os.environ.get("PYTHONPATH")]))

from _sim_util import machine_line  # noqa: E402
from _util import table  # noqa: E402

import inferframe as ifr  # noqa: E402
from inferframe.functions import prompt  # noqa: E402
from inferframe.observe.progress import last_run  # noqa: E402
from inferframe.simulator import Simulator, SimulatorConfig  # noqa: E402

MODEL = "gpt-5-mini"


def rows(n: int, groups: int, prefix_tokens: int) -> list[str]:
    """Row i: document i % groups (about prefix_tokens tokens at the simulator's 4 chars a token), then a question."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
    docs = []
    for g in range(groups):
        body = " ".join(f"{words[(g * 7 + k) % len(words)]}{g}-{k}" for k in range(prefix_tokens))
        docs.append(f"Document {g}:\n{body[: 4 * prefix_tokens]}\n\n")
    return [docs[i % groups] + f"Question {i}: is document {i % groups} about row {i}? Answer yes or no."
            for i in range(n)]


def run(base_url: str, texts: list[str], ordered: bool, concurrency: int) -> dict:
    df = ifr.from_pydict({"q": texts}).with_column(
        "a", prompt(ifr.col("q"), provider="vllm", base_url=base_url, model=MODEL, max_tokens=16,
                        max_concurrency=concurrency, prefix_order=ordered, use_chat_completions=True))
    t0 = time.perf_counter()
    out = df.to_arrow(progress=False)
    wall = time.perf_counter() - t0
    answered = out.column("a").null_count == 0
    # Output order: each answer belongs to its own row (the simulator answers with the row's question number).
    in_place = out.column("a").to_pylist() == [f"Question {i}" for i in range(len(texts))]
    stats = last_run()[0]
    return {"wall": wall, "answered": answered, "in_place": in_place, "client_cached": stats.get("cached_tokens", 0),
            "client_input": stats["input_tokens"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4000)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--prefix-tokens", type=int, default=2000)
    ap.add_argument("--cache-tokens", type=int, default=8000, help="the server's prefix cache (tokens)")
    ap.add_argument("--prefill", type=float, default=200_000, help="prefill tokens/s of the server's one engine")
    ap.add_argument("--latency-ms", type=float, default=200)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()

    texts = rows(args.rows, args.groups, args.prefix_tokens)
    cfg = SimulatorConfig(latency_ms=args.latency_ms, prefix_cache_tokens=args.cache_tokens,
                          prefill_tokens_per_second=args.prefill, responder="_prefix_answers:answer",
                          allow_unknown_models=True)
    print(machine_line())
    print(f"{args.rows:,} rows over {args.groups} interleaved prefixes of ~{args.prefix_tokens:,} tokens; server: "
          f"prefix cache {args.cache_tokens:,} tokens, prefill {args.prefill:,.0f} tokens/s, latency "
          f"{args.latency_ms:g} ms; {args.concurrency} in flight")
    results = {}
    with Simulator.spawn(cfg) as sim:
        run(sim.base_url, texts[:64], True, args.concurrency)  # warm-up: imports, connections
        for name, ordered in (("arrival", False), ("sorted", True)):
            sim.reset()  # empties the prefix cache and the counters
            r = run(sim.base_url, texts, ordered, args.concurrency)
            s = sim.stats()
            r.update(server_input=s["input_tokens"], server_cached=s["cached_tokens"],
                     prefill_busy=s.get("prefill_busy_s", 0.0))
            results[name] = r
    lines = []
    for name, r in results.items():
        lines.append([name, f"{args.rows:,}", f"{r['wall']:.2f}", f"{args.rows / r['wall']:,.1f}",
                      f"{r['server_cached'] / max(1, r['server_input']):.1%}",
                      f"{r['client_cached'] / max(1, r['client_input']):.1%}", f"{r['prefill_busy']:.2f}",
                      "yes" if r["answered"] and r["in_place"] else "NO"])
    print(table(["order", "rows", "wall s", "rows/s", "cached (server)", "cached (last_run)", "prefill busy s",
                 "all answered, in place"], lines))
    ratio = results["arrival"]["wall"] / results["sorted"]["wall"]
    print(f"sorted / arrival rows/s: {ratio:.2f}x (target >= 1.5x): {'PASS' if ratio >= 1.5 else 'FAIL'}")


if __name__ == "__main__":
    main()
